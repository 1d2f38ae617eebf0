//! Liveness, readiness, metrics and the OpenAPI document.

use axum::Json;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use serde_json::{Value, json};

use crate::auth::Admin;
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

/// The process is up.
#[utoipa::path(get, path = "/healthz", tag = "operations", responses((status = 200, description = "Up")))]
pub async fn healthz() -> Json<Value> {
    Json(json!({"status": "ok"}))
}

/// The process can serve: its lease on its calls holds by its own clock, and its database
/// answers within a second. A node cut off from its database says so within a second of its
/// lease running out, however the database fails to answer (refused or silent).
#[utoipa::path(get, path = "/readyz", tag = "operations", responses((status = 200, description = "Ready"), (status = 503, description = "The database does not answer, or this node's lease on its calls has run out")))]
pub async fn readyz(State(state): State<AppState>) -> ApiResult<Json<Value>> {
    if !crate::ownership::may_serve(&state).await {
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            "this node has not renewed its lease in the database for a whole lease: other nodes may have taken its calls over",
        ));
    }
    let ping = tokio::time::timeout(READY_PING, state.store.ping()).await;
    if !matches!(ping, Ok(Ok(()))) {
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            "the database does not answer",
        ));
    }
    Ok(Json(
        json!({"status": "ready", "live_calls": state.calls.total()}),
    ))
}

/// How long `/readyz` waits for the database.
const READY_PING: std::time::Duration = std::time::Duration::from_secs(1);

/// Prometheus metrics, for the admin key: the series name tenants, so they are not public.
pub async fn metrics(State(state): State<AppState>, _admin: Admin) -> impl IntoResponse {
    render_metrics(&state)
}

/// Prometheus metrics without a key, on the separate metrics listener (`--metrics-listen`),
/// which belongs on a private interface.
pub async fn metrics_open(State(state): State<AppState>) -> impl IntoResponse {
    render_metrics(&state)
}

fn render_metrics(state: &AppState) -> ([(header::HeaderName, &'static str); 1], String) {
    let body = state
        .metrics
        .as_ref()
        .map(|h| h.render())
        .unwrap_or_default();
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], body)
}
