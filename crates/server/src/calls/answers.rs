//! A function call handed to a live call and its answer waited for, as the HTTP and MCP doors
//! do; a function call id answered before gets its record's answer.

use std::time::Duration;

use axum::http::StatusCode;
use serde::Serialize;
use serde_json::{Value, json};
use switchboard_runtime::effects::CallAction;
use switchboard_runtime::{CallConfig, Delivery, Invocation, InvocationRecord, Lookup};
use utoipa::ToSchema;

use super::LiveCall;
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;
use crate::toolset::realtime_toolset;

/// The answer to a function call.
#[derive(Debug, Serialize, ToSchema)]
pub struct InvocationResult {
    pub function_call_id: String,
    pub ok: bool,
    /// Why it failed: `tool_not_found`, `tool_disabled`, `tool_args_parse_error`,
    /// `invalid_arguments`, `validation_failed`, `api_call_failed`, `upstream_unavailable`,
    /// `timeout`, `cancelled`, `call_transfer_failed`, `handoff_failed`, `rate_limited`,
    /// `tool_execution_failed`, `loop_detected` (a runaway guard: the same call too often, or
    /// too many calls a minute), `already_done` (a transfer or hang-up already ran), or a
    /// calendar's: `slot_taken` (with free `alternatives` in `details`), `outside_hours`
    /// (also `check_availability`'s answer for a time outside the booking rules),
    /// `calendar_unavailable`, `not_connected`, `invalid_attendee`, `not_found`,
    /// `too_late_to_change` (a booking too close to its start to cancel or move).
    pub error: Option<String>,
    /// The JSON text to give the model as the function call's output.
    pub output: String,
    /// `output`, parsed.
    #[schema(value_type = Object)]
    pub result: Value,
    /// Transfers and hang-ups for your stack to carry out.
    #[schema(value_type = Vec<Object>)]
    pub actions: Vec<Value>,
    /// Set when the call moved to another agent: update the model with this toolset and the
    /// agent's instructions.
    #[schema(value_type = Option<Object>)]
    pub handoff: Option<Value>,
    pub duplicate_of: Option<String>,
    /// The response was interrupted: do not ask the model for a new response for this answer.
    pub interrupted: bool,
    /// This answer was recorded earlier (a repeated request).
    pub replayed: bool,
    /// The answer as the item that goes back to the model (`function_call_output`, a `tool`
    /// message or a `tool_result` block), when the request gave an `item` or `answer_as`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub item: Option<Value>,
}

/// Which door a function call came through, for [`submit_and_wait`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Via {
    /// `POST /v1/calls/{id}/invocations`: not for a phone call, whose model speaks on its line.
    Http,
    /// A call's MCP endpoint (or an agent's): also for a phone call, whose tools OpenAI may
    /// call over MCP.
    Mcp,
}

fn result_from_record(r: &InvocationRecord) -> InvocationResult {
    InvocationResult {
        function_call_id: r.function_call_id.clone(),
        ok: r.ok,
        error: r.error.map(|e| e.as_str().to_owned()),
        result: serde_json::from_str(&r.output).unwrap_or(Value::Null),
        output: r.output.clone(),
        actions: Vec::new(),
        handoff: None,
        duplicate_of: r.duplicate_of.clone(),
        interrupted: r.interrupted,
        replayed: true,
        item: None,
    }
}

fn result_from_delivery(
    d: Delivery,
    live: &LiveCall,
    config: Option<&CallConfig>,
) -> InvocationResult {
    let _ = live;
    let handoff = d.handoff.as_ref().map(|h| {
        let toolset = config
            .map(|c| realtime_toolset(c, &h.agent))
            .unwrap_or(Value::Null);
        json!({"agent": h.agent, "reason": h.reason, "message": h.message, "toolset": toolset})
    });
    InvocationResult {
        function_call_id: d.result.function_call_id.clone(),
        ok: d.result.ok,
        error: d.result.error.map(|e| e.as_str().to_owned()),
        result: serde_json::from_str(&d.result.output).unwrap_or(Value::Null),
        output: d.result.output,
        actions: d
            .actions
            .iter()
            .map(|a: &CallAction| serde_json::to_value(a).unwrap_or(Value::Null))
            .collect(),
        handoff,
        duplicate_of: d.duplicate_of,
        interrupted: d.interrupted,
        replayed: false,
        item: None,
    }
}

/// Hands a function call to a live call and waits for its answer; a function call id the call
/// has answered before (here or on another node) gets the recorded answer. `parent`: the
/// caller's span, which the invocation's span continues.
pub(crate) async fn submit_and_wait(
    state: &AppState,
    live: &LiveCall,
    invocation: Invocation,
    via: Via,
    arrived: std::time::Instant,
    parent: Option<switchboard_runtime::TraceParent>,
) -> ApiResult<InvocationResult> {
    let call_id = invocation.call_id.clone();
    if live.realtime && via == Via::Http {
        return Err(ApiError::conflict(format!(
            "call `{call_id}` is served by the Realtime door: its model's function calls arrive on the call's WebSocket, not here (an MCP client may call its tools at /v1/calls/{call_id}/mcp)"
        )));
    }
    let fc = invocation.function_call_id.clone();
    live.activity.touch();
    let rx = live.sink.wait_for(&fc);
    if live.realtime {
        live.sink.submitted_here(&fc);
    }
    // The session knows every answer of the call, a previous owner's included (loaded when it
    // took the call over, or read from the journal once it has let old records go).
    match live.session.lookup(&fc).await {
        Some(Lookup::Done(record)) => {
            live.sink.forget(&fc);
            return Ok(result_from_record(&record));
        }
        Some(Lookup::Pending) => {}
        // Ended meanwhile (by `DELETE`, or idle): nothing will answer.
        None if live.session.is_closed() => {
            live.sink.forget(&fc);
            return Err(ApiError::conflict(format!("call `{call_id}` has ended")));
        }
        None => live.session.submit_traced(invocation, arrived, parent),
    }
    let wait = Duration::from_secs_f64(state.config.limits.max_timeout_s + 10.0);
    match tokio::time::timeout(wait, rx).await {
        Ok(Ok(delivery)) => {
            live.activity.touch();
            let config = live.session.config();
            Ok(result_from_delivery(delivery, live, Some(&config)))
        }
        // The session let go of its waiters: another node took the call over, and will answer
        // this function call from the journal.
        Ok(Err(_)) => Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            format!("call `{call_id}` moved to another node while this ran; send the same function call again to get its answer"),
        )
        .with_details(json!({"retry_after_s": 1}))),
        Err(_) => {
            live.sink.forget(&fc);
            Err(ApiError::new(
                StatusCode::GATEWAY_TIMEOUT,
                "timeout",
                "no answer in time; the call's record will have it (GET the call)",
            ))
        }
    }
}
