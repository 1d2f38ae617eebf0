//! The call control endpoints: `POST /v1/realtime/calls/{call_id}/{accept|reject|refer|hangup}`.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, State as AxumState};
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::RestRequest;
use crate::state::{CallStatus, Outbound, Shared, State};
use crate::validate::{self, Invalid};

/// How the simulator answers a request: 200 with an empty body, or an OpenAI error.
#[derive(Debug)]
pub(crate) struct Answer {
    status: u16,
    error: Option<ApiError>,
}

/// The `error` object of an OpenAI error body.
#[derive(Debug)]
struct ApiError {
    kind: &'static str,
    code: &'static str,
    message: String,
    param: Option<String>,
}

impl Answer {
    fn ok() -> Self {
        Answer {
            status: 200,
            error: None,
        }
    }

    fn error(status: u16, kind: &'static str, code: &'static str, message: String) -> Self {
        Answer {
            status,
            error: Some(ApiError {
                kind,
                code,
                message,
                param: None,
            }),
        }
    }

    fn invalid(invalid: Invalid) -> Self {
        Answer {
            status: 400,
            error: Some(ApiError {
                kind: "invalid_request_error",
                code: invalid.code,
                message: invalid.message,
                param: invalid.param,
            }),
        }
    }

    fn not_found(call_id: &str) -> Self {
        Self::error(
            404,
            "invalid_request_error",
            "call_id_not_found",
            format!("Call '{call_id}' not found."),
        )
    }

    /// 401 for a missing or wrong `Authorization: Bearer` key.
    pub(crate) fn unauthorized(authorization: Option<&str>) -> Self {
        let message = match authorization {
            None => "You didn't provide an API key. Send it as 'Authorization: Bearer <key>'.",
            Some(_) => "Incorrect API key provided.",
        };
        Self::error(
            401,
            "invalid_request_error",
            "invalid_api_key",
            message.to_owned(),
        )
    }

    /// 404 for a WebSocket on a call that cannot have one (unknown, not accepted, ended).
    pub(crate) fn no_socket(call_id: &str, why: &str) -> Self {
        Self::error(
            404,
            "invalid_request_error",
            "call_id_not_found",
            format!("Call '{call_id}' {why}."),
        )
    }

    /// 400 for a request missing a parameter.
    pub(crate) fn missing(param: &str) -> Self {
        Self::invalid(Invalid::missing(param))
    }
}

/// Any other route: OpenAI's 404, so a client with a wrong base URL sees a familiar error.
pub(crate) async fn unknown_url(method: Method, uri: Uri) -> Answer {
    Answer::error(
        404,
        "invalid_request_error",
        "unknown_url",
        format!("Unknown request URL: {method} {uri}."),
    )
}

impl IntoResponse for Answer {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        match self.error {
            None => status.into_response(),
            Some(error) => {
                let body = json!({"error": {
                    "message": error.message,
                    "type": error.kind,
                    "code": error.code,
                    "param": error.param,
                }});
                (
                    status,
                    [(header::CONTENT_TYPE, "application/json")],
                    body.to_string(),
                )
                    .into_response()
            }
        }
    }
}

/// The `Authorization` header as text, if present and readable.
pub(crate) fn authorization(headers: &HeaderMap) -> Option<String> {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned)
}

/// Whether `authorization` presents the simulator's key.
pub(crate) fn authorized(state: &State, authorization: Option<&str>) -> bool {
    authorization
        .and_then(|value| value.strip_prefix("Bearer "))
        .is_some_and(|key| key == state.api_key)
}

/// Serves one call control request, recording it whatever the answer.
pub(crate) async fn call_action(
    AxumState(shared): AxumState<Arc<Shared>>,
    Path((call_id, action)): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Answer {
    let authorization = authorization(&headers);
    let (body, parsed) = parse_body(&body);
    let stall = shared
        .lock()
        .stalls
        .get_mut(&action)
        .and_then(|s| s.pop_front());
    let answer = {
        let mut state = shared.lock();
        let answer = decide(
            &mut state,
            &action,
            &call_id,
            authorization.as_deref(),
            &body,
            parsed,
        );
        state.requests.push(RestRequest {
            action,
            call_id: call_id.clone(),
            body,
            authorization,
            status: answer.status,
        });
        state.wake(&call_id);
        answer
    };
    if let Some(delay) = stall {
        tokio::time::sleep(delay).await;
    }
    answer
}

/// The body as JSON (`Null` when empty), and whether it parsed.
fn parse_body(body: &[u8]) -> (Value, bool) {
    if body.iter().all(u8::is_ascii_whitespace) {
        return (Value::Null, true);
    }
    match serde_json::from_slice(body) {
        Ok(value) => (value, true),
        Err(_) => (
            Value::String(String::from_utf8_lossy(body).into_owned()),
            false,
        ),
    }
}

fn decide(
    state: &mut State,
    action: &str,
    call_id: &str,
    authorization: Option<&str>,
    body: &Value,
    parsed: bool,
) -> Answer {
    if !authorized(state, authorization) {
        return Answer::unauthorized(authorization);
    }
    if !matches!(action, "accept" | "reject" | "refer" | "hangup") {
        state.violation(
            call_id,
            format!("POST /realtime/calls/{call_id}/{action}: no such endpoint"),
            body,
        );
        return Answer::error(
            404,
            "invalid_request_error",
            "unknown_url",
            format!("Unknown request URL: POST /v1/realtime/calls/{call_id}/{action}."),
        );
    }
    if let Some(status) = state.failures.get_mut(action).and_then(|f| f.pop_front()) {
        return Answer::error(
            status,
            "server_error",
            "simulated_failure",
            format!("Simulated failure of {action} for call '{call_id}'."),
        );
    }
    if !parsed {
        state.violation(
            call_id,
            format!("{action}: the body is not valid JSON"),
            body,
        );
        return Answer::error(
            400,
            "invalid_request_error",
            "invalid_json",
            "We could not parse the JSON body of your request.".to_owned(),
        );
    }
    let Some(status) = state.calls.get(call_id).map(|call| call.status) else {
        return Answer::not_found(call_id);
    };
    let answer = match action {
        "accept" => accept(state, call_id, status, body),
        "reject" => reject(state, call_id, status, body),
        "refer" => refer(call_id, status, body),
        _ => hangup(state, call_id, status, body),
    };
    match answer {
        Ok(answer) => answer,
        Err((answer, message)) => {
            state.violation(call_id, format!("{action}: {message}"), body);
            answer
        }
    }
}

/// An answer that is also a client violation, with what the client did wrong.
type Refusal = (Answer, String);

fn refuse_invalid(invalid: Invalid) -> Refusal {
    let message = invalid.message.clone();
    (Answer::invalid(invalid), message)
}

fn ended(call_id: &str, status: CallStatus) -> Refusal {
    let what = match status {
        CallStatus::Rejected => "was rejected",
        _ => "was hung up",
    };
    (
        Answer::not_found(call_id),
        format!("the call {what}; the client must not act on it again"),
    )
}

fn accept(
    state: &mut State,
    call_id: &str,
    status: CallStatus,
    body: &Value,
) -> Result<Answer, Refusal> {
    match status {
        CallStatus::Incoming => {}
        CallStatus::Accepted => {
            return Err((
                Answer::error(
                    400,
                    "invalid_request_error",
                    "call_already_accepted",
                    format!("Call '{call_id}' has already been accepted."),
                ),
                "the call was already accepted".to_owned(),
            ));
        }
        ended_status => return Err(ended(call_id, ended_status)),
    }
    validate::session(body, "", None).map_err(refuse_invalid)?;
    let call = state.call_mut(call_id);
    call.status = CallStatus::Accepted;
    call.session = Some(body.clone());
    Ok(Answer::ok())
}

fn reject(
    state: &mut State,
    call_id: &str,
    status: CallStatus,
    body: &Value,
) -> Result<Answer, Refusal> {
    match status {
        CallStatus::Incoming => {}
        CallStatus::Accepted => {
            return Err((
                Answer::error(
                    400,
                    "invalid_request_error",
                    "call_already_accepted",
                    format!("Call '{call_id}' has been accepted; hang it up instead."),
                ),
                "reject after accept; hang up instead".to_owned(),
            ));
        }
        ended_status => return Err(ended(call_id, ended_status)),
    }
    validate::reject(body).map_err(refuse_invalid)?;
    state.call_mut(call_id).status = CallStatus::Rejected;
    Ok(Answer::ok())
}

fn refer(call_id: &str, status: CallStatus, body: &Value) -> Result<Answer, Refusal> {
    match status {
        CallStatus::Accepted => {}
        CallStatus::Incoming => {
            return Err((
                Answer::error(
                    400,
                    "invalid_request_error",
                    "call_not_accepted",
                    format!("Call '{call_id}' has not been accepted."),
                ),
                "refer before accept".to_owned(),
            ));
        }
        ended_status => return Err(ended(call_id, ended_status)),
    }
    validate::refer(body).map_err(refuse_invalid)?;
    Ok(Answer::ok())
}

fn hangup(
    state: &mut State,
    call_id: &str,
    status: CallStatus,
    body: &Value,
) -> Result<Answer, Refusal> {
    if matches!(status, CallStatus::Rejected | CallStatus::HungUp) {
        return Err(ended(call_id, status));
    }
    let call = state.call_mut(call_id);
    call.status = CallStatus::HungUp;
    call.active_response = None;
    // The WebSocket lives as long as the SIP call.
    for (_, socket) in call.live.drain(..) {
        let _ = socket.send(Outbound::Close);
    }
    let empty = body.is_null() || body.as_object().is_some_and(|o| o.is_empty());
    if !empty {
        // Served anyway: the API ignores it, but the contract says hangup has no body.
        state.violation(call_id, "hangup: the request has a body".to_owned(), body);
    }
    Ok(Answer::ok())
}
