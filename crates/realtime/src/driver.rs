//! One call's WebSocket loop: function calls in, outputs and responses out.
//!
//! The driver owns the call's socket. It hands each function call to the call session once,
//! sends each answer as a `function_call_output`, and asks for one `response.create` per model
//! response once all of that response's calls are answered and the response itself is done
//! (sending it earlier would collide with the active response). Filler speech for slow tools and
//! the goodbye before a hang-up wait for the model to be idle too, so nothing is said twice and
//! nothing is lost. A dropped socket (or one closed with any code but 1000) is re-attached;
//! answers wait in the queue meanwhile. A normal close (1000) is the end of the call.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use secrecy::{ExposeSecret, SecretString};
use switchboard_runtime::{CallSession, Delivery, Invocation};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use crate::api::{CallsApi, jitter};
use crate::events::{self, AgentProfile, ServerEvent};

pub(crate) type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

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
}

impl Default for DriverOptions {
    fn default() -> Self {
        DriverOptions {
            reattach_for: Duration::from_secs(30),
            goodbye_timeout: Duration::from_secs(15),
            live_turn_budget: 30 * 1024,
        }
    }
}

/// One model response as the driver tracks it.
#[derive(Debug, Default)]
struct Resp {
    calls: Vec<String>,
    done: bool,
    cancelled: bool,
    /// Answered with a `response.create` already (or must not be).
    settled: bool,
}

/// What our last `response.create` was for, to recover when the API refuses it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Asked {
    Answers,
    Speech,
    Goodbye,
}

struct Goodbye {
    text: Option<String>,
    response: Option<String>,
    asked: bool,
    deadline: Instant,
    done: oneshot::Sender<Result<(), String>>,
}

pub(crate) struct Driver {
    pub call_id: String,
    pub key: SecretString,
    pub api: CallsApi,
    pub session: CallSession,
    pub agent: String,
    pub agents: Arc<HashMap<String, AgentProfile>>,
    pub rx: mpsc::UnboundedReceiver<DriverMsg>,
    pub tx: mpsc::UnboundedSender<DriverMsg>,
    pub options: DriverOptions,
    // What the model is doing.
    active: Option<String>,
    /// We sent `response.create` and have not seen its `response.created`.
    requested: Option<Asked>,
    /// A `response.create` is owed for answered calls, to send when the model is idle.
    owe_response: bool,
    speech: VecDeque<(String, String)>,
    responses: HashMap<String, Resp>,
    call_response: HashMap<String, String>,
    started: HashSet<String>,
    answered: HashSet<String>,
    /// Function calls started at (for the overhead metric).
    timers: HashMap<String, Instant>,
    goodbye: Option<Goodbye>,
    /// The goodbye has been said: hang up.
    hangup_due: bool,
    /// `messages.delayed` of running calls, said once if still running when due.
    delayed: HashMap<String, String>,
    transferred: bool,
    /// Messages not yet written to the socket (kept across a re-attach).
    outbox: VecDeque<String>,
}

impl Driver {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        call_id: String,
        key: SecretString,
        api: CallsApi,
        session: CallSession,
        agent: String,
        agents: Arc<HashMap<String, AgentProfile>>,
        rx: mpsc::UnboundedReceiver<DriverMsg>,
        tx: mpsc::UnboundedSender<DriverMsg>,
        options: DriverOptions,
    ) -> Driver {
        Driver {
            call_id,
            key,
            api,
            session,
            agent,
            agents,
            rx,
            tx,
            options,
            active: None,
            requested: None,
            owe_response: false,
            speech: VecDeque::new(),
            responses: HashMap::new(),
            call_response: HashMap::new(),
            started: HashSet::new(),
            answered: HashSet::new(),
            timers: HashMap::new(),
            goodbye: None,
            hangup_due: false,
            delayed: HashMap::new(),
            transferred: false,
            outbox: VecDeque::new(),
        }
    }

    /// Attaches to the call's socket and runs until the call ends.
    pub(crate) async fn run(mut self) -> CallEnd {
        let mut socket = match self.attach().await {
            Some(s) => s,
            None => return CallEnd::Gone,
        };
        loop {
            let step = tokio::select! {
                frame = socket.next() => match frame {
                    Some(Ok(Message::Text(text))) => { self.on_event(text.as_str()); Step::Go }
                    Some(Ok(Message::Close(Some(frame)))) if frame.code == CloseCode::Normal => {
                        // OpenAI closes normally when the call is over: nothing to re-attach to.
                        tracing::info!(name: "realtime_socket_closed", code = u16::from(frame.code), "realtime_socket_closed");
                        Step::End(if self.transferred { CallEnd::Transferred } else { CallEnd::Gone })
                    }
                    Some(Ok(Message::Close(_))) | None | Some(Err(_)) => Step::Dropped,
                    Some(Ok(_)) => Step::Go,
                },
                msg = self.rx.recv() => match msg {
                    Some(m) => self.on_msg(m).await,
                    None => Step::End(CallEnd::Stopped),
                },
                _ = goodbye_deadline(self.goodbye.as_ref().map(|g| g.deadline)) => {
                    tracing::warn!(name: "realtime_goodbye_timeout", "realtime_goodbye_timeout");
                    self.hang_up().await
                }
            };
            let step = match step {
                Step::Go if self.hangup_due => self.hang_up().await,
                other => other,
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
                    tracing::warn!(name: "realtime_socket_dropped", "realtime_socket_dropped");
                    metrics::counter!("switchboard_realtime_reattach_total").increment(1);
                    match self.attach().await {
                        Some(s) => socket = s,
                        None => return CallEnd::Gone,
                    }
                }
            }
            self.pump();
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

    /// Connects (again), with backoff while failures look transient. `None` when the call is
    /// gone (OpenAI refuses the socket) or could not be reached for `reattach_for`.
    async fn attach(&mut self) -> Option<Socket> {
        let url = self.api.endpoints().call_socket(&self.call_id);
        let until = Instant::now() + self.options.reattach_for;
        let mut delay = Duration::from_millis(100);
        loop {
            let mut req = match url.as_str().into_client_request() {
                Ok(r) => r,
                Err(e) => {
                    tracing::error!(name: "realtime_socket_url_invalid", error = %e, "realtime_socket_url_invalid");
                    return None;
                }
            };
            let auth = format!("Bearer {}", self.key.expose_secret());
            if let Ok(v) = auth.parse() {
                req.headers_mut().insert("authorization", v);
            }
            // Events are small frames: Nagle's algorithm would hold many of them back.
            match tokio_tungstenite::connect_async_with_config(req, Some(socket_config()), true)
                .await
            {
                Ok((socket, _)) => {
                    tracing::info!(name: "realtime_socket_attached", "realtime_socket_attached");
                    return Some(socket);
                }
                Err(tokio_tungstenite::tungstenite::Error::Http(resp))
                    if resp.status().is_client_error() && resp.status().as_u16() != 429 =>
                {
                    tracing::info!(name: "realtime_call_gone", status = resp.status().as_u16(), "realtime_call_gone");
                    return None;
                }
                Err(e) => {
                    if Instant::now() >= until {
                        tracing::error!(name: "realtime_socket_lost", error = %e, "realtime_socket_lost");
                        return None;
                    }
                    tracing::warn!(name: "realtime_socket_retry", error = %e, "realtime_socket_retry");
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
        while let Some(text) = self.outbox.front() {
            if socket.feed(Message::text(text.clone())).await.is_err() {
                return Err(());
            }
            self.outbox.pop_front();
        }
        socket.flush().await.map_err(|_| ())
    }

    fn send(&mut self, text: String) {
        self.outbox.push_back(text);
    }

    fn on_event(&mut self, text: &str) {
        let ev = match ServerEvent::parse(text) {
            Ok(ev) => ev,
            Err(e) => {
                tracing::warn!(name: "realtime_event_unreadable", error = %e, "realtime_event_unreadable");
                return;
            }
        };
        match ev.kind.as_str() {
            "response.created" => {
                if let Some(r) = ev.response {
                    if self.requested == Some(Asked::Goodbye)
                        && let Some(g) = &mut self.goodbye
                    {
                        g.response = Some(r.id.clone());
                    }
                    self.responses.entry(r.id.clone()).or_default();
                    self.active = Some(r.id);
                }
                self.requested = None;
            }
            "response.function_call_arguments.done" => {
                let (Some(call), Some(name)) = (ev.call_id, ev.name) else {
                    return;
                };
                self.start_call(
                    call,
                    name,
                    ev.arguments.unwrap_or_default(),
                    ev.response_id,
                    ev.item_id,
                );
            }
            "response.output_item.done" => {
                if let Some(item) = ev.item
                    && item.kind == "function_call"
                    && let (Some(call), Some(name)) = (item.call_id, item.name)
                {
                    self.start_call(
                        call,
                        name,
                        item.arguments.unwrap_or_default(),
                        ev.response_id,
                        item.id,
                    );
                }
            }
            "response.done" => {
                if let Some(r) = ev.response {
                    self.response_done(r);
                }
            }
            "error" => {
                let e = ev.error.unwrap_or_default();
                match e.code.as_deref() {
                    Some("conversation_already_has_active_response") => {
                        // The API started a response itself; ours is not needed, except a
                        // goodbye, which is asked again once the model is idle.
                        if self.requested == Some(Asked::Goodbye)
                            && let Some(g) = &mut self.goodbye
                        {
                            g.asked = false;
                        }
                        self.requested = None;
                        tracing::debug!(name: "realtime_response_already_active", "realtime_response_already_active");
                    }
                    Some("response_cancel_not_active") => {}
                    code => {
                        tracing::warn!(name: "realtime_error_event", code = code.unwrap_or(""), kind = e.kind.as_deref().unwrap_or(""), message = e.message.as_deref().unwrap_or(""), "realtime_error_event");
                        metrics::counter!("switchboard_realtime_error_events_total").increment(1);
                    }
                }
            }
            _ => {}
        }
    }

    fn start_call(
        &mut self,
        call: String,
        name: String,
        arguments: String,
        response_id: Option<String>,
        item_id: Option<String>,
    ) {
        if !self.started.insert(call.clone()) {
            return;
        }
        self.timers.insert(call.clone(), Instant::now());
        if let Some(r) = &response_id {
            self.responses
                .entry(r.clone())
                .or_default()
                .calls
                .push(call.clone());
            self.call_response.insert(call.clone(), r.clone());
        }
        // What to say while it runs.
        let config = self.session.config();
        if let Ok(entry) = config.resolve(&self.agent, &name) {
            let m = entry.tool.messages();
            if let Some(start) = &m.start {
                self.speech.push_back((call.clone(), start.clone()));
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
            call_id: self.call_id.clone(),
            function_call_id: call,
            name,
            arguments_json: arguments,
            response_id,
            item_id,
        });
    }

    fn response_done(&mut self, r: events::Response) {
        if self.active.as_deref() == Some(r.id.as_str()) {
            self.active = None;
        }
        // A function call only listed here (its `.done` was missed on a dropped socket).
        for item in r.output {
            if item.kind == "function_call"
                && let (Some(call), Some(name)) = (item.call_id, item.name)
            {
                self.start_call(
                    call,
                    name,
                    item.arguments.unwrap_or_default(),
                    Some(r.id.clone()),
                    item.id,
                );
            }
        }
        let cancelled = r.status == "cancelled";
        if cancelled {
            tracing::info!(name: "realtime_response_cancelled", response_id = %r.id, reason = r.status_details.and_then(|d| d.reason).unwrap_or_default(), "realtime_response_cancelled");
            self.session.cancel_response(&r.id);
        } else {
            self.session.response_done(&r.id);
        }
        let resp = self.responses.entry(r.id.clone()).or_default();
        resp.done = true;
        resp.cancelled = cancelled;
        if let Some(g) = &self.goodbye
            && g.response.as_deref() == Some(r.id.as_str())
        {
            // The goodbye has been said (or cut off by the caller): hang up now.
            self.hangup_due = true;
        }
        self.settle(&r.id);
    }

    /// Owes a `response.create` for `response_id` once it is done and all its calls answered.
    fn settle(&mut self, response_id: &str) {
        let Some(resp) = self.responses.get_mut(response_id) else {
            return;
        };
        if resp.settled || !resp.done || resp.calls.is_empty() {
            return;
        }
        if !resp.calls.iter().all(|c| self.answered.contains(c)) {
            return;
        }
        resp.settled = true;
        if !resp.cancelled && !self.transferred && self.goodbye.is_none() {
            self.owe_response = true;
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
                self.owe_response = false;
                self.speech.clear();
                Step::Go
            }
            DriverMsg::Delayed { function_call_id } => {
                if let Some(text) = self.delayed.remove(&function_call_id)
                    && !self.answered.contains(&function_call_id)
                {
                    self.speech.push_back((function_call_id, text));
                }
                Step::Go
            }
            DriverMsg::Hangup { goodbye, done } => match (&mut self.goodbye, goodbye) {
                // A hang-up is under way already; this one rides along.
                (Some(_), _) => {
                    let _ = done.send(Ok(()));
                    Step::Go
                }
                (None, None) => {
                    self.goodbye = Some(Goodbye {
                        text: None,
                        response: None,
                        asked: true,
                        deadline: Instant::now(),
                        done,
                    });
                    self.hang_up().await
                }
                (None, Some(text)) => {
                    self.owe_response = false;
                    self.speech.clear();
                    self.goodbye = Some(Goodbye {
                        text: Some(text),
                        response: None,
                        asked: false,
                        deadline: Instant::now() + self.options.goodbye_timeout,
                        done,
                    });
                    Step::Go
                }
            },
            DriverMsg::End => {
                let _ = self.hang_up().await;
                Step::End(CallEnd::Stopped)
            }
            DriverMsg::Released => {
                tracing::warn!(name: "realtime_call_released", "realtime_call_released");
                Step::End(CallEnd::Released)
            }
            DriverMsg::HandedOff(agent) => {
                if let Some(profile) = self.agents.get(&agent) {
                    self.agent = agent;
                    self.send(events::session_update(profile.session()));
                }
                Step::Go
            }
        }
    }

    async fn hang_up(&mut self) -> Step {
        self.hangup_due = false;
        let result = self
            .api
            .hangup(crate::api::Api::Realtime, &self.key, &self.call_id)
            .await
            .map_err(|e| e.to_string());
        if let Some(g) = self.goodbye.take() {
            let _ = g.done.send(result.clone());
        }
        match result {
            Ok(()) => Step::End(CallEnd::HungUp),
            Err(e) => {
                tracing::error!(name: "realtime_hangup_failed", error = %e, "realtime_hangup_failed");
                Step::End(CallEnd::HungUp)
            }
        }
    }

    fn deliver(&mut self, d: Delivery) {
        if d.async_completion {
            let text = format!(
                "The background task `{}` has finished. Its result: {}",
                d.tool, d.result.output
            );
            self.send(events::system_message(&text));
            if !self.transferred && self.goodbye.is_none() {
                self.owe_response = true;
            }
            return;
        }
        let call = d.result.function_call_id.clone();
        if !self.answered.insert(call.clone()) {
            return;
        }
        if let Some(t0) = self.timers.remove(&call) {
            metrics::histogram!("switchboard_realtime_tool_seconds")
                .record(t0.elapsed().as_secs_f64());
        }
        if let Some(h) = &d.handoff
            && let Some(profile) = self.agents.get(&h.agent)
        {
            // The new agent's instructions and tools go first, so the model reads the output
            // as the agent it has become.
            self.agent = h.agent.clone();
            self.send(events::session_update(profile.session()));
        }
        // Every function call gets its output, also once the call is being transferred (the
        // transfer's own call included): the conversation stays whole until the call ends.
        // Only `response.create` stops: the call is leaving, the model has nothing more to say.
        self.send(events::function_call_output(&call, &d.result.output));
        match self.call_response.get(&call).cloned() {
            Some(r) => self.settle(&r),
            None if !d.interrupted && !self.transferred => self.owe_response = true,
            None => {}
        }
    }

    /// Sends what waits for an idle model: the goodbye, then answers, then filler speech.
    fn pump(&mut self) {
        if self.active.is_some() || self.requested.is_some() {
            return;
        }
        if let Some(g) = &mut self.goodbye {
            if !g.asked
                && let Some(text) = g.text.clone()
            {
                g.asked = true;
                self.requested = Some(Asked::Goodbye);
                self.send(events::say(&text));
            }
            return;
        }
        if self.owe_response {
            self.owe_response = false;
            self.requested = Some(Asked::Answers);
            self.send(events::response_create());
            return;
        }
        while let Some((call, text)) = self.speech.pop_front() {
            if self.answered.contains(&call) {
                continue;
            }
            self.requested = Some(Asked::Speech);
            self.send(events::say(&text));
            return;
        }
    }
}

/// Events are a few KiB at most: the library's 128 KiB default buffers, per call, would make a
/// thousand calls cost a quarter of a gigabyte. Larger frames still arrive (buffers grow).
pub(crate) fn socket_config() -> tokio_tungstenite::tungstenite::protocol::WebSocketConfig {
    tokio_tungstenite::tungstenite::protocol::WebSocketConfig::default()
        .read_buffer_size(8 * 1024)
        .write_buffer_size(0)
}

enum Step {
    Go,
    Dropped,
    End(CallEnd),
}

pub(crate) async fn goodbye_deadline(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d.into()).await,
        None => std::future::pending().await,
    }
}
