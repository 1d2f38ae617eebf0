//! Switchboard's server: the multi-tenant REST API over the store and the runtime.
//!
//! # Layout
//! - [`routes`]: one module per resource (`tenants`, `settings`, `tools`, `agents`, `calls`,
//!   `health`), each handler documented for OpenAPI with utoipa.
//! - [`auth`]: tenant and admin keys; [`error`]: the one error envelope; [`extract`]: extractors
//!   whose rejections use it.
//! - [`calls`]: the HTTP door's live calls (a `CallSession` each) and the sink that answers the
//!   waiting requests; [`expiry`]: such calls left unused end by themselves; [`toolset`]: from stored config to compiled tools, toolsets and a call's
//!   pinned config; [`tool_cache`]: compiled tools, bounded by bytes; [`caller_profile`]: a
//!   returning caller's remembered facts, loaded when a call starts.
//! - [`mcp`]: MCP both ways: each agent's tools served at `/v1/agents/{name}/mcp` and each
//!   live call's at `/v1/calls/{call_id}/mcp`, and tenants' MCP servers as tool sources.
//! - [`realtime`]: the OpenAI Realtime SIP webhook, routing a call to its agent, and running it on
//!   the node's Realtime door.
//! - [`console`]: the operators' console at `/console` (server-rendered pages, assets in the
//!   binary, a sealed session cookie, CSRF tokens, a strict Content-Security-Policy).
//! - [`alerts`]: tenants' alert rules, evaluated once per cluster from the database and
//!   notified as signed webhooks.
//! - [`demo`]: the `acme-corp` demo tenant; [`prometheus`]: the metrics recorder (latency
//!   histograms, drained between scrapes).
//!
//! - [`traces`]: trace export (OTLP over HTTP, off unless configured) and the caller's span
//!   read from a door's `traceparent`.
//! - [`listener`]: the TCP listeners: a cap on open connections, and deadlines that close
//!   connections which are slow to send a request, idle, or not reading their answer.
//!
//! [`serve`] takes its listener and its shutdown signal, so tests bind `127.0.0.1:0` and drive a
//! real server. `/metrics` there needs the admin key; [`serve_metrics`] serves it without one on
//! a listener of its own (`--metrics-listen`, for a private interface).
#![forbid(unsafe_code)]

use std::future::Future;
use std::time::Duration;

use axum::Router;
use axum::http::{HeaderName, Request};
use tokio::net::TcpListener;
use tower_http::limit::RequestBodyLimitLayer;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::trace::TraceLayer;

pub mod alerts;
pub mod auth;
pub mod caller_profile;
pub mod calls;
pub mod console;
pub mod deadlines;
pub mod demo;
pub mod error;
pub mod expiry;
pub mod extract;
pub mod latency;
pub mod listener;
pub mod mcp;
pub mod ownership;
pub mod phone;
pub mod prometheus;
pub mod realtime;
pub mod routes;
pub mod state;
mod sweep;
pub mod tool_cache;
pub mod toolset;
pub mod traces;

pub use state::{AppState, EMAILS_PER_TENANT_PER_MINUTE, ServerConfig};

static REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// The application: every route, its OpenAPI document at `/openapi.json`, and the middleware.
pub fn app(state: AppState) -> Router {
    let (router, openapi) = split();
    let openapi_json = serde_json::to_value(&openapi).unwrap_or_default();
    let max_body = state.config.max_body_bytes;
    // JSON-RPC over streamable HTTP, so outside the OpenAPI document; README describes it.
    let mcp_service = mcp::door::service(&state);
    let mcp_door = Router::new()
        .route_service(mcp::ENDPOINT_PATH, mcp_service.clone())
        .route_service(mcp::CALL_ENDPOINT_PATH, mcp_service)
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            mcp::door::authenticate,
        ));
    router
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            ownership::forward_to_owner,
        ))
        .merge(mcp_door)
        .merge(console::router())
        .route("/openapi.json", axum::routing::get(move || async move { axum::Json(openapi_json.clone()) }))
        .route("/metrics", axum::routing::get(routes::health::metrics))
        .fallback(|| async { error::ApiError::not_found("this path") })
        .layer(axum::middleware::from_fn(routes::tool_methods::check))
        .with_state(state)
        .layer(RequestBodyLimitLayer::new(max_body))
        .layer(TraceLayer::new_for_http().make_span_with(|req: &Request<_>| {
            let id = req.headers().get(&REQUEST_ID).and_then(|v| v.to_str().ok()).unwrap_or_default();
            tracing::info_span!("request", method = %req.method(), path = %req.uri().path(), request_id = %id)
        }))
        .layer(PropagateRequestIdLayer::new(REQUEST_ID.clone()))
        .layer(SetRequestIdLayer::new(REQUEST_ID.clone(), MakeRequestUuid))
        .layer(axum::middleware::from_fn(deadlines::note_arrival))
}

/// The metrics listener's application: `/metrics` without a key, and nothing else. Serve it
/// only where Prometheus alone can reach it (the series name tenants).
pub fn metrics_app(state: AppState) -> Router {
    Router::new()
        .route("/metrics", axum::routing::get(routes::health::metrics_open))
        .fallback(|| async { error::ApiError::not_found("this path") })
        .with_state(state)
}

/// Serves [`metrics_app`] until `shutdown` completes.
pub async fn serve_metrics(
    listener: TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let limits = listener::ConnectionLimits {
        max_connections: state.config.metrics_max_connections,
        ..state.config.connections
    };
    listener::serve(listener, metrics_app(state), limits, "metrics", shutdown).await
}

/// The OpenAPI 3.1 document of the API.
pub fn openapi() -> utoipa::openapi::OpenApi {
    split().1
}

fn split() -> (Router<AppState>, utoipa::openapi::OpenApi) {
    let (router, mut openapi) = routes::router().split_for_parts();
    routes::declare_path_parameters(&mut openapi);
    routes::responses::declare_error_responses(&mut openapi);
    (router, openapi)
}

/// Serves until `shutdown` completes; then stops accepting, ends every live call cleanly (each
/// running tool is answered), and returns.
pub async fn serve(
    listener: TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let app = app(state.clone());
    let address = listener
        .local_addr()
        .ok()
        .and_then(|a| ownership::advertised(state.config.advertise_url.as_deref(), a));
    let liveness = ownership::start(&state, address).await;
    let expiry = expiry::start(&state);
    let alerts = alerts::start(&state);
    let latency = latency::start(&state);
    let mcp_streams = state.mcp.shutdown.clone();
    let limits = state.config.connections;
    listener::serve(listener, app, limits, "api", async move {
        shutdown.await;
        // Open MCP streams would hold the graceful shutdown up forever.
        mcp_streams.cancel();
    })
    .await?;
    state.realtime.stop_all();
    let calls = state.calls.drain();
    if !calls.is_empty() {
        tracing::info!(name: "shutdown_ending_calls", calls = calls.len(), "shutdown_ending_calls");
    }
    for call in calls {
        let _ = tokio::time::timeout(Duration::from_secs(10), call.session.end()).await;
    }
    liveness.abort();
    alerts.abort();
    latency.abort();
    if let Some(expiry) = expiry {
        expiry.abort();
    }
    if let Err(e) = state.store.retire_node(&state.node.id).await {
        tracing::warn!(name: "node_retire_failed", error = %e, "node_retire_failed");
    }
    Ok(())
}
