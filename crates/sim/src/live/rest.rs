//! GPT-Live's session control endpoints: `POST /v1/live/sessions/{session_id}/{accept|reject|refer|hangup}`.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::state::{LiveShared, Outbound, Status};
use super::validate::{self, Refusal};
use crate::RestRequest;
use crate::rest::authorization;

/// An OpenAI-shaped answer.
pub(crate) struct Answer {
    status: u16,
    error: Option<(&'static str, String, Option<String>)>,
}

impl Answer {
    fn ok() -> Answer {
        Answer {
            status: 200,
            error: None,
        }
    }

    pub(crate) fn error(status: u16, code: &'static str, message: String) -> Answer {
        Answer {
            status,
            error: Some((code, message, None)),
        }
    }

    fn refused(r: Refusal) -> Answer {
        Answer {
            status: 400,
            error: Some((r.code, r.message, Some(r.param))),
        }
    }
}

impl IntoResponse for Answer {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        match self.error {
            None => status.into_response(),
            Some((code, message, param)) => (
                status,
                axum::Json(
                    json!({"error": {"message": message, "type": "invalid_request_error",
                                            "code": code, "param": param}}),
                ),
            )
                .into_response(),
        }
    }
}

/// Whether the request presents the simulator's key.
pub(crate) fn authorized(key: &str, authorization: Option<&str>) -> bool {
    authorization
        .and_then(|v| v.strip_prefix("Bearer "))
        .is_some_and(|k| k == key)
}

pub(crate) async fn session_action(
    State(shared): State<Arc<LiveShared>>,
    Path((session_id, action)): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Answer {
    let authorization = authorization(&headers);
    let parsed: Option<Value> = if body.is_empty() {
        None
    } else {
        Some(
            serde_json::from_slice(&body)
                .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&body).into_owned())),
        )
    };
    let stall = shared
        .lock()
        .stalls
        .get_mut(&action)
        .and_then(|s| s.pop_front());
    let answer = {
        let mut state = shared.lock();
        let answer = decide(
            &mut state,
            &session_id,
            &action,
            authorization.as_deref(),
            parsed.as_ref(),
        );
        state.requests.push(RestRequest {
            action: action.clone(),
            call_id: session_id.clone(),
            body: parsed.clone().unwrap_or(Value::Null),
            authorization,
            status: answer.status,
        });
        if answer.status == 400
            && let Some((code, message, _)) = &answer.error
        {
            let event = parsed.unwrap_or(Value::Null);
            state.violation(&session_id, format!("{action}: {code}: {message}"), &event);
        }
        answer
    };
    shared.touch();
    if let Some(delay) = stall {
        tokio::time::sleep(delay).await;
    }
    answer
}

fn decide(
    state: &mut super::state::State,
    id: &str,
    action: &str,
    authorization: Option<&str>,
    body: Option<&Value>,
) -> Answer {
    if !authorized(&state.api_key, authorization) {
        return Answer::error(401, "invalid_api_key", "Incorrect API key provided.".into());
    }
    if let Some(status) = state.failures.get_mut(action).and_then(|f| f.pop_front()) {
        return Answer::error(
            status,
            "simulated_failure",
            format!("Simulated failure of {action} for session '{id}'."),
        );
    }
    let Some(session) = state.sessions.get_mut(id) else {
        return Answer::error(
            404,
            "session_not_found",
            format!("Session '{id}' not found."),
        );
    };
    let empty = Value::Object(Default::default());
    let checked = match action {
        "accept" => validate::accept(body.unwrap_or(&Value::Null)),
        "reject" => validate::reject(body.unwrap_or(&empty)),
        "refer" => validate::refer(body.unwrap_or(&empty)),
        "hangup" => match body {
            None => Ok(()),
            Some(b) => Err(Refusal {
                code: "unknown_parameter",
                message: format!("hangup takes no body; got {b}"),
                param: String::new(),
            }),
        },
        _ => {
            return Answer::error(404, "unknown_url", format!("Unknown action '{action}'."));
        }
    };
    if let Err(r) = checked {
        return Answer::refused(r);
    }
    match (action, session.status) {
        ("accept", Status::Incoming) => {
            session.status = Status::Accepted;
            session.config = body.and_then(|b| b.get("session")).cloned();
            Answer::ok()
        }
        ("reject", Status::Incoming) => {
            session.status = Status::Rejected;
            Answer::ok()
        }
        ("refer", Status::Accepted) => Answer::ok(),
        ("hangup", Status::Accepted) => {
            session.status = Status::Ended;
            if let Some(out) = session.outbound.take() {
                let closed = json!({"type": "session.closed", "event_id": "event_hangup",
                    "reason": "close_requested", "session": {"id": id}, "usage": {"seconds": 1}});
                let _ = out.send(Outbound::Text(closed.to_string()));
                let _ = out.send(Outbound::Close);
            }
            Answer::ok()
        }
        (_, status) => Answer::error(
            409,
            "invalid_session_state",
            format!("Cannot {action} session '{id}' in state {status:?}."),
        ),
    }
}
