//! One owner per call, as a node of a deployment does it: its identity and lease, the sweep
//! that takes over the Realtime calls of dead nodes, and the forwarding of a call's requests to
//! the node that owns it.
//!
//! The database holds the truth (`switchboard_store::ownership`): which node owns each live
//! call, under which fencing token, and which nodes are alive. This node renews its own lease
//! on a heartbeat (one write per node, not per call). A request for a call another live node
//! owns is passed on to that node whole, so invocations, cancels and ends reach the owner
//! from any node; a call whose owner is dead is taken over by the first node that needs it —
//! at once for a request, within a sweep for a Realtime call, whose caller is still talking.

use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::{MatchedPath, RawPathParams, Request, State};
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use switchboard_store::{Door, NodeInfo};

use crate::calls::LiveCall;
use crate::calls::{Serving, locate};
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

/// The header a forwarded request carries (the forwarding node's id): it is never forwarded
/// again, so two nodes that disagree about an owner cannot bounce a request between them.
pub const FORWARDED_HEADER: &str = "x-switchboard-forwarded-by";

/// This node: a fresh id for each process, the address other nodes reach it at, its lease.
#[derive(Debug)]
pub struct Node {
    pub id: String,
    /// How long the node's lease lasts without a heartbeat: a node silent for longer is dead,
    /// and its calls are taken over.
    pub lease: Duration,
    /// Set when the server starts listening (or from `--advertise-url`).
    address: OnceLock<Option<String>>,
    /// When the last renewal that the database took was sent, by this process's monotonic
    /// clock: the lease runs at least until then plus `lease` (the database stamps it later).
    renewed: Mutex<Option<Instant>>,
    /// One renewal at a time for requests that found the lease run out, and when the last of
    /// them failed (see [`may_serve`]).
    regain: tokio::sync::Mutex<Option<Instant>>,
}

impl Node {
    pub fn new(lease: Duration) -> Node {
        let suffix: String = std::iter::repeat_with(fastrand::alphanumeric)
            .take(16)
            .collect();
        Node {
            id: format!("node_{suffix}"),
            lease,
            address: OnceLock::new(),
            renewed: Mutex::new(None),
            regain: tokio::sync::Mutex::new(None),
        }
    }

    /// Whether this node's lease still holds by its own clock: renewed within the last
    /// `lease`. Past that, other nodes may have taken its calls over, so it serves none of
    /// them (their requests are answered 503) and `/readyz` says so, until a renewal lands.
    /// Judged by this process's monotonic clock alone: no other node's clock is read.
    pub fn holds_lease(&self) -> bool {
        self.renewed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_some_and(|at| at.elapsed() < self.lease)
    }

    /// Resolves once [`Node::holds_lease`] is false (at once if it is already).
    pub async fn lease_runs_out(&self) {
        loop {
            let left = self
                .renewed
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .map_or(Duration::ZERO, |at| self.lease.saturating_sub(at.elapsed()));
            if left.is_zero() {
                return;
            }
            // A renewal meanwhile moves the end: look again when this one comes.
            tokio::time::sleep(left).await;
        }
    }

    fn renewed_at(&self, sent: Instant) {
        let mut renewed = self.renewed.lock().unwrap_or_else(PoisonError::into_inner);
        if renewed.is_none_or(|at| at < sent) {
            *renewed = Some(sent);
        }
    }

    /// The base URL other nodes forward requests to; `None` when it is not known (a wildcard
    /// listen address without `--advertise-url`).
    pub fn address(&self) -> Option<&str> {
        self.address.get().and_then(Option::as_deref)
    }
}

/// The address to advertise: `--advertise-url`, else the listener's own address when it is a
/// specific one (a wildcard address names no host another node could reach).
pub fn advertised(configured: Option<&str>, local: std::net::SocketAddr) -> Option<String> {
    match configured {
        Some(url) => Some(url.trim_end_matches('/').to_owned()),
        None if local.ip().is_unspecified() => None,
        None => Some(format!("http://{local}")),
    }
}

/// This node's background work for its lease: the heartbeat and the sweep, each a task of its
/// own so that a long sweep never delays a renewal. Stopped by [`Liveness::abort`].
#[derive(Debug)]
pub struct Liveness {
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Liveness {
    pub fn abort(&self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// Registers this node and keeps its lease alive; sweeps for Realtime calls whose owner died.
/// Runs until the returned handle is aborted (the server stops).
pub async fn start(state: &AppState, address: Option<String>) -> Liveness {
    if address.is_none() {
        tracing::warn!(name: "node_address_unknown", "this node listens on a wildcard address and has no --advertise-url: other nodes cannot forward a call's requests to it");
    }
    let _ = state.node.address.set(address);
    let node = &state.node;
    register(state, Instant::now()).await;
    tracing::info!(name: "node_started", node_id = %node.id, address = node.address().unwrap_or(""), lease_ms = u64::try_from(node.lease.as_millis()).unwrap_or(u64::MAX), "node_started");
    let beat = state.node.lease / 3;
    let heartbeats = tokio::spawn({
        let state = state.clone();
        async move {
            let mut next = tokio::time::Instant::now() + beat;
            loop {
                tokio::time::sleep_until(next).await;
                next += beat;
                // A renewal the database does not answer within a lease is given up (it would
                // come too late to count); the lease is judged by the last one that landed.
                let _ = tokio::time::timeout(state.node.lease, heartbeat(&state)).await;
            }
        }
    });
    let sweeps = tokio::spawn({
        let state = state.clone();
        async move {
            let every =
                (state.node.lease / 4).clamp(Duration::from_millis(100), Duration::from_secs(2));
            loop {
                tokio::time::sleep(every.min(beat)).await;
                // A node cut off from the database takes nothing over.
                if state.node.holds_lease() {
                    sweep_realtime(&state).await;
                }
            }
        }
    });
    Liveness {
        tasks: vec![heartbeats, sweeps],
    }
}

/// How long a request that found this node's lease run out waits for a renewal sent then.
const REGAIN_WAIT: Duration = Duration::from_secs(1);

/// Whether this node may serve its calls now: its lease holds, or a renewal sent now lands
/// within [`REGAIN_WAIT`] (a process that was paused — a stalled VM, a starved runtime —
/// finds its lease run out by its own clock although the database is there). One renewal at
/// a time; after one failed, requests are refused at once for a while rather than each waiting.
pub async fn may_serve(state: &AppState) -> bool {
    let node = &state.node;
    if node.holds_lease() {
        return true;
    }
    let mut failed = node.regain.lock().await;
    if node.holds_lease() {
        return true;
    }
    if failed.is_some_and(|at| at.elapsed() < REGAIN_WAIT) {
        return false;
    }
    let _ = tokio::time::timeout(REGAIN_WAIT, heartbeat(state)).await;
    let holds = node.holds_lease();
    *failed = (!holds).then(Instant::now);
    holds
}

/// Registers the node (again), counting the lease from `sent`.
async fn register(state: &AppState, sent: Instant) {
    let node = &state.node;
    match state
        .store
        .register_node(&node.id, node.address(), node.lease)
        .await
    {
        Ok(()) => node.renewed_at(sent),
        Err(e) => {
            tracing::error!(name: "node_register_failed", error = %e, "node_register_failed")
        }
    }
}

async fn heartbeat(state: &AppState) {
    let node = &state.node;
    let sent = Instant::now();
    match state.store.renew_node(&node.id, node.lease).await {
        Ok(true) => node.renewed_at(sent),
        Ok(false) => register(state, sent).await,
        Err(e) => {
            // Past the lease, other nodes take this node's calls over; its writes to them are
            // then refused by their fencing tokens, so nothing is written twice.
            tracing::error!(name: "node_heartbeat_failed", error = %e, "node_heartbeat_failed")
        }
    }
}

/// Takes over the live Realtime and GPT-Live calls of dead nodes: their callers are still talking, and
/// nothing else would bring their tools back. All that are found, in one pass (`sweep`).
async fn sweep_realtime(state: &AppState) {
    for door in [Door::Realtime, Door::Live] {
        let find = |skip: usize| async move {
            match state
                .store
                .orphaned_calls(door, crate::sweep::BATCH, skip as u64)
                .await
            {
                Ok(found) => Some(
                    found
                        .into_iter()
                        .map(|(tenant, call_id, _)| (tenant, call_id))
                        .collect(),
                ),
                Err(e) => {
                    tracing::debug!(name: "call_sweep_failed", error = %e, "call_sweep_failed");
                    None
                }
            }
        };
        let take = |(tenant, call_id): (String, String)| async move {
            // A place among the node's call set-ups: takeovers and new calls share the bound.
            let Ok(_place) = state.call_setups.acquire().await else {
                return false;
            };
            // `locate` takes the call over through the lease, exactly as a request would.
            match locate(state, &tenant, &call_id).await {
                Ok(Serving::Here(_)) | Ok(Serving::Elsewhere(_)) => true,
                Err(e) => {
                    tracing::warn!(name: "call_takeover_failed", call_id = %call_id, error = %e, "call_takeover_failed");
                    false
                }
            }
        };
        crate::sweep::pass(find, take, crate::state::CALL_SETUPS_AT_ONCE).await;
    }
}

/// Takes a Realtime or GPT-Live call over after its owner died: see
/// [`crate::realtime::resume_call`].
pub async fn take_over_realtime(
    state: &AppState,
    tenant: &str,
    call_id: &str,
    fence: i64,
    door: Door,
) -> ApiResult<Arc<LiveCall>> {
    crate::realtime::resume_call(state, tenant, call_id, fence, door).await
}

/// The routes that act on a live call, which its owner must serve.
fn acts_on_live_call(method: &Method, path: &str) -> bool {
    matches!(
        (method, path),
        (&Method::POST, "/v1/calls/{call_id}/invocations")
            | (
                &Method::POST,
                "/v1/calls/{call_id}/responses/{response_id}/cancel"
            )
            | (&Method::DELETE, "/v1/calls/{call_id}")
    )
}

/// Middleware: a request that acts on a live call owned by another live node is passed on to
/// that node, whole, and its answer returned; everything else goes to the handler (which takes
/// over a call whose owner is dead).
pub async fn forward_to_owner(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let acting = req
        .extensions()
        .get::<MatchedPath>()
        .is_some_and(|p| acts_on_live_call(req.method(), p.as_str()));
    if !acting || req.headers().contains_key(FORWARDED_HEADER) {
        return next.run(req).await;
    }
    let (mut parts, body) = req.into_parts();
    let call_id = match call_id_param(&mut parts, &state).await {
        Some(id) => id,
        None => return next.run(Request::from_parts(parts, body)).await,
    };
    // A node past its lease serves no call (another may), and waits for no database read
    // longer than its lease lasts.
    let principal =
        crate::deadlines::while_leased(&state, &call_id, crate::auth::principal(&parts, &state))
            .await;
    let tenant = match principal {
        Ok(p) => {
            // The handler's extractor reads it from here instead of the database again.
            let tenant = p.tenant_id.clone();
            parts.extensions.insert(p);
            tenant
        }
        Err(e) if e.status == StatusCode::SERVICE_UNAVAILABLE => return e.into_response(),
        Err(_) => None,
    };
    let Some(tenant) = tenant else {
        // The handler gives the authentication error.
        return next.run(Request::from_parts(parts, body)).await;
    };
    let located =
        crate::deadlines::while_leased(&state, &call_id, locate(&state, &tenant, &call_id)).await;
    match located {
        Ok(Serving::Elsewhere(node)) => {
            forward(&state, &node, (&tenant, &call_id), parts, body).await
        }
        Err(e) if e.status == StatusCode::SERVICE_UNAVAILABLE => e.into_response(),
        // Served here, or an error the handler will give again.
        _ => next.run(Request::from_parts(parts, body)).await,
    }
}

/// The call id among a request's path parameters (decoded).
async fn call_id_param(parts: &mut axum::http::request::Parts, state: &AppState) -> Option<String> {
    use axum::extract::FromRequestParts;
    let params = RawPathParams::from_request_parts(parts, state).await.ok()?;
    params
        .iter()
        .find(|(name, _)| *name == "call_id")
        .map(|(_, value)| value.to_owned())
}

/// Whether a request header goes along when a request is passed on: the credential, the body's
/// type, what the client accepts, and the MCP and Switchboard headers (an MCP request's
/// revision, method, session and parameters; the caller's user context).
fn forwarded_request_header(name: &axum::http::HeaderName) -> bool {
    let name = name.as_str();
    matches!(
        name,
        "authorization" | "content-type" | "accept" | "x-request-id"
    ) || (name.starts_with("mcp-") || name.starts_with("x-switchboard-"))
        && name != FORWARDED_HEADER
}

/// Response headers that come back from the owner: the body's type, when to retry, and the MCP
/// session a legacy `initialize` opened there.
const FORWARDED_RESPONSE_HEADERS: [&str; 3] = ["content-type", "retry-after", "mcp-session-id"];

/// Passes a request on to the node that owns its call, waiting for its answer no longer than
/// the request's tool may take (see [`crate::deadlines::forward_budget`]).
pub(crate) async fn forward(
    state: &AppState,
    node: &NodeInfo,
    (tenant, call_id): (&str, &str),
    parts: axum::http::request::Parts,
    body: Body,
) -> Response {
    let Some(address) = node.address.as_deref() else {
        return crate::calls::served_elsewhere(call_id, node).into_response();
    };
    let bytes = match axum::body::to_bytes(body, state.config.max_body_bytes).await {
        Ok(b) => b,
        Err(_) => {
            return ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "payload_too_large",
                format!(
                    "the request body is over {} bytes (max_body_bytes)",
                    state.config.max_body_bytes
                ),
            )
            .into_response();
        }
    };
    let path = parts
        .uri
        .path_and_query()
        .map_or_else(|| parts.uri.path().to_owned(), |p| p.as_str().to_owned());
    let budget = crate::deadlines::forward_budget(state, tenant, call_id, &bytes).await;
    let mut request = state
        .forwarder
        .request(parts.method.clone(), format!("{address}{path}"))
        .header(FORWARDED_HEADER, &state.node.id)
        .timeout(budget)
        .body(bytes);
    for (name, value) in &parts.headers {
        if forwarded_request_header(name) {
            request = request.header(name, value);
        }
    }
    tracing::debug!(name: "call_request_forwarded", call_id = %call_id, node_id = %node.id, "call_request_forwarded");
    metrics::counter!("switchboard_forwarded_requests_total").increment(1);
    let answer = match request.send().await {
        Ok(a) => a,
        Err(e) => {
            let timed_out = e.is_timeout();
            tracing::warn!(name: "call_forward_failed", call_id = %call_id, node_id = %node.id, error = %e.without_url(), "call_forward_failed");
            return unanswered(call_id, node, timed_out, budget);
        }
    };
    let status = answer.status();
    let headers: Vec<_> = FORWARDED_RESPONSE_HEADERS
        .iter()
        .filter_map(|name| Some((*name, answer.headers().get(*name)?.clone())))
        .collect();
    let body = match answer.bytes().await {
        Ok(b) => b,
        Err(e) => {
            let timed_out = e.is_timeout();
            tracing::warn!(name: "call_forward_failed", call_id = %call_id, node_id = %node.id, error = %e.without_url(), "call_forward_failed");
            return unanswered(call_id, node, timed_out, budget);
        }
    };
    let mut response = (status, body).into_response();
    for (name, value) in headers {
        response.headers_mut().insert(name, value);
    }
    response
}

/// The answer when the owner could not be reached, or did not answer within `budget`.
fn unanswered(call_id: &str, node: &NodeInfo, timed_out: bool, budget: Duration) -> Response {
    if !timed_out {
        return crate::calls::served_elsewhere(call_id, node).into_response();
    }
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "unavailable",
        format!(
            "call `{call_id}` is served by another node of this deployment, which did not answer within {} s; send the same request again in a moment",
            budget.as_secs()
        ),
    )
    .with_details(serde_json::json!({"retry_after_s": 1}))
    .into_response()
}
