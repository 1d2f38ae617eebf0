//! What a phone call's loop is, whichever API answers it: the socket attached and re-attached
//! with backoff, the messages from the call session and the executor (answers, REFER done,
//! hang-up with a goodbye, handoff), the end of the call, and the order in which events leave.
//!
//! Each API's driver ([`crate::driver`] for Realtime, [`crate::live_driver`] for GPT-Live)
//! implements [`LineDriver`]: how its server events are read and what each message means for
//! its protocol. [`run`] is the loop they share. A dropped socket is re-attached (answers wait
//! in the outbox meanwhile) unless the call has been transferred, when a drop is its end.

mod socket;

use std::future::Future;
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
    /// Say `goodbye` (if any) once the model is idle, wait for it to be said, then hang up.
    Hangup {
        goodbye: Option<String>,
        done: oneshot::Sender<Result<(), String>>,
    },
    /// A REFER succeeded: the call is leaving; function calls are still answered, but no more
    /// responses are asked for.
    Transferred,
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

    /// Starts a hang-up: say `goodbye` first, if any.
    fn on_hangup(
        &mut self,
        goodbye: Option<String>,
        done: oneshot::Sender<Result<(), String>>,
    ) -> impl Future<Output = Step> + Send;

    /// When the hang-up is due even if the goodbye has not been heard to end.
    fn hangup_at(&self) -> Option<Instant>;

    /// [`LineDriver::hangup_at`] has come.
    fn on_hangup_due(&mut self) -> impl Future<Output = Step> + Send;

    /// Hangs up now and tells whoever asked for the hang-up.
    fn hang_up(&mut self) -> impl Future<Output = Step> + Send;

    /// After each step: may turn it into another (a goodbye said is a hang-up).
    fn after_step(&mut self, step: Step) -> impl Future<Output = Step> + Send {
        async move { step }
    }

    /// Before the outbox is written: queue what waits for an idle model.
    fn before_flush(&mut self) {}
}

/// Attaches to the call's socket and runs `driver` until the call ends. The attach and the
/// steps' own awaits are boxed: this future lives as long as the call, and would otherwise keep
/// room for a WebSocket handshake or a hang-up request while it waits for the next frame.
pub(crate) async fn run<D: LineDriver>(mut driver: D) -> CallEnd {
    let Some(mut socket) = Box::pin(driver.line().attach()).await else {
        return CallEnd::Gone;
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
                let _ = Box::pin(driver.hang_up()).await;
                Step::End(CallEnd::Stopped)
            },
            msg = driver.line_mut().rx.recv() => match msg {
                Some(m) => Box::pin(on_msg(&mut driver, m)).await,
                None => Step::End(CallEnd::Stopped),
            },
            _ = deadline(hangup_at) => Box::pin(driver.on_hangup_due()).await,
        };
        match Box::pin(driver.after_step(step)).await {
            Step::Go => {}
            Step::End(end) => {
                let _ = driver.line_mut().outbox.flush(&mut socket).await;
                let _ = futures_util::SinkExt::close(&mut socket).await;
                return end;
            }
            Step::Dropped => {
                if driver.line().transferred {
                    return CallEnd::Transferred;
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
                    None => return CallEnd::Gone,
                }
                liveness.heard();
            }
        }
        driver.before_flush();
        if driver.line_mut().outbox.flush(&mut socket).await.is_err() {
            if driver.line().transferred {
                return CallEnd::Transferred;
            }
            match Box::pin(driver.line().attach()).await {
                Some(s) => socket = s,
                None => return CallEnd::Gone,
            }
            liveness.heard();
            let _ = driver.line_mut().outbox.flush(&mut socket).await;
        }
    }
}

/// One message from the session or the executor.
async fn on_msg<D: LineDriver>(driver: &mut D, msg: DriverMsg) -> Step {
    match msg {
        DriverMsg::Delivery(d) => {
            driver.on_delivery(*d);
            Step::Go
        }
        DriverMsg::Transferred => {
            driver.line_mut().transferred = true;
            driver.on_transferred();
            Step::Go
        }
        DriverMsg::Delayed { function_call_id } => {
            driver.on_delayed(function_call_id);
            Step::Go
        }
        // A hang-up is under way already; this one rides along.
        DriverMsg::Hangup { done, .. } if driver.hanging_up() => {
            let _ = done.send(Ok(()));
            Step::Go
        }
        DriverMsg::Hangup { goodbye, done } => driver.on_hangup(goodbye, done).await,
        DriverMsg::End => {
            let _ = driver.hang_up().await;
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
    }
}

/// The function calls of the last model response (Realtime) or backend turn (GPT-Live) whose
/// answers a taken-over call's journal holds. The node that died may have sent their outputs
/// but not the `response.create` that must follow them, and nothing in the journal tells
/// which: the new owner sends one for them. Had the old owner sent it, GPT-Live finds no turn
/// waiting (the simulator takes it as a no-op); a Realtime model speaks once more, which beats
/// a silent line. Runs restored from the journal are left out: their answers come from this
/// node.
/// [`last_answered`] when the newest of its answers finished within `within` of now (see
/// [`DriverOptions::continue_within`]); empty otherwise.
pub(crate) fn owed_continuation(
    snapshot: &SessionSnapshot,
    within: Duration,
) -> Vec<&InvocationRecord> {
    let last = last_answered(snapshot);
    let now = std::time::SystemTime::now();
    let recent = last
        .iter()
        .any(|r| match humantime::parse_rfc3339(&r.finished_at) {
            // An answer stamped ahead of this node's clock (another node's) is recent.
            Ok(at) => now.duration_since(at).map_or(true, |age| age <= within),
            Err(_) => false,
        });
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

/// Sleeps until `at`, or forever when there is nothing to wait for.
async fn deadline(at: Option<Instant>) {
    match at {
        Some(d) => tokio::time::sleep_until(d.into()).await,
        None => std::future::pending().await,
    }
}
