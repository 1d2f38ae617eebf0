//! One GPT-Live call's sideband loop: the backend model's function calls in, their outputs and
//! one `response.create` per backend turn out.
//!
//! GPT-Live's voice model talks; a backend (Responses) model reasons and calls the tools, and
//! its stream reaches the sideband nested in `response.event`. A function call is read from the
//! nested `response.output_item.done` (lifecycle snapshots carry an empty `output`), handed to
//! the call session once, and answered with `response.item.create`. A backend turn ends with
//! its nested `response.completed`; once it has ended and every call of every ended turn is
//! answered, one `response.create` continues the backend (earlier, OpenAI answers
//! `function_call_outputs_required`). Outputs of a turn share a byte budget; one that would
//! overflow it is cut with a marker that says so. There is no turn control: the voice model
//! decides when to speak, and a barge-in does not cancel delegated work, so every call runs to
//! its answer. Filler speech, the goodbye and async news go as `session.commentary.append`.
//! A dropped sideband is re-attached; a `session.closed` ends the call.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use secrecy::{ExposeSecret, SecretString};
use switchboard_runtime::{CallSession, Delivery, Invocation};
use tokio::sync::{mpsc, oneshot};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use crate::api::{Api, CallsApi, jitter};
use crate::driver::{CallEnd, DriverMsg, DriverOptions, Socket, goodbye_deadline, socket_config};
use crate::events::AgentProfile;
use crate::live_events::{self, LiveEvent};

/// The marker ending an output cut to fit the backend's input budget.
pub const CUT_MARKER: &str =
    "\n[Switchboard: the rest of this result was cut; it was longer than the model can take in]";

/// How long the voice model must be quiet after the goodbye is placed before hanging up.
const GOODBYE_QUIET: Duration = Duration::from_millis(1_500);

/// Most function calls tracked per backend turn (a backend that sends more is answered, but
/// they count to one turn).
const MAX_TURN_CALLS: usize = 128;

/// How many sent outputs are remembered for an error to name.
const MAX_SENT: usize = 256;

/// One backend turn: the calls it made, whether it has ended, and its output bytes so far.
#[derive(Debug, Default)]
struct Turn {
    calls: Vec<String>,
    ended: bool,
    bytes: usize,
}

struct Goodbye {
    /// When to hang up: set once the goodbye is placed, pushed back while the model talks.
    at: Option<Instant>,
    deadline: Instant,
    done: oneshot::Sender<Result<(), String>>,
}

pub(crate) struct LiveDriver {
    session_id: String,
    key: SecretString,
    api: CallsApi,
    session: CallSession,
    agent: String,
    agents: Arc<HashMap<String, AgentProfile>>,
    rx: mpsc::UnboundedReceiver<DriverMsg>,
    tx: mpsc::UnboundedSender<DriverMsg>,
    options: DriverOptions,
    /// Open turns by delegation id (`""` when the backend event names none).
    turns: HashMap<String, Turn>,
    /// Function call → its turn's key.
    call_turn: HashMap<String, String>,
    started: HashSet<String>,
    answered: HashSet<String>,
    /// The latest outputs sent, as (`event_id`, function call), to resend one OpenAI refused
    /// as too big (an error names the event; at most [`MAX_SENT`] are kept).
    sent: VecDeque<(String, String)>,
    /// Calls whose output was refused once already and sent again as a marker only.
    shrunk: HashSet<String>,
    timers: HashMap<String, Instant>,
    delayed: HashMap<String, String>,
    goodbye: Option<Goodbye>,
    transferred: bool,
    outbox: Vec<String>,
    seq: u64,
    /// Taken over from a node that died: calls this driver never saw are restored runs of
    /// turns the backend waits on.
    resumed: bool,
}

/// The turn that gathers a taken-over call's restored runs.
const RESUMED_TURN: &str = "resumed";

impl LiveDriver {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        session_id: String,
        key: SecretString,
        api: CallsApi,
        session: CallSession,
        agent: String,
        agents: Arc<HashMap<String, AgentProfile>>,
        rx: mpsc::UnboundedReceiver<DriverMsg>,
        tx: mpsc::UnboundedSender<DriverMsg>,
        options: DriverOptions,
        resumed: bool,
    ) -> LiveDriver {
        LiveDriver {
            resumed,
            session_id,
            key,
            api,
            session,
            agent,
            agents,
            rx,
            tx,
            options,
            turns: HashMap::new(),
            call_turn: HashMap::new(),
            started: HashSet::new(),
            answered: HashSet::new(),
            sent: VecDeque::new(),
            shrunk: HashSet::new(),
            timers: HashMap::new(),
            delayed: HashMap::new(),
            goodbye: None,
            transferred: false,
            outbox: Vec::new(),
            seq: 0,
        }
    }

    /// Attaches to the sideband and runs until the call ends.
    pub(crate) async fn run(mut self) -> CallEnd {
        if self.resumed
            && let Some(snapshot) = self.session.snapshot().await
        {
            for call in snapshot.pending {
                self.adopt(call);
            }
        }
        let Some(mut socket) = self.attach().await else {
            return CallEnd::Gone;
        };
        loop {
            let hangup_at = self
                .goodbye
                .as_ref()
                .map(|g| g.at.map_or(g.deadline, |at| at.min(g.deadline)));
            let step = tokio::select! {
                frame = socket.next() => match frame {
                    Some(Ok(Message::Text(text))) => self.on_event(text.as_str()),
                    Some(Ok(Message::Close(_))) | None | Some(Err(_)) => Step::Dropped,
                    Some(Ok(_)) => Step::Go,
                },
                msg = self.rx.recv() => match msg {
                    Some(m) => self.on_msg(m).await,
                    None => Step::End(CallEnd::Stopped),
                },
                _ = goodbye_deadline(hangup_at) => self.hang_up().await,
            };
            match step {
                Step::Go => {}
                Step::End(end) => {
                    let _ = self.flush(&mut socket).await;
                    let _ = socket.close(None).await;
                    return end;
                }
                Step::Dropped => {
                    if self.transferred {
                        return CallEnd::Transferred;
                    }
                    tracing::warn!(name: "live_sideband_dropped", "live_sideband_dropped");
                    metrics::counter!("switchboard_live_reattach_total").increment(1);
                    match self.attach().await {
                        Some(s) => socket = s,
                        None => return CallEnd::Gone,
                    }
                }
            }
            if self.flush(&mut socket).await.is_err() {
                if self.transferred {
                    return CallEnd::Transferred;
                }
                match self.attach().await {
                    Some(s) => socket = s,
                    None => return CallEnd::Gone,
                }
                let _ = self.flush(&mut socket).await;
            }
        }
    }

    /// Connects (again) with backoff while failures look transient; `None` when the session
    /// is gone or unreachable for `reattach_for`.
    async fn attach(&mut self) -> Option<Socket> {
        let url = self.api.endpoints().live_sideband(&self.session_id);
        let until = Instant::now() + self.options.reattach_for;
        let mut delay = Duration::from_millis(100);
        loop {
            let mut req = match url.as_str().into_client_request() {
                Ok(r) => r,
                Err(e) => {
                    tracing::error!(name: "live_sideband_url_invalid", error = %e, "live_sideband_url_invalid");
                    return None;
                }
            };
            if let Ok(v) = format!("Bearer {}", self.key.expose_secret()).parse() {
                req.headers_mut().insert("authorization", v);
            }
            match tokio_tungstenite::connect_async_with_config(req, Some(socket_config()), true)
                .await
            {
                Ok((socket, _)) => {
                    tracing::info!(name: "live_sideband_attached", "live_sideband_attached");
                    return Some(socket);
                }
                Err(tokio_tungstenite::tungstenite::Error::Http(resp))
                    if resp.status().is_client_error() && resp.status().as_u16() != 429 =>
                {
                    tracing::info!(name: "live_session_gone", status = resp.status().as_u16(), "live_session_gone");
                    return None;
                }
                Err(e) => {
                    if Instant::now() >= until {
                        tracing::error!(name: "live_sideband_lost", error = %e, "live_sideband_lost");
                        return None;
                    }
                    tracing::warn!(name: "live_sideband_retry", error = %e, "live_sideband_retry");
                    tokio::time::sleep(jitter(delay)).await;
                    delay = (delay * 2).min(Duration::from_secs(2));
                }
            }
        }
    }

    async fn flush(&mut self, socket: &mut Socket) -> Result<(), ()> {
        if self.outbox.is_empty() {
            return Ok(());
        }
        for (written, text) in self.outbox.iter().enumerate() {
            if socket.feed(Message::text(text.clone())).await.is_err() {
                self.outbox.drain(..written);
                return Err(());
            }
        }
        self.outbox.clear();
        socket.flush().await.map_err(|_| ())
    }

    /// A restored run of a call the old owner saw: the backend's turn ended there, so it
    /// waits on this call's output and one continuation.
    fn adopt(&mut self, call: String) {
        if !self.started.insert(call.clone()) {
            return;
        }
        let turn = self.turns.entry(RESUMED_TURN.to_owned()).or_default();
        turn.ended = true;
        turn.calls.push(call.clone());
        self.call_turn.insert(call, RESUMED_TURN.to_owned());
    }

    fn remember(&mut self, event_id: String, call: String) {
        if self.sent.len() >= MAX_SENT {
            self.sent.pop_front();
        }
        self.sent.push_back((event_id, call));
    }

    fn next_event_id(&mut self) -> String {
        self.seq += 1;
        format!("sb_{}", self.seq)
    }

    fn on_event(&mut self, text: &str) -> Step {
        let ev = match LiveEvent::parse(text) {
            Ok(ev) => ev,
            Err(e) => {
                tracing::warn!(name: "live_event_unreadable", error = %e, "live_event_unreadable");
                return Step::Go;
            }
        };
        match ev.kind.as_str() {
            "response.event" => {
                let key = ev.delegation_id.unwrap_or_default();
                if let Some(inner) = ev.event {
                    self.on_backend(key, inner);
                }
            }
            "session.output_transcript.delta" => {
                // The voice model is still talking: the goodbye is not over yet.
                if let Some(g) = &mut self.goodbye
                    && g.at.is_some()
                {
                    g.at = Some(Instant::now() + GOODBYE_QUIET);
                }
            }
            "session.commentary.appended" => {
                if let Some(g) = &mut self.goodbye
                    && g.at.is_none()
                    && ev
                        .client_event_id
                        .as_deref()
                        .is_some_and(|id| id.starts_with("bye_"))
                {
                    g.at = Some(Instant::now() + GOODBYE_QUIET);
                }
            }
            "session.closed" => {
                let reason = ev.reason.unwrap_or_default();
                tracing::info!(name: "live_session_closed", reason = %reason, "live_session_closed");
                return Step::End(if self.transferred {
                    CallEnd::Transferred
                } else {
                    CallEnd::Gone
                });
            }
            "error" => self.on_error(ev.error.unwrap_or_default()),
            _ => {}
        }
        Step::Go
    }

    fn on_backend(&mut self, key: String, ev: live_events::BackendEvent) {
        match ev.kind.as_str() {
            "response.output_item.done" => {
                if let Some(item) = ev.item
                    && item.kind == "function_call"
                    && let (Some(call), Some(name)) = (item.call_id, item.name)
                {
                    self.start_call(key, call, name, item.arguments.unwrap_or_default(), item.id);
                }
            }
            "response.completed" | "response.incomplete" | "response.failed" => {
                if ev.kind != "response.completed" {
                    let status = ev.response.and_then(|r| r.status).unwrap_or_default();
                    tracing::warn!(name: "live_backend_turn_unfinished", kind = %ev.kind, status = %status, "live_backend_turn_unfinished");
                }
                // Terminal effects (a transfer, a hang-up) held for the turn may go now.
                if !key.is_empty() {
                    self.session.response_done(&key);
                }
                // The delegation's open turn (a later one carries `+` suffixes).
                let mut open = key.clone();
                while self.turns.get(&open).is_some_and(|t| t.ended) {
                    open.push('+');
                }
                match self.turns.get_mut(&open) {
                    Some(turn) if !turn.calls.is_empty() => turn.ended = true,
                    // A turn without calls (the backend's final words) needs nothing.
                    _ => {
                        self.turns.remove(&open);
                    }
                }
                self.settle();
            }
            _ => {}
        }
    }

    fn on_error(&mut self, e: live_events::LiveError) {
        let code = e.code.clone().unwrap_or_default();
        match code.as_str() {
            "response_input_buffer_full" => {
                metrics::counter!("switchboard_live_outputs_refused_total").increment(1);
                // The refused output's call stays pending at OpenAI: send it again as a marker
                // only, once; the backend learns the result was too long instead of waiting.
                let call = e
                    .client_event_id
                    .as_ref()
                    .and_then(|id| self.sent.iter().find(|(e, _)| e == id))
                    .map(|(_, call)| call.clone());
                match call {
                    Some(call) if self.shrunk.insert(call.clone()) => {
                        tracing::warn!(name: "live_output_refused", call_id = %call, "live_output_refused");
                        let id = self.next_event_id();
                        self.remember(id.clone(), call.clone());
                        let text = CUT_MARKER.trim_start().to_owned();
                        self.outbox
                            .push(live_events::function_call_output(&id, &call, &text));
                        // The turn's `response.create`, if sent, was refused for the missing
                        // output: ask again after it.
                        if !self.call_turn.contains_key(&call)
                            && !self.transferred
                            && self.goodbye.is_none()
                        {
                            self.outbox.push(live_events::response_create());
                        }
                    }
                    _ => {
                        tracing::error!(name: "live_output_refused", message = e.message.as_deref().unwrap_or(""), "live_output_refused");
                    }
                }
            }
            "function_call_outputs_required" if !self.shrunk.is_empty() => {
                // Follows a refused output, which has been sent again with a new continuation.
                tracing::info!(name: "live_continuation_refused", "live_continuation_refused");
            }
            _ => {
                tracing::warn!(name: "live_error_event", code = %code, kind = e.kind.as_deref().unwrap_or(""), param = e.param.as_deref().unwrap_or(""), message = e.message.as_deref().unwrap_or(""), "live_error_event");
                metrics::counter!("switchboard_live_error_events_total").increment(1);
            }
        }
    }

    fn start_call(
        &mut self,
        key: String,
        call: String,
        name: String,
        arguments: String,
        item_id: Option<String>,
    ) {
        if !self.started.insert(call.clone()) {
            return;
        }
        self.timers.insert(call.clone(), Instant::now());
        // A call after its turn ended belongs to the backend's next turn.
        let mut key = key;
        while self
            .turns
            .get(&key)
            .is_some_and(|t| t.ended && !t.calls.is_empty())
        {
            key.push('+');
        }
        let turn = self.turns.entry(key.clone()).or_default();
        if turn.ended {
            *turn = Turn::default();
        }
        if turn.calls.len() < MAX_TURN_CALLS {
            turn.calls.push(call.clone());
            self.call_turn.insert(call.clone(), key.clone());
        }
        let config = self.session.config();
        if let Ok(entry) = config.resolve(&self.agent, &name) {
            let m = entry.tool.messages();
            if let Some(start) = &m.start {
                let id = self.next_event_id();
                self.outbox.push(live_events::commentary(&id, start));
            }
            if let Some(text) = &m.delayed {
                self.delayed.insert(call.clone(), text.clone());
                let tx = self.tx.clone();
                let after = Duration::from_millis(m.delayed_after_ms);
                let id = call.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(after).await;
                    let _ = tx.send(DriverMsg::Delayed {
                        function_call_id: id,
                    });
                });
            }
        }
        self.session.submit(Invocation {
            call_id: self.session_id.clone(),
            function_call_id: call,
            name,
            arguments_json: arguments,
            response_id: Some(key.trim_end_matches('+').to_owned()).filter(|k| !k.is_empty()),
            item_id,
        });
    }

    /// Sends one `response.create` once every ended turn with calls has all its outputs, and
    /// forgets those turns.
    fn settle(&mut self) {
        let waiting: Vec<&String> = self
            .turns
            .iter()
            .filter(|(_, t)| t.ended && !t.calls.is_empty())
            .map(|(k, _)| k)
            .collect();
        if waiting.is_empty() {
            return;
        }
        let all_answered = self
            .turns
            .values()
            .filter(|t| t.ended)
            .all(|t| t.calls.iter().all(|c| self.answered.contains(c)));
        if !all_answered {
            return;
        }
        let done: Vec<String> = waiting.into_iter().cloned().collect();
        for k in done {
            if let Some(t) = self.turns.remove(&k) {
                for c in t.calls {
                    self.call_turn.remove(&c);
                }
            }
        }
        self.turns.retain(|_, t| !t.ended);
        if !self.transferred && self.goodbye.is_none() {
            self.outbox.push(live_events::response_create());
        }
    }

    async fn on_msg(&mut self, msg: DriverMsg) -> Step {
        match msg {
            DriverMsg::Delivery(d) => {
                self.deliver(*d);
                Step::Go
            }
            DriverMsg::Transferred => {
                self.transferred = true;
                self.delayed.clear();
                Step::Go
            }
            DriverMsg::Delayed { function_call_id } => {
                if let Some(text) = self.delayed.remove(&function_call_id)
                    && !self.answered.contains(&function_call_id)
                    && !self.transferred
                    && self.goodbye.is_none()
                {
                    let id = self.next_event_id();
                    self.outbox.push(live_events::commentary(&id, &text));
                }
                Step::Go
            }
            DriverMsg::Hangup { goodbye, done } => {
                if self.goodbye.is_some() {
                    let _ = done.send(Ok(()));
                    return Step::Go;
                }
                self.delayed.clear();
                let now = Instant::now();
                match goodbye {
                    None => {
                        self.goodbye = Some(Goodbye {
                            at: Some(now),
                            deadline: now,
                            done,
                        });
                        self.hang_up().await
                    }
                    Some(text) => {
                        self.seq += 1;
                        let id = format!("bye_{}", self.seq);
                        self.outbox.push(live_events::commentary(&id, &text));
                        self.goodbye = Some(Goodbye {
                            at: None,
                            deadline: now + self.options.goodbye_timeout,
                            done,
                        });
                        Step::Go
                    }
                }
            }
            DriverMsg::End => {
                let _ = self.hang_up().await;
                Step::End(CallEnd::Stopped)
            }
            DriverMsg::Released => {
                tracing::warn!(name: "live_call_released", "live_call_released");
                Step::End(CallEnd::Released)
            }
            // A function call answered over the call's MCP endpoint made another agent active
            // (Live calls are given function tools, but a client may still use that endpoint).
            DriverMsg::HandedOff(agent) => {
                if let Some(profile) = self.agents.get(&agent) {
                    self.outbox.push(live_events::session_update(profile));
                    self.agent = agent;
                }
                Step::Go
            }
        }
    }

    async fn hang_up(&mut self) -> Step {
        let result = self
            .api
            .hangup(Api::Live, &self.key, &self.session_id)
            .await
            .map_err(|e| e.to_string());
        if let Err(e) = &result {
            tracing::error!(name: "live_hangup_failed", error = %e, "live_hangup_failed");
        }
        if let Some(g) = self.goodbye.take() {
            let _ = g.done.send(result);
        }
        Step::End(CallEnd::HungUp)
    }

    fn deliver(&mut self, d: Delivery) {
        if d.async_completion {
            let text = format!(
                "The background task `{}` has finished. Tell the caller its result: {}",
                d.tool, d.result.output
            );
            if !self.transferred && self.goodbye.is_none() {
                let id = self.next_event_id();
                self.outbox.push(live_events::commentary(&id, &text));
            }
            return;
        }
        let call = d.result.function_call_id.clone();
        if self.resumed && !self.started.contains(&call) {
            self.adopt(call.clone());
        }
        if !self.answered.insert(call.clone()) {
            return;
        }
        if let Some(t0) = self.timers.remove(&call) {
            metrics::histogram!("switchboard_live_tool_seconds").record(t0.elapsed().as_secs_f64());
        }
        if let Some(h) = &d.handoff
            && let Some(profile) = self.agents.get(&h.agent)
        {
            // The next delegations reason as the new agent, with its tools.
            self.agent = h.agent.clone();
            self.outbox.push(live_events::session_update(profile));
        }
        let budget = self.options.live_turn_budget;
        let used = self
            .call_turn
            .get(&call)
            .and_then(|k| self.turns.get(k))
            .map_or(0, |t| t.bytes);
        let room = budget.saturating_sub(used).max(CUT_MARKER.len());
        let output = live_events::cut(&d.result.output, room, CUT_MARKER);
        if output.len() < d.result.output.len() {
            tracing::warn!(name: "live_output_cut", call_id = %call, bytes = d.result.output.len(), kept = output.len(), "live_output_cut");
            metrics::counter!("switchboard_live_outputs_cut_total").increment(1);
        }
        if let Some(t) = self
            .call_turn
            .get(&call)
            .and_then(|k| self.turns.get_mut(k))
        {
            t.bytes += output.len();
        }
        // Every call gets its output, also once the call is leaving: the backend conversation
        // stays whole. Only the continuation stops.
        let id = self.next_event_id();
        self.remember(id.clone(), call.clone());
        self.outbox
            .push(live_events::function_call_output(&id, &call, &output));
        self.settle();
    }
}

enum Step {
    Go,
    Dropped,
    End(CallEnd),
}
