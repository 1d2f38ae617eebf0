//! [`Simulator`]: starts the simulated API and lets a test drive and inspect it.

use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::routing::{get, post};
use axum::serve::ListenerExt;
use serde_json::Value;
use tokio::net::TcpListener;

use crate::model::ModelHandle;
use crate::state::{CallState, CallStatus, Shared};
use crate::{RestRequest, Violation, rest, webhook, ws};

/// A running simulation of OpenAI's Realtime-over-SIP API on `127.0.0.1`. Clones share one
/// server, which stops on [`Simulator::shutdown`] or when the last clone is dropped.
#[derive(Clone)]
pub struct Simulator {
    owner: Arc<Owner>,
}

/// What the clones share; its drop stops the server. The server tasks hold only `Shared`, so
/// they do not keep the simulator alive.
struct Owner {
    shared: Arc<Shared>,
    live: Arc<crate::live::LiveSharedHandle>,
    addr: SocketAddr,
    /// Reused for deliveries so a load test does not build a client per call.
    http: reqwest::Client,
}

impl Drop for Owner {
    fn drop(&mut self) {
        self.shared.stop();
        crate::live::stop(&self.live);
    }
}

impl fmt::Debug for Simulator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Simulator")
            .field("base_url", &self.base_url())
            .finish_non_exhaustive()
    }
}

impl Simulator {
    /// Binds `127.0.0.1:0` and serves the REST endpoints and the WebSocket on it.
    pub async fn start() -> std::io::Result<Simulator> {
        Self::start_on(std::net::SocketAddr::from(([127, 0, 0, 1], 0))).await
    }

    /// Like [`Simulator::start`], on a given address (the load generator serves a server that
    /// was started with this address as its OpenAI API base).
    pub async fn start_on(addr: std::net::SocketAddr) -> std::io::Result<Simulator> {
        let listener = TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let http = webhook::client().map_err(std::io::Error::other)?;
        let shared = Arc::new(Shared::new());
        let live = crate::live::shared();
        let app = Router::new()
            .route(
                "/v1/realtime/calls/{call_id}/{action}",
                post(rest::call_action),
            )
            .route("/v1/realtime", get(ws::upgrade))
            .with_state(Arc::clone(&shared))
            .merge(crate::live::router(Arc::clone(&live)))
            .fallback(rest::unknown_url);
        // Events are small frames: without TCP_NODELAY, Nagle's algorithm and delayed ACKs
        // would add tens of milliseconds to many of them.
        let listener = listener.tap_io(|stream| {
            let _ = stream.set_nodelay(true);
        });
        let stopping = Arc::clone(&shared);
        tokio::spawn(async move {
            let _ = axum::serve(listener, app.into_make_service())
                .with_graceful_shutdown(async move { stopping.stopped().await })
                .await;
        });
        Ok(Simulator {
            owner: Arc::new(Owner {
                shared,
                live,
                addr,
                http,
            }),
        })
    }

    fn shared(&self) -> &Shared {
        &self.owner.shared
    }

    /// The REST base a client configures as its API base, `http://127.0.0.1:PORT/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.owner.addr)
    }

    /// The WebSocket base; a client connects to `{ws_base_url}/realtime?call_id=...`.
    pub fn ws_base_url(&self) -> String {
        format!("ws://{}/v1", self.owner.addr)
    }

    /// Sets the key requests must present as `Authorization: Bearer <key>` (default `sk-test`),
    /// Realtime's and GPT-Live's alike.
    pub fn set_api_key(&self, key: &str) {
        key.clone_into(&mut self.shared().lock().api_key);
        self.live().set_api_key(key);
    }

    /// The GPT-Live side of the simulated API, served on the same address.
    pub fn live(&self) -> crate::LiveSim {
        crate::LiveSim::new(Arc::clone(&self.owner.live), self.owner.http.clone())
    }

    /// Registers an incoming call so the REST endpoints and the WebSocket know it; registering
    /// a known call again changes nothing.
    pub fn add_call(&self, call_id: &str) {
        let mut state = self.shared().lock();
        state.call_mut(call_id);
        state.wake(call_id);
    }

    /// Registers `call_id` and delivers its signed `realtime.call.incoming` event to `url`;
    /// returns the HTTP status the receiver answered.
    pub async fn send_incoming_call(
        &self,
        url: &str,
        secret: &str,
        call_id: &str,
        from: &str,
        to: &str,
    ) -> Result<u16, String> {
        let body = Self::incoming_call_event(call_id, from, to).to_string();
        self.add_call(call_id);
        webhook::post(
            &self.owner.http,
            url,
            secret,
            &webhook::webhook_id(),
            webhook::now(),
            &body,
        )
        .await
    }

    /// The `realtime.call.incoming` event for a call from `from` to `to` (E.164 numbers become
    /// `sip:<number>@sip.example.com`), with a random `evt_` id.
    pub fn incoming_call_event(call_id: &str, from: &str, to: &str) -> Value {
        webhook::incoming_call_event(call_id, from, to)
    }

    /// The Standard Webhooks `webhook-signature` value (`v1,<base64>`) for a delivery.
    pub fn sign(secret: &str, webhook_id: &str, timestamp: i64, body: &str) -> String {
        webhook::sign(secret, webhook_id, timestamp, body)
    }

    /// POSTs a signed delivery with the given id and timestamp, so tests can send stale, forged
    /// or duplicate ones; returns the HTTP status.
    pub async fn post_webhook(
        url: &str,
        secret: &str,
        webhook_id: &str,
        timestamp: i64,
        body: &str,
    ) -> Result<u16, String> {
        // A client per delivery: a shared one would outlive the runtime of the test that made it.
        let client = webhook::client()?;
        webhook::post(&client, url, secret, webhook_id, timestamp, body).await
    }

    /// Every REST request received, in order, with the status it was answered.
    pub fn requests(&self) -> Vec<RestRequest> {
        self.shared().lock().requests.clone()
    }

    /// How many `action` requests arrived for `call_id`, whatever their answer.
    pub fn count(&self, action: &str, call_id: &str) -> usize {
        self.shared()
            .lock()
            .requests
            .iter()
            .filter(|r| r.action == action && r.call_id == call_id)
            .count()
    }

    /// Makes the next `times` requests of `action` (any call) fail with `status` and an OpenAI
    /// error body with code `simulated_failure`; the requests are still recorded.
    pub fn fail_next(&self, action: &str, status: u16, times: usize) {
        let mut state = self.shared().lock();
        let queue = state.failures.entry(action.to_owned()).or_default();
        queue.extend(std::iter::repeat_n(status, times));
    }

    /// Makes the next `times` requests of `action` (any call) wait `delay` before their answer;
    /// each is recorded when it arrives, and served as usual.
    pub fn stall_next(&self, action: &str, delay: Duration, times: usize) {
        let mut state = self.shared().lock();
        let queue = state.stalls.entry(action.to_owned()).or_default();
        queue.extend(std::iter::repeat_n(delay, times));
    }

    /// Waits up to `timeout` for a request of `action` for `call_id`; returns the first one.
    pub async fn wait_request(
        &self,
        action: &str,
        call_id: &str,
        timeout: Duration,
    ) -> Option<RestRequest> {
        self.shared()
            .wait_for(call_id, timeout, |state| {
                state
                    .requests
                    .iter()
                    .find(|r| r.action == action && r.call_id == call_id)
                    .cloned()
            })
            .await
    }

    /// Waits up to `timeout` for the next WebSocket attachment of `call_id` not yet handed out,
    /// and returns the handle that plays the model on it.
    pub async fn model(&self, call_id: &str, timeout: Duration) -> Option<ModelHandle> {
        let attachment = self
            .shared()
            .wait_for(call_id, timeout, |state| {
                state
                    .calls
                    .get_mut(call_id)
                    .and_then(CallState::take_pending)
            })
            .await?;
        Some(ModelHandle::new(
            Arc::clone(&self.owner.shared),
            call_id.to_owned(),
            attachment,
        ))
    }

    /// Every protocol violation found in client traffic so far; tests assert it is empty.
    pub fn violations(&self) -> Vec<Violation> {
        self.shared().lock().violations.clone()
    }

    /// The session as the model sees it: the accept body merged with every later
    /// `session.update`; `None` before accept.
    pub fn session(&self, call_id: &str) -> Option<Value> {
        self.with_call(call_id, |call| call.session.clone())
            .flatten()
    }

    /// Whether the client hung the call up.
    pub fn is_hung_up(&self, call_id: &str) -> bool {
        self.with_call(call_id, |call| call.status == CallStatus::HungUp)
            .unwrap_or(false)
    }

    /// Every `function_call_output` the client sent on the call, as (function call id, output),
    /// including unknown or repeated ones (which are also violations).
    pub fn outputs(&self, call_id: &str) -> Vec<(String, String)> {
        self.with_call(call_id, |call| call.outputs.clone())
            .unwrap_or_default()
    }

    /// Every `response.create` event the client sent on the call, including refused ones.
    pub fn response_creates(&self, call_id: &str) -> Vec<Value> {
        self.with_call(call_id, |call| call.response_creates.clone())
            .unwrap_or_default()
    }

    /// Every `session.update` event the client sent on the call, including invalid ones.
    pub fn session_updates(&self, call_id: &str) -> Vec<Value> {
        self.with_call(call_id, |call| call.session_updates.clone())
            .unwrap_or_default()
    }

    /// Stops serving and closes every WebSocket; other clones stop too.
    pub fn shutdown(&self) {
        self.shared().stop();
        crate::live::stop(&self.owner.live);
    }

    fn with_call<T>(&self, call_id: &str, read: impl FnOnce(&CallState) -> T) -> Option<T> {
        self.shared().lock().calls.get(call_id).map(read)
    }
}
