//! What a phone call's loop is, whichever API answers it: the socket attached and re-attached
//! with backoff, the messages from the call session and the executor (answers, REFER done,
//! hang-up with a goodbye, handoff), the end of the call, and the order in which events leave.
//!
//! Each API's driver ([`crate::driver`] for Realtime, [`crate::live_driver`] for GPT-Live)
//! implements [`LineDriver`]: how its server events are read and what each message means for
//! its protocol. [`run`] is the loop they share. A dropped socket is re-attached (answers wait
//! in the outbox meanwhile) unless the call has been transferred, when a drop is its end.

mod socket;

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use secrecy::SecretString;
use switchboard_runtime::{Delivery, Invocation, InvocationRecord, SessionSnapshot};
use tokio::sync::{mpsc, oneshot};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;

use crate::api::{Api, CallsApi};

use socket::{Beat, Liveness};
pub(crate) use socket::{Outbox, Socket, log_by_api};

/// What reaches a call's driver besides socket traffic.
#[derive(Debug)]
pub(crate) enum DriverMsg {
    Delivery(Box<Delivery>),
    /// Hang up, as `function_call_id` asked: `done` is told at once that the hang-up is under
    /// way; that call's answer goes out first, then `goodbye` (if any) once the model is idle,
    /// and once it has been said the call is hung up.
    Hangup {
        goodbye: Option<String>,
        function_call_id: String,
        done: oneshot::Sender<Result<(), String>>,
    },
    /// A REFER that `function_call_id` asked for succeeded: the call is leaving; function calls
    /// are still answered (that one's answer is waited for before the line lets go), but no
    /// more responses are asked for.
    Transferred {
        function_call_id: String,
    },
    /// A slow tool's `messages.delayed` is due.
    Delayed {
        function_call_id: String,
    },
    /// Hang up and stop (the call was ended through the API, or the server shuts down: with
    /// no session behind it, a call would only be dead air).
    End,
    /// The call's session stopped because another node took the call over: stop without
    /// hanging up.
    Released,
    /// The active agent changed through a function call answered elsewhere (a call's MCP
    /// endpoint): the model gets the new agent's instructions and tools.
    HandedOff(String),
    /// A function call was answered elsewhere (over the call's MCP endpoint): its answer is no
    /// longer owed to this line.
    AnsweredElsewhere(String),
}

/// How a call ended, for the caller to record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallEnd {
    /// The call could not be accepted.
    NotAccepted,
    /// Switchboard hung up (end_call).
    HungUp,
    /// Transferred by REFER.
    Transferred,
    /// The call is gone at OpenAI's end (the caller hung up).
    Gone,
    /// Ended from this side (API or shutdown).
    Stopped,
    /// Another node owns the call now (this node was cut off past its lease): it has
    /// re-attached the socket; this node lets go without hanging up.
    Released,
}

/// Tunables of the loop.
#[derive(Debug, Clone)]
pub struct DriverOptions {
    /// How long a dropped socket is re-attached before the call is given up.
    pub reattach_for: Duration,
    /// The longest wait for the goodbye to be said before hanging up anyway.
    pub goodbye_timeout: Duration,
    /// GPT-Live: the most bytes of function call outputs sent for one backend turn (OpenAI
    /// refuses an overflowing one with `response_input_buffer_full`); a longer output is cut
    /// with a marker saying so.
    pub live_turn_budget: usize,
    /// A call taken over from a dead node continues the last answered response (sends its
    /// `response.create`) only when that answer is at most this old: the old owner may have
    /// died between the answer and its continuation. An older answer's node lived on past it
    /// (it sends the continuation at once), so continuing it again would make the model speak
    /// twice. Longer than a lease plus the sweep that finds the dead node.
    pub continue_within: Duration,
    /// The longest a line that has ended waits for the answers of the function calls whose
    /// transfer or hang-up it carried out ([`Line::owed`]), so their records say what
    /// happened.
    pub answers_wait: Duration,
    /// How often the socket is pinged: a quiet call's socket carries nothing else.
    pub ping_every: Duration,
    /// A socket from which nothing (no event, no pong) has come for this long is taken for
    /// dead, dropped and attached again (a call OpenAI no longer has then ends).
    pub silent_for: Duration,
    /// The longest this node serves a call: past it the call is hung up. `None`: the API's
    /// own bound ([`Api::longest_call`]) and five minutes more, as OpenAI ends a call first.
    pub longest_call: Option<Duration>,
}

impl Default for DriverOptions {
    fn default() -> Self {
        DriverOptions {
            reattach_for: Duration::from_secs(30),
            goodbye_timeout: Duration::from_secs(15),
            live_turn_budget: 30 * 1024,
            continue_within: Duration::from_secs(30),
            answers_wait: Duration::from_secs(10),
            ping_every: Duration::from_secs(20),
            silent_for: Duration::from_secs(60),
            longest_call: None,
        }
    }
}

/// What one turn of the loop leads to.
pub(crate) enum Step {
    Go,
    /// The socket is gone without the call ending: attach again.
    Dropped,
    /// Hang up now: what waits in the outbox (an answer) is written first.
    HangUp,
    End(CallEnd),
}

/// The part of a call's loop that does not depend on the API: which call, how to reach it,
/// its messages, the events waiting to be written, and whether it is leaving by transfer.
pub(crate) struct Line {
    /// The call's id (`rtc_…`) or GPT-Live session id (`live_…`).
    pub call_id: String,
    pub api: Api,
    pub key: SecretString,
    pub calls: CallsApi,
    pub options: DriverOptions,
    pub rx: mpsc::UnboundedReceiver<DriverMsg>,
    /// For timers (a slow tool's delayed message) to reach the loop.
    pub tx: mpsc::UnboundedSender<DriverMsg>,
    pub outbox: Outbox,
    /// A REFER succeeded: outputs still go, continuations do not, and a lost socket is the
    /// end of the call rather than a reason to re-attach.
    pub transferred: bool,
    /// Function calls whose terminal effect (a REFER, a hang-up) is under way and whose answer
    /// has not come yet: a hang-up waits for them, and a line that ends waits for them
    /// (at most [`DriverOptions::answers_wait`]) before it lets go, so the call's end does not
    /// cancel a tool whose effect happened.
    pub owed: Vec<String>,
}

impl Line {
    pub(crate) fn new(
        call_id: String,
        api: Api,
        key: SecretString,
        calls: CallsApi,
        options: DriverOptions,
        rx: mpsc::UnboundedReceiver<DriverMsg>,
        tx: mpsc::UnboundedSender<DriverMsg>,
    ) -> Line {
        Line {
            call_id,
            api,
            key,
            calls,
            options,
            rx,
            tx,
            outbox: Outbox::default(),
            transferred: false,
            owed: Vec::new(),
        }
    }

    pub(crate) fn send(&mut self, text: String) {
        self.outbox.push(text);
    }

    /// Tells the loop, `after` from now, that a slow call's `messages.delayed` is due.
    pub(crate) fn delayed_after(&self, function_call_id: String, after: Duration) {
        let tx = self.tx.clone();
        tokio::spawn(async move {
            tokio::time::sleep(after).await;
            let _ = tx.send(DriverMsg::Delayed { function_call_id });
        });
    }

    /// The invocation of a function call the model made on this call.
    pub(crate) fn invocation(
        &self,
        function_call_id: String,
        name: String,
        arguments_json: String,
        response_id: Option<String>,
        item_id: Option<String>,
    ) -> Invocation {
        Invocation {
            call_id: self.call_id.clone(),
            function_call_id,
            name,
            arguments_json,
            response_id,
            item_id,
        }
    }

    /// Connects (again), with backoff; `None` when the call is gone or unreachable.
    async fn attach(&self) -> Option<Socket> {
        let url = match self.api {
            Api::Realtime => self.calls.endpoints().call_socket(&self.call_id),
            Api::Live => self.calls.endpoints().live_sideband(&self.call_id),
        };
        socket::attach(self.api, &url, &self.key, self.options.reattach_for).await
    }

    /// Hangs the call up through the control API.
    pub(crate) async fn hang_up(&self) -> Result<(), String> {
        let result = self
            .calls
            .hangup(self.api, &self.key, &self.call_id)
            .await
            .map_err(|e| e.to_string());
        if let Err(e) = &result {
            log_by_api!(self.api, error, "realtime_hangup_failed", "live_hangup_failed", error = %e);
        }
        result
    }

    /// When this node stops serving the call, whatever happens on it.
    fn ends_at(&self) -> Instant {
        let margin = Duration::from_secs(5 * 60);
        let longest = self
            .options
            .longest_call
            .unwrap_or_else(|| self.api.longest_call() + margin);
        Instant::now() + longest
    }

    /// How the call ended when OpenAI ended it: by the transfer, if there was one.
    pub(crate) fn ended_by_peer(&self) -> CallEnd {
        if self.transferred {
            CallEnd::Transferred
        } else {
            CallEnd::Gone
        }
    }
}

/// What one API's driver adds to the shared loop.
pub(crate) trait LineDriver: Send {
    fn line(&self) -> &Line;
    fn line_mut(&mut self) -> &mut Line;

    /// Called once the socket is attached for the first time, before any event is read and
    /// before the outbox is first written.
    fn on_attached(&mut self) {}

    /// A server event arrived.
    fn on_text(&mut self, text: &str) -> Step;

    /// The socket was closed by OpenAI.
    fn on_close(&mut self, _frame: Option<CloseFrame>) -> Step {
        Step::Dropped
    }

    /// An answer (or an async tool's news) from the call session.
    fn on_delivery(&mut self, delivery: Delivery);

    /// A slow tool's `messages.delayed` is due.
    fn on_delayed(&mut self, function_call_id: String);

    /// The call is leaving by REFER ([`Line::transferred`] is set already).
    fn on_transferred(&mut self);

    /// Another agent is active now.
    fn on_handed_off(&mut self, agent: String);

    /// A hang-up is under way (a goodbye waits to be said).
    fn hanging_up(&self) -> bool;

    /// Starts a hang-up (its function call is in [`Line::owed`] already): say `goodbye` once
    /// the owed answers are out, if any, then hang up.
    fn on_hangup(&mut self, goodbye: Option<String>) -> Step;

    /// When the hang-up is due even if the goodbye has not been heard to end.
    fn hangup_at(&self) -> Option<Instant>;

    /// [`LineDriver::hangup_at`] has come: [`Step::HangUp`], as a rule.
    fn on_hangup_due(&mut self) -> Step;

    /// After each step: may turn it into another (a goodbye said is a hang-up).
    fn after_step(&mut self, step: Step) -> Step {
        step
    }

    /// Before the outbox is written: queue what waits for an idle model.
    fn before_flush(&mut self) {}

    /// An owed answer ([`Line::owed`]) was given elsewhere: what waited for it may go on.
    fn on_owed_settled(&mut self) {}
}

/// Attaches to the call's socket and runs `driver` until the call ends. The attach and the
/// steps' own awaits are boxed: this future lives as long as the call, and would otherwise keep
/// room for a WebSocket handshake or a hang-up request while it waits for the next frame.
pub(crate) async fn run<D: LineDriver>(mut driver: D) -> CallEnd {
    let Some(mut socket) = Box::pin(driver.line().attach()).await else {
        return Box::pin(ended(&mut driver, CallEnd::Gone)).await;
    };
    let options = &driver.line().options;
    let mut liveness = Liveness::new(options.ping_every, options.silent_for);
    let ends_at = driver.line().ends_at();
    driver.on_attached();
    // What a taken-over call owes goes at once: the model may be waiting for nothing else.
    let _ = driver.line_mut().outbox.flush(&mut socket).await;
    loop {
        let hangup_at = driver.hangup_at();
        let step = tokio::select! {
            frame = socket.next() => {
                liveness.heard();
                match frame {
                    Some(Ok(Message::Text(text))) => driver.on_text(text.as_str()),
                    Some(Ok(Message::Close(frame))) => driver.on_close(frame),
                    None | Some(Err(_)) => Step::Dropped,
                    Some(Ok(_)) => Step::Go,
                }
            },
            beat = liveness.beat() => match beat {
                Beat::Ping if socket::ping(&mut socket).await => Step::Go,
                Beat::Ping => Step::Dropped,
                Beat::Silent => {
                    log_by_api!(driver.line().api, warn, "realtime_socket_silent", "live_sideband_silent");
                    Step::Dropped
                }
            },
            _ = deadline(Some(ends_at)) => {
                log_by_api!(driver.line().api, warn, "realtime_call_too_long", "live_call_too_long");
                Step::HangUp
            },
            msg = driver.line_mut().rx.recv() => match msg {
                Some(m) => Box::pin(on_msg(&mut driver, m)).await,
                None => Step::End(CallEnd::Stopped),
            },
            _ = deadline(hangup_at) => driver.on_hangup_due(),
        };
        let step = match driver.after_step(step) {
            Step::HangUp => {
                // The answers that went before the hang-up are on the wire before it.
                let _ = driver.line_mut().outbox.flush(&mut socket).await;
                Step::End(Box::pin(hang_up(&mut driver)).await)
            }
            other => other,
        };
        match step {
            Step::Go | Step::HangUp => {}
            Step::End(end) => {
                let _ = driver.line_mut().outbox.flush(&mut socket).await;
                let _ = futures_util::SinkExt::close(&mut socket).await;
                return Box::pin(ended(&mut driver, end)).await;
            }
            Step::Dropped => {
                if driver.line().transferred {
                    return Box::pin(ended(&mut driver, CallEnd::Transferred)).await;
                }
                let api = driver.line().api;
                log_by_api!(
                    api,
                    warn,
                    "realtime_socket_dropped",
                    "live_sideband_dropped"
                );
                match api {
                    Api::Realtime => {
                        metrics::counter!("switchboard_realtime_reattach_total").increment(1)
                    }
                    Api::Live => metrics::counter!("switchboard_live_reattach_total").increment(1),
                }
                match Box::pin(driver.line().attach()).await {
                    Some(s) => socket = s,
                    None => return Box::pin(ended(&mut driver, CallEnd::Gone)).await,
                }
                liveness.heard();
            }
        }
        driver.before_flush();
        if driver.line_mut().outbox.flush(&mut socket).await.is_err() {
            if driver.line().transferred {
                return Box::pin(ended(&mut driver, CallEnd::Transferred)).await;
            }
            match Box::pin(driver.line().attach()).await {
                Some(s) => socket = s,
                None => return Box::pin(ended(&mut driver, CallEnd::Gone)).await,
            }
            liveness.heard();
            let _ = driver.line_mut().outbox.flush(&mut socket).await;
        }
    }
}

/// Hangs the call up through the control API; the line ends whatever OpenAI answers (a refused
/// hang-up is logged).
async fn hang_up<D: LineDriver>(driver: &mut D) -> CallEnd {
    let _ = driver.line().hang_up().await;
    CallEnd::HungUp
}

/// The line has ended (`end`): before it lets go (and the call's session ends, cancelling what
/// still runs), the answers of function calls whose transfer or hang-up it carried out are
/// waited for, at most [`DriverOptions::answers_wait`]: their effect happened, and their
/// records must say so. Unless another node owns the call now: its answers are that node's.
async fn ended<D: LineDriver>(driver: &mut D, end: CallEnd) -> CallEnd {
    if end == CallEnd::Released || driver.line().owed.is_empty() {
        return end;
    }
    let until = tokio::time::Instant::now() + driver.line().options.answers_wait;
    while !driver.line().owed.is_empty() {
        match tokio::time::timeout_at(until, driver.line_mut().rx.recv()).await {
            Ok(Some(DriverMsg::Delivery(d))) => {
                owed_answered(driver.line_mut(), &d);
                driver.on_delivery(*d);
            }
            Ok(Some(DriverMsg::Released)) => return CallEnd::Released,
            Ok(Some(DriverMsg::AnsweredElsewhere(id))) => {
                driver.line_mut().owed.retain(|o| *o != id)
            }
            Ok(Some(DriverMsg::Hangup { done, .. })) => {
                let _ = done.send(Err("the call has ended already".to_owned()));
            }
            Ok(Some(_)) => {}
            Ok(None) | Err(_) => {
                log_by_api!(
                    driver.line().api,
                    warn,
                    "realtime_answers_not_awaited",
                    "live_answers_not_awaited",
                    owed = driver.line().owed.len()
                );
                break;
            }
        }
    }
    end
}

/// A delivery settles the owed answer of its function call, if any.
fn owed_answered(line: &mut Line, delivery: &Delivery) {
    if !delivery.async_completion {
        let id = &delivery.result.function_call_id;
        line.owed.retain(|owed| owed != id);
    }
}

/// One message from the session or the executor.
async fn on_msg<D: LineDriver>(driver: &mut D, msg: DriverMsg) -> Step {
    match msg {
        DriverMsg::Delivery(d) => {
            owed_answered(driver.line_mut(), &d);
            driver.on_delivery(*d);
            Step::Go
        }
        DriverMsg::Transferred { function_call_id } => {
            let line = driver.line_mut();
            line.transferred = true;
            line.owed.push(function_call_id);
            driver.on_transferred();
            Step::Go
        }
        DriverMsg::Delayed { function_call_id } => {
            driver.on_delayed(function_call_id);
            Step::Go
        }
        DriverMsg::Hangup {
            goodbye,
            function_call_id,
            done,
        } => {
            // Under way from here: the answer of the function call that asked goes out first.
            driver.line_mut().owed.push(function_call_id);
            let _ = done.send(Ok(()));
            if driver.hanging_up() {
                // A hang-up is under way already; this one rides along.
                Step::Go
            } else {
                driver.on_hangup(goodbye)
            }
        }
        DriverMsg::End => {
            let _ = driver.line().hang_up().await;
            Step::End(CallEnd::Stopped)
        }
        DriverMsg::Released => {
            log_by_api!(
                driver.line().api,
                warn,
                "realtime_call_released",
                "live_call_released"
            );
            Step::End(CallEnd::Released)
        }
        DriverMsg::HandedOff(agent) => {
            driver.on_handed_off(agent);
            Step::Go
        }
        DriverMsg::AnsweredElsewhere(id) => {
            driver.line_mut().owed.retain(|o| *o != id);
            driver.on_owed_settled();
            Step::Go
        }
    }
}

/// The function calls of the last model response (Realtime) or backend turn (GPT-Live) whose
/// answers a taken-over call's journal holds. The node that died may have sent their outputs
/// but not the `response.create` that must follow them, and nothing in the journal tells
/// which: the new owner sends one for them. Had the old owner sent it, GPT-Live finds no turn
/// waiting (the simulator takes it as a no-op); a Realtime model speaks once more, which beats
/// a silent line. Runs restored from the journal are left out: their answers come from this
/// node.
/// [`last_answered`] when the call's newest answer was stored within `within` of now (see
/// [`DriverOptions::continue_within`]); empty otherwise. How long ago is the journal's own
/// clock's word (a database's, which every node shares), never the old owner's clock against
/// this node's: skewed clocks would make the model speak twice or stay silent. Only a journal
/// that cannot say (one process's, in memory) falls back to the record's `finished_at`, which
/// this same process stamped.
pub(crate) fn owed_continuation(
    snapshot: &SessionSnapshot,
    within: Duration,
) -> Vec<&InvocationRecord> {
    let last = last_answered(snapshot);
    let recent = match snapshot.newest_stored {
        Some(stored) => stored.elapsed() <= within,
        None => {
            let now = std::time::SystemTime::now();
            last.iter()
                .any(|r| match humantime::parse_rfc3339(&r.finished_at) {
                    Ok(at) => now.duration_since(at).map_or(true, |age| age <= within),
                    Err(_) => false,
                })
        }
    };
    if recent { last } else { Vec::new() }
}

pub(crate) fn last_answered(snapshot: &SessionSnapshot) -> Vec<&InvocationRecord> {
    let records = &snapshot.records;
    let Some(last) = records.iter().rev().find_map(|r| r.response_id.as_deref()) else {
        return Vec::new();
    };
    records
        .iter()
        .filter(|r| r.response_id.as_deref() == Some(last))
        .filter(|r| !snapshot.restored.contains(&r.function_call_id))
        .collect()
}

/// The caller pressed keypad keys (`keys`, as OpenAI sent them). Both APIs tell a call's
/// client, not its model; no tool reads them, so they are logged as known events — by count
/// only: keypad input is how callers enter PINs and card numbers, which no log line may hold.
pub(crate) fn dtmf_received(api: Api, keys: Option<&str>) {
    let keys = keys.map_or(0, |k| k.chars().count());
    log_by_api!(
        api,
        info,
        "realtime_dtmf_received",
        "live_dtmf_received",
        keys
    );
}

/// Sleeps until `at`, or forever when there is nothing to wait for.
async fn deadline(at: Option<Instant>) {
    match at {
        Some(d) => tokio::time::sleep_until(d.into()).await,
        None => std::future::pending().await,
    }
}
