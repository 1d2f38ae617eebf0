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

/// The process can serve: its database answers.
#[utoipa::path(get, path = "/readyz", tag = "operations", responses((status = 200, description = "Ready"), (status = 503, description = "The database does not answer")))]
pub async fn readyz(State(state): State<AppState>) -> ApiResult<Json<Value>> {
    state.store.ping().await.map_err(|_| {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            "the database does not answer",
        )
    })?;
    Ok(Json(
        json!({"status": "ready", "live_calls": state.calls.total()}),
    ))
}

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
