//! Liveness, readiness, metrics and the OpenAPI document.

use axum::Json;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use serde_json::{Value, json};

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

/// Prometheus metrics.
pub async fn metrics(State(state): State<AppState>) -> impl IntoResponse {
    let body = state
        .metrics
        .as_ref()
        .map(|h| h.render())
        .unwrap_or_default();
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], body)
}
