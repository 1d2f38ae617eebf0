//! GPT-Live over SIP, simulated beside Realtime on the same server: signed
//! `live.transport.incoming` (and deprecated `live.call.incoming`) webhooks, the session
//! control endpoints (`/v1/live/sessions/{id}/{accept|reject|refer|hangup}`, bodies checked
//! against the published schema, unknown fields refused), and the sideband
//! (`/v1/live/sessions/{id}/attach`) where a test plays the backend model with
//! [`LiveBackend`]: delegations, function calls (parallel ones too) nested in `response.event`,
//! `function_call_outputs_required` for an early `response.create`, the session's input budget
//! (`response_input_buffer_full`), dropped sockets. Every client event is checked; what breaks
//! the contract is a [`Violation`](crate::Violation).
//!
//! # Layout
//! - `state`: what the simulated API remembers per session.
//! - `validate`: shape checks of bodies and client events.
//! - `rest`: the control endpoints.
//! - `sideband`: the WebSocket and each client event's effect.

mod rest;
mod sideband;
mod state;
mod validate;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::routing::{get, post};
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};

use crate::{RestRequest, Violation, webhook};
use state::{LiveShared, Outbound, Status, Turn};

/// The routes of the simulated GPT-Live API.
pub(crate) fn router(shared: Arc<LiveShared>) -> Router {
    Router::new()
        .route(
            "/v1/live/sessions/{session_id}/attach",
            get(sideband::upgrade),
        )
        .route(
            "/v1/live/sessions/{session_id}/{action}",
            post(rest::session_action),
        )
        .with_state(shared)
}

/// The state the server's live routes share.
pub(crate) type LiveSharedHandle = LiveShared;

pub(crate) fn shared() -> Arc<LiveShared> {
    Arc::new(LiveShared::new())
}

pub(crate) fn stop(shared: &LiveShared) {
    shared.stop();
}

/// The GPT-Live side of a [`Simulator`](crate::Simulator); clones share it.
#[derive(Clone)]
pub struct LiveSim {
    shared: Arc<LiveShared>,
    http: reqwest::Client,
}

impl std::fmt::Debug for LiveSim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveSim").finish_non_exhaustive()
    }
}

impl LiveSim {
    pub(crate) fn new(shared: Arc<LiveShared>, http: reqwest::Client) -> LiveSim {
        LiveSim { shared, http }
    }

    /// Sets the key requests must present (default `sk-test`).
    pub fn set_api_key(&self, key: &str) {
        key.clone_into(&mut self.shared.lock().api_key);
    }

    /// Sets the session's backend input budget in bytes (default 32,768).
    pub fn set_input_budget(&self, bytes: usize) {
        self.shared.lock().budget_bytes = bytes;
    }

    /// Makes the next `times` requests of `action` (any session) fail with `status` and an
    /// OpenAI error body with code `simulated_failure`; the requests are still recorded.
    pub fn fail_next(&self, action: &str, status: u16, times: usize) {
        let mut state = self.shared.lock();
        let queue = state.failures.entry(action.to_owned()).or_default();
        queue.extend(std::iter::repeat_n(status, times));
    }

    /// Makes the next `times` requests of `action` wait `delay` before their answer; each is
    /// recorded when it arrives, and served as usual.
    pub fn stall_next(&self, action: &str, delay: Duration, times: usize) {
        let mut state = self.shared.lock();
        let queue = state.stalls.entry(action.to_owned()).or_default();
        queue.extend(std::iter::repeat_n(delay, times));
    }

    /// Registers an incoming session so the endpoints know it.
    pub fn add_session(&self, session_id: &str) {
        self.shared.lock().session_mut(session_id);
        self.shared.touch();
    }

    /// The `live.transport.incoming` event (or, `deprecated`, `live.call.incoming`, whose data
    /// has no `type`) for a SIP call from `from` to `to`.
    pub fn incoming_event(session_id: &str, from: &str, to: &str, deprecated: bool) -> Value {
        let mut data = json!({
            "session_id": session_id,
            "sip_media_security": "srtp",
            "sip_headers": [
                {"name": "From", "value": webhook::sip_uri(from)},
                {"name": "To", "value": webhook::sip_uri(to)},
                {"name": "Call-ID", "value": webhook::random_hex(12)},
            ],
        });
        if !deprecated && let Value::Object(m) = &mut data {
            m.insert("type".into(), json!("sip"));
        }
        json!({
            "object": "event",
            "id": format!("evt_{}", webhook::random_hex(16)),
            "type": if deprecated { "live.call.incoming" } else { "live.transport.incoming" },
            "created_at": webhook::now(),
            "data": data,
        })
    }

    /// Registers `session_id` and delivers its signed incoming event to `url`; returns the
    /// receiver's HTTP status.
    pub async fn send_incoming(
        &self,
        url: &str,
        secret: &str,
        session_id: &str,
        from: &str,
        to: &str,
        deprecated: bool,
    ) -> Result<u16, String> {
        self.add_session(session_id);
        let body = Self::incoming_event(session_id, from, to, deprecated).to_string();
        webhook::post(
            &self.http,
            url,
            secret,
            &webhook::webhook_id(),
            webhook::now(),
            &body,
        )
        .await
    }

    /// Waits for the next sideband attachment of `session_id` not yet handed out.
    pub async fn backend(&self, session_id: &str, timeout: Duration) -> Option<LiveBackend> {
        let (out, rx) = self
            .shared
            .wait_for(timeout, |s| {
                s.sessions
                    .get_mut(session_id)
                    .and_then(|x| x.pending.pop_front())
            })
            .await?;
        Some(LiveBackend {
            shared: Arc::clone(&self.shared),
            session_id: session_id.to_owned(),
            out,
            rx,
        })
    }

    /// Waits for a control request `action` on `session_id`.
    pub async fn wait_request(
        &self,
        action: &str,
        session_id: &str,
        timeout: Duration,
    ) -> Option<RestRequest> {
        self.shared
            .wait_for(timeout, |s| {
                s.requests
                    .iter()
                    .find(|r| r.action == action && r.call_id == session_id)
                    .cloned()
            })
            .await
    }

    /// Every control request, in order.
    pub fn requests(&self) -> Vec<RestRequest> {
        self.shared.lock().requests.clone()
    }

    /// How many `action` requests arrived for `session_id`.
    pub fn count(&self, action: &str, session_id: &str) -> usize {
        self.shared
            .lock()
            .requests
            .iter()
            .filter(|r| r.action == action && r.call_id == session_id)
            .count()
    }

    /// Every contract violation so far.
    pub fn violations(&self) -> Vec<Violation> {
        self.shared.lock().violations.clone()
    }

    /// The accepted `session` with delegation updates applied.
    pub fn session(&self, session_id: &str) -> Option<Value> {
        self.read(session_id, |s| s.config.clone()).flatten()
    }

    /// Every `function_call_output` sent, as (call id, output), refused ones included.
    pub fn outputs(&self, session_id: &str) -> Vec<(String, String)> {
        self.read(session_id, |s| s.outputs.clone())
            .unwrap_or_default()
    }

    /// How many `response.create` events arrived (refused ones included).
    pub fn response_creates(&self, session_id: &str) -> usize {
        self.read(session_id, |s| s.response_creates).unwrap_or(0)
    }

    /// Every commentary the voice model was given.
    pub fn commentary(&self, session_id: &str) -> Vec<String> {
        self.read(session_id, |s| s.commentary.clone())
            .unwrap_or_default()
    }

    /// Every `session.update` event.
    pub fn session_updates(&self, session_id: &str) -> Vec<Value> {
        self.read(session_id, |s| s.session_updates.clone())
            .unwrap_or_default()
    }

    /// Everything the client sent for the session, in order within each kind: control request
    /// bodies as `{"kind": <action>, "body": …}` (`null` when empty), then sideband events as
    /// `{"kind": "client_event", "body": …}`.
    pub fn frames(&self, session_id: &str) -> Vec<Value> {
        let state = self.shared.lock();
        let mut frames: Vec<Value> = state
            .requests
            .iter()
            .filter(|r| r.call_id == session_id)
            .map(|r| json!({"kind": r.action, "body": r.body}))
            .collect();
        if let Some(s) = state.sessions.get(session_id) {
            frames.extend(
                s.client_events
                    .iter()
                    .map(|e| json!({"kind": "client_event", "body": e})),
            );
        }
        frames
    }

    /// How many sideband connections the session has had.
    pub fn attachments(&self, session_id: &str) -> usize {
        self.read(session_id, |s| s.attachments).unwrap_or(0)
    }

    /// Whether the session was hung up or closed.
    pub fn is_ended(&self, session_id: &str) -> bool {
        self.read(session_id, |s| s.status == Status::Ended)
            .unwrap_or(false)
    }

    /// Waits until `check` holds for the session.
    pub async fn wait_until(
        &self,
        session_id: &str,
        timeout: Duration,
        check: impl Fn(&LiveSim) -> bool,
    ) -> bool {
        let id = session_id.to_owned();
        self.shared
            .wait_for(timeout, |s| s.sessions.contains_key(&id).then_some(()))
            .await;
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if check(self) {
                return true;
            }
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    fn read<T>(&self, id: &str, f: impl FnOnce(&state::Session) -> T) -> Option<T> {
        self.shared.lock().sessions.get(id).map(f)
    }
}

/// The test's side of one sideband attachment: it plays the voice model's delegation and the
/// backend model.
#[derive(Debug)]
pub struct LiveBackend {
    shared: Arc<LiveShared>,
    session_id: String,
    out: mpsc::UnboundedSender<Outbound>,
    rx: mpsc::UnboundedReceiver<Value>,
}

impl LiveBackend {
    /// Sends one server event as is.
    pub fn send(&self, event: Value) {
        let _ = self.out.send(Outbound::Text(event.to_string()));
    }

    fn backend_event(&self, delegation: &str, event: Value) {
        self.send(
            json!({"type": "response.event", "event_id": self.shared.id("event"),
                         "delegation_id": delegation, "event": event}),
        );
    }

    /// The voice model delegates and the backend calls `calls` (name, JSON arguments) in one
    /// turn, then completes with a lifecycle snapshot whose `output` is empty, as on the
    /// sideband. Returns the call ids.
    pub fn call_tools(&self, calls: &[(&str, Value)]) -> Vec<String> {
        let delegation = self.shared.id("deleg");
        let response = self.shared.id("resp");
        let ids: Vec<String> = calls.iter().map(|_| self.shared.id("call")).collect();
        {
            let mut state = self.shared.lock();
            let turns = &mut state.session_mut(&self.session_id).turns;
            // A long call (a load test) keeps only the turns still open, once there are many.
            if turns.len() >= 256 {
                turns.retain(|t| !t.continued);
            }
            turns.push(Turn {
                delegation_id: delegation.clone(),
                calls: ids.clone(),
                ..Turn::default()
            });
        }
        self.send(
            json!({"type": "session.delegation.created", "event_id": self.shared.id("event"),
            "offset_ms": 1200, "delegation": {"id": delegation, "type": "delegation",
            "target": "responses", "response_id": response}}),
        );
        self.backend_event(&delegation, json!({"type": "response.created", "sequence_number": 0,
            "response": {"id": response, "object": "response", "status": "in_progress", "output": []}}));
        for (i, ((name, args), id)) in calls.iter().zip(&ids).enumerate() {
            let item = json!({"type": "function_call", "id": self.shared.id("fc"), "call_id": id,
                              "name": name, "arguments": args.to_string(), "status": "completed"});
            self.backend_event(
                &delegation,
                json!({"type": "response.output_item.added",
                "output_index": i, "sequence_number": 1 + 2 * i, "item": item}),
            );
            self.backend_event(
                &delegation,
                json!({"type": "response.output_item.done",
                "output_index": i, "sequence_number": 2 + 2 * i, "item": item}),
            );
        }
        self.backend_event(&delegation, json!({"type": "response.completed",
            "sequence_number": 1 + 2 * calls.len(),
            "response": {"id": response, "object": "response", "status": "completed", "output": []}}));
        ids
    }

    /// Waits until a `response.create` continued the turn of `call_id`; then the backend says
    /// its final text (which the voice model paraphrases).
    pub async fn wait_continued(&self, call_id: &str, timeout: Duration) -> bool {
        let found = self
            .shared
            .wait_for(timeout, |s| {
                s.sessions.get(&self.session_id).and_then(|x| {
                    x.turns
                        .iter()
                        .find(|t| t.calls.iter().any(|c| c == call_id) && t.continued)
                        .map(|t| t.delegation_id.clone())
                })
            })
            .await;
        let Some(delegation) = found else {
            return false;
        };
        let response = self.shared.id("resp");
        self.backend_event(&delegation, json!({"type": "response.created", "sequence_number": 0,
            "response": {"id": response, "object": "response", "status": "in_progress", "output": []}}));
        self.backend_event(&delegation, json!({"type": "response.output_text.done",
            "sequence_number": 1, "output_index": 0, "content_index": 0, "item_id": self.shared.id("msg"),
            "text": "Done."}));
        self.backend_event(&delegation, json!({"type": "response.completed", "sequence_number": 2,
            "response": {"id": response, "object": "response", "status": "completed", "output": []}}));
        true
    }

    /// The voice model speaks (a transcript delta).
    pub fn say(&self, text: &str) {
        self.send(
            json!({"type": "session.output_transcript.delta", "event_id": self.shared.id("event"),
                         "delta": text, "start_ms": 0, "end_ms": 500}),
        );
    }

    /// The next client event, if one arrives within `timeout`.
    pub async fn recv(&mut self, timeout: Duration) -> Option<Value> {
        tokio::time::timeout(timeout, self.rx.recv())
            .await
            .ok()
            .flatten()
    }

    /// Drops the socket without a close frame (a network failure); returns once it is gone.
    pub async fn drop_connection(self) {
        let (ack, done) = oneshot::channel();
        if self.out.send(Outbound::Drop(ack)).is_ok() {
            let _ = done.await;
        }
    }

    /// The caller hangs up: `session.closed` (`remote_hangup`), then a normal close.
    pub fn caller_hangs_up(&self) {
        {
            let mut state = self.shared.lock();
            state.session_mut(&self.session_id).status = Status::Ended;
        }
        self.send(json!({"type": "session.closed", "event_id": self.shared.id("event"),
            "reason": "remote_hangup", "session": {"id": self.session_id}, "usage": {"seconds": 30}}));
        let _ = self.out.send(Outbound::Close);
        self.shared.touch();
    }
}
