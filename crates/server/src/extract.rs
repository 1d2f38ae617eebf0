//! Request extractors whose rejections use the API's error envelope (axum's answer plain text).

use axum::body::Bytes;
use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::StatusCode;
use axum::http::header::CONTENT_TYPE;
use serde::de::DeserializeOwned;
use switchboard_core::json_bounds::text_deeper_than;
use switchboard_core::limits::BODY_ENVELOPE_DEPTH;

use crate::error::ApiError;
use crate::state::AppState;

/// A JSON request body. One nested deeper than `max_json_depth` (plus the levels of the body's
/// own envelope) is refused with 422 before it is parsed: nothing accepted is too deep to be
/// stored and read back.
#[derive(Debug)]
pub struct Body<T>(pub T);

impl<T: DeserializeOwned> FromRequest<AppState> for Body<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, ApiError> {
        let (parts, body) = req.into_parts();
        let bytes = Bytes::from_request(Request::from_parts(parts.clone(), body), state)
            .await
            .map_err(JsonRejection::from)?;
        // A body that is not declared JSON is left to `Json`, which answers 415.
        let declared_json = parts
            .headers
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.to_ascii_lowercase().contains("json"));
        if declared_json {
            check_depth(&bytes, state.config.limits.json_depth())?;
        }
        let req = Request::from_parts(parts, axum::body::Body::from(bytes));
        let axum::Json(value) = axum::Json::<T>::from_request(req, state).await?;
        Ok(Body(value))
    }
}

fn check_depth(bytes: &[u8], max_value_depth: usize) -> Result<(), ApiError> {
    let max = max_value_depth + BODY_ENVELOPE_DEPTH;
    let Some(depth) = text_deeper_than(bytes, max) else {
        return Ok(());
    };
    Err(ApiError::new(
        StatusCode::UNPROCESSABLE_ENTITY,
        "too_deep",
        format!(
            "the request body nests JSON {depth} levels deep, over the limit of {max} (values may nest {max_value_depth} levels, the max_json_depth limit, inside the body's own {BODY_ENVELOPE_DEPTH}); send flatter JSON"
        ),
    )
    .with_details(serde_json::json!({"depth": depth, "limit": max})))
}

/// Path parameters.
#[derive(Debug, FromRequestParts)]
#[from_request(via(axum::extract::Path), rejection(ApiError))]
pub struct Path<T>(pub T);

/// Query parameters.
#[derive(Debug, FromRequestParts)]
#[from_request(via(axum::extract::Query), rejection(ApiError))]
pub struct Query<T>(pub T);

impl From<JsonRejection> for ApiError {
    fn from(r: JsonRejection) -> Self {
        if let Some(timed_out) = crate::listener::BodyReadTimedOut::find(&r) {
            return ApiError::new(
                StatusCode::REQUEST_TIMEOUT,
                "request_timeout",
                timed_out.to_string(),
            );
        }
        let code = if r.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
            "too_large"
        } else {
            "invalid_request"
        };
        ApiError::new(
            r.status(),
            code,
            format!("the request body is not acceptable: {}", r.body_text()),
        )
    }
}

impl From<PathRejection> for ApiError {
    fn from(r: PathRejection) -> Self {
        ApiError::bad_request(format!("the URL path is not acceptable: {}", r.body_text()))
    }
}

impl From<QueryRejection> for ApiError {
    fn from(r: QueryRejection) -> Self {
        ApiError::bad_request(format!(
            "the query string is not acceptable: {}",
            r.body_text()
        ))
    }
}
