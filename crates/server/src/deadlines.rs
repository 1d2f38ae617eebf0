//! How long a request acting on a live call may take, so that no answer comes later than its
//! tool's deadline plus a small margin, however the database or another node fails to answer.
//!
//! - A request's tool counts its deadline from the request's arrival ([`Arrived`]): waiting
//!   for the credential, the call and the database is time the caller waits too.
//! - While it waits for the database before its tool starts, a request gives up as soon as this
//!   node's lease runs out ([`lease_lost`]): past it other nodes may serve the call, and a
//!   database that does not answer at all (cut off, not refusing) would otherwise hold the
//!   request until TCP gives up.
//! - A request passed on to the call's owner waits for the owner at most the tool's deadline
//!   plus [`margin`] ([`forward_budget`]); an owner that accepts the request and never answers
//!   gets the caller a 503 with `retry_after_s`, not a wait of minutes.

use std::future::Future;
use std::time::{Duration, Instant};

use axum::extract::Request;
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::Response;
use serde_json::{Value, json};

use crate::error::ApiError;
use crate::state::AppState;

/// When a request arrived, for the deadline of the function call it carries.
#[derive(Debug, Clone, Copy)]
pub struct Arrived(pub Instant);

/// Middleware: notes when each request arrived.
pub async fn note_arrival(mut req: Request, next: Next) -> Response {
    req.extensions_mut().insert(Arrived(Instant::now()));
    next.run(req).await
}

/// What an answer may take beyond its tool's deadline: the commit's retry
/// (`--commit-retry-ms`), then at most a second of slack for the way back.
pub fn margin(state: &AppState) -> Duration {
    state.config.commit_retry + SLACK
}

const SLACK: Duration = Duration::from_secs(1);

/// The bound of a request acting on a call that carries no function call (a cancel, an end,
/// an MCP request other than `tools/call`): ending a call answers its running tools and stores
/// the end, which is the margin's work, plus reading the call back.
fn other_budget(state: &AppState) -> Duration {
    margin(state) + Duration::from_secs(10)
}

/// The answer of a request whose call this node may no longer serve: its lease ran out.
pub fn lease_lost(call_id: &str) -> ApiError {
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "unavailable",
        format!(
            "this node has lost touch with its database, so it may no longer serve call `{call_id}`; retry in a moment (another node will)"
        ),
    )
    .with_details(json!({"retry_after_s": 1}))
}

/// `work`, unless this node's lease runs out first: then the request is answered
/// [`lease_lost`], whatever `work` was waiting for.
pub async fn while_leased<T>(
    state: &AppState,
    call_id: &str,
    work: impl Future<Output = Result<T, ApiError>>,
) -> Result<T, ApiError> {
    if !crate::ownership::may_serve(state).await {
        return Err(lease_lost(call_id));
    }
    tokio::select! {
        done = work => done,
        () = state.node.lease_runs_out() => Err(lease_lost(call_id)),
    }
}

/// How long to wait for the owner of `call_id` to answer a request with `body` (the request
/// body, JSON: an invocation, or an MCP message): for a function call, its tool's deadline
/// plus [`margin`]; otherwise a fixed bound.
pub async fn forward_budget(
    state: &AppState,
    tenant: &str,
    call_id: &str,
    body: &[u8],
) -> Duration {
    let Some(name) = function_name(body) else {
        return other_budget(state);
    };
    let timeout = tool_timeout(state, tenant, call_id, &name).await;
    timeout + margin(state)
}

/// The function a request's body calls: an invocation's `name` (or its model `item`'s), or an
/// MCP `tools/call`'s `params.name`.
fn function_name(body: &[u8]) -> Option<String> {
    let v: Value = serde_json::from_slice(body).ok()?;
    let name = if v.get("jsonrpc").is_some() {
        (v["method"] == "tools/call").then(|| v["params"]["name"].clone())?
    } else if let Some(item) = v.get("item") {
        item.get("name")
            .or_else(|| item.pointer("/function/name"))
            .cloned()?
    } else {
        v.get("name").cloned()?
    };
    name.as_str().map(str::to_owned)
}

/// The longest `timeout` any agent of the call gives the tool `name`, as the call pinned it;
/// the default tool timeout when the name is none of them (its answer, `tool_not_found`, is
/// quick). Kept for a while per call and name: a busy deployment forwards most requests.
async fn tool_timeout(state: &AppState, tenant: &str, call_id: &str, name: &str) -> Duration {
    let key = (tenant.to_owned(), call_id.to_owned(), name.to_owned());
    if let Some(known) = state.forward_budgets.get(&key) {
        return known;
    }
    let default = Duration::from_secs_f64(switchboard_core::tool::DEFAULT_TIMEOUT_S);
    let found =
        match while_leased(state, call_id, pinned_timeout(state, tenant, call_id, name)).await {
            Ok(found) => found,
            // Not known now: the longest a tool may take, not kept.
            Err(_) => return Duration::from_secs_f64(state.config.limits.max_timeout_s),
        };
    let timeout = found.unwrap_or(default);
    state.forward_budgets.insert(key, timeout);
    timeout
}

async fn pinned_timeout(
    state: &AppState,
    tenant: &str,
    call_id: &str,
    name: &str,
) -> Result<Option<Duration>, ApiError> {
    let Some(row) = state.store.get_call(tenant, call_id).await? else {
        return Ok(None);
    };
    let mut longest: Option<u64> = None;
    let agents = row.pinned.get("agents").and_then(Value::as_object);
    for pin in agents
        .into_iter()
        .flatten()
        .filter_map(|(_, t)| t.get(name))
    {
        let ms = if let Some(definition) = pin.get("mcp") {
            switchboard_core::Tool::parse(definition, &state.config.limits)
                .ok()
                .map(|t| t.timeout_ms())
        } else if let Some(version) = pin.as_i64().filter(|v| *v > 0) {
            match state.store.get_tool_version(tenant, name, version).await? {
                Some(v) => crate::toolset::compile(state, tenant, &v)
                    .ok()
                    .map(|t| t.timeout_ms()),
                None => None,
            }
        } else {
            // Built in: a toolkit's action or the transfer tool.
            state.toolkit_tools.longest_timeout_ms(name)
        };
        longest = longest.max(ms);
    }
    Ok(longest.map(Duration::from_millis))
}

#[cfg(test)]
mod tests {
    use super::function_name;

    #[test]
    fn the_function_a_request_calls_is_read_from_each_shape() {
        let cases: [(&str, Option<&str>); 7] = [
            (r#"{"function_call_id":"f","name":"book"}"#, Some("book")),
            (
                r#"{"item":{"type":"function_call","name":"book","call_id":"f","arguments":"{}"}}"#,
                Some("book"),
            ),
            (
                r#"{"item":{"id":"f","type":"function","function":{"name":"book","arguments":"{}"}}}"#,
                Some("book"),
            ),
            (
                r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"book"}}"#,
                Some("book"),
            ),
            (r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#, None),
            (r#"{"name":7}"#, None),
            ("not json", None),
        ];
        for (body, name) in cases {
            assert_eq!(function_name(body.as_bytes()).as_deref(), name, "{body}");
        }
    }
}
