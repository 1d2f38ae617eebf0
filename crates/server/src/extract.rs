//! Request extractors whose rejections use the API's error envelope (axum's answer plain text).

use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts};

use crate::error::ApiError;

/// A JSON request body.
#[derive(Debug, FromRequest)]
#[from_request(via(axum::Json), rejection(ApiError))]
pub struct Body<T>(pub T);

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
