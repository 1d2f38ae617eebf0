//! Method checks for `/v1/tools/{name}`, `/v1/tools/{name}:test`, `:replay` and `:rollback`,
//! which share one axum route
//! (a path segment cannot end in a literal): each answers a method it does not have with 405 and
//! an `Allow` header naming exactly its own methods, as the OpenAPI document describes them.

use axum::extract::Request;
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::error::ApiError;

/// The methods of `/v1/tools/{name}:test`, `:replay` and `:rollback`.
const TEST_METHODS: &[Method] = &[Method::POST];
/// The methods of `/v1/tools/{name}` (HEAD comes with GET).
const TOOL_METHODS: &[Method] = &[Method::GET, Method::HEAD, Method::PUT, Method::DELETE];

/// Middleware: a request to one tool's path with a method that path does not have gets 405.
pub async fn check(req: Request, next: Next) -> Response {
    let Some(segment) = req
        .uri()
        .path()
        .strip_prefix("/v1/tools/")
        .filter(|s| !s.is_empty() && !s.contains('/'))
    else {
        return next.run(req).await;
    };
    let (path, allowed) = if segment.ends_with(":test") {
        ("/v1/tools/{name}:test", TEST_METHODS)
    } else if segment.ends_with(":replay") {
        ("/v1/tools/{name}:replay", TEST_METHODS)
    } else if segment.ends_with(":rollback") {
        ("/v1/tools/{name}:rollback", TEST_METHODS)
    } else {
        ("/v1/tools/{name}", TOOL_METHODS)
    };
    if allowed.contains(req.method()) {
        return next.run(req).await;
    }
    let allow = allowed
        .iter()
        .map(Method::as_str)
        .collect::<Vec<_>>()
        .join(", ");
    let mut response = ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        format!(
            "{} is not a method of {path}; use {allow}{}",
            req.method(),
            if path == "/v1/tools/{name}" && req.method() == Method::POST {
                " (test a tool with POST /v1/tools/{name}:test)"
            } else {
                ""
            }
        ),
    )
    .into_response();
    if let Ok(value) = HeaderValue::from_str(&allow) {
        response.headers_mut().insert(header::ALLOW, value);
    }
    response
}
