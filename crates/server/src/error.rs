//! The API's one error envelope: `{"error": {"code", "message", "details"}}`, mapped to an HTTP
//! status in one place.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::Value;
use switchboard_store::StoreError;

/// An API error: a stable code, a message that names the thing and the fix, optional details.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    pub details: Option<Value>,
}

/// Every error response: `{"error": {...}}`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

/// The body of every error response.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ErrorDetail {
    /// Stable, machine-readable: `not_found`, `invalid_request`, `unauthorized`, …
    pub code: String,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<ErrorDetails>)]
    pub details: Option<Value>,
}

/// What `details` holds, for the document: every problem of a definition, or facts about the
/// error (e.g. `retry_after_s`).
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(untagged)]
#[allow(dead_code)] // Only its schema is used: `details` is built as JSON.
pub enum ErrorDetails {
    /// Every problem found, e.g. in a tool definition or a feature's configuration.
    Problems(Vec<Problem>),
    /// Facts about the error, e.g. `{"retry_after_s": 3}`.
    Facts(std::collections::BTreeMap<String, Value>),
}

/// One problem: where it is (a JSON Pointer, `""` for the whole document), what is wrong, and
/// how to fix it.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[allow(dead_code)] // Only its schema is used.
pub struct Problem {
    pub pointer: String,
    pub message: String,
    pub fix: Option<String>,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            message: message.into(),
            details: None,
        }
    }

    pub fn with_details(mut self, details: Value) -> Self {
        self.details = Some(details);
        self
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_request", message)
    }

    pub fn not_found(what: impl std::fmt::Display) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "not_found",
            format!("{what} does not exist"),
        )
    }

    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "unauthorized", message)
    }

    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, "forbidden", message)
    }

    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, "conflict", message)
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", message)
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match &e {
            StoreError::NotFound(what) => ApiError::not_found(what),
            StoreError::Conflict(m) => ApiError::conflict(m.clone()),
            StoreError::Invalid(m) => ApiError::bad_request(m.clone()),
            StoreError::Fenced(m) => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "unavailable",
                format!("{m}; retry in a moment"),
            )
            .with_details(serde_json::json!({"retry_after_s": 1})),
            StoreError::Rejected(m) => {
                ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "rejected", m.to_string())
            }
            StoreError::Database(db) if unavailable(db) => {
                tracing::error!(name: "store_unavailable", error = %e, "store_unavailable");
                ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "unavailable",
                    "the database did not answer in time; try again",
                )
            }
            _ => {
                tracing::error!(name: "store_error", error = %e, "store_error");
                ApiError::internal(
                    "the server could not read or write its database; the operators have the details in its log",
                )
            }
        }
    }
}

/// Whether a database error means the database is not reachable right now (a restart, a
/// dropped connection, a pool without a free connection): worth a retry, so a 503, not a 500.
/// PostgreSQL's connection exceptions (class 08) and operator interventions (57P01 admin
/// shutdown, 57P02 crash shutdown, 57P03 cannot connect now) are such.
fn unavailable(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed
        | sqlx::Error::Io(_) => true,
        sqlx::Error::Database(db) => db.code().is_some_and(|c| {
            c.starts_with("08") || matches!(c.as_ref(), "57P01" | "57P02" | "57P03")
        }),
        _ => false,
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let retry_after = matches!(
            self.status,
            StatusCode::TOO_MANY_REQUESTS | StatusCode::SERVICE_UNAVAILABLE
        )
        .then(|| {
            self.details
                .as_ref()
                .and_then(|d| d.get("retry_after_s"))
                .and_then(Value::as_u64)
                .unwrap_or(1)
        });
        let body = ErrorBody {
            error: ErrorDetail {
                code: self.code.to_owned(),
                message: self.message,
                details: self.details,
            },
        };
        let mut response = (self.status, Json(body)).into_response();
        if let Some(seconds) = retry_after {
            response.headers_mut().insert(
                axum::http::header::RETRY_AFTER,
                axum::http::HeaderValue::from(seconds),
            );
        }
        response
    }
}

/// `Result` for handlers.
pub type ApiResult<T> = Result<T, ApiError>;

#[cfg(test)]
mod unavailable_tests {
    use super::*;

    #[test]
    fn a_database_out_of_reach_is_unavailable_and_a_query_error_is_not() {
        assert!(unavailable(&sqlx::Error::PoolClosed));
        assert!(unavailable(&sqlx::Error::PoolTimedOut));
        assert!(unavailable(&sqlx::Error::Io(std::io::Error::other(
            "reset"
        ))));
        assert!(!unavailable(&sqlx::Error::RowNotFound));
        let e = ApiError::from(StoreError::Database(sqlx::Error::PoolClosed));
        assert_eq!(e.status, StatusCode::SERVICE_UNAVAILABLE);
    }
}
