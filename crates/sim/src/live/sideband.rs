//! The sideband, `GET /v1/live/sessions/{session_id}/attach`: the upgrade checks, the relay
//! task, and every client event checked and applied as GPT-Live's Responses delegation does.

use std::sync::Arc;

use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade, close_code};
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::rest::{Answer, authorized};
use super::state::{INPUT_BUDGET_ITEMS, LiveShared, Outbound, State as LiveState, Status};
use super::validate;
use crate::rest::authorization;

pub(crate) async fn upgrade(
    State(shared): State<Arc<LiveShared>>,
    Path(session_id): Path<String>,
    headers: HeaderMap,
    upgrade: WebSocketUpgrade,
) -> Response {
    let auth = authorization(&headers);
    {
        let state = shared.lock();
        if !authorized(&state.api_key, auth.as_deref()) {
            return Answer::error(401, "invalid_api_key", "Incorrect API key provided.".into())
                .into_response();
        }
        match state.sessions.get(&session_id).map(|s| s.status) {
            Some(Status::Accepted) => {}
            Some(_) | None => {
                return Answer::error(
                    404,
                    "session_not_found",
                    format!("Session '{session_id}' is not an active session."),
                )
                .into_response();
            }
        }
    }
    upgrade
        .read_buffer_size(crate::SOCKET_READ_BUFFER)
        .on_upgrade(move |socket| connection(shared, session_id, socket))
        .into_response()
}

async fn connection(shared: Arc<LiveShared>, id: String, mut socket: WebSocket) {
    let (out_tx, mut out_rx) = mpsc::unbounded_channel();
    let (in_tx, in_rx) = mpsc::unbounded_channel();
    {
        let mut state = shared.lock();
        let session = state.session_mut(&id);
        if session.status != Status::Accepted {
            return;
        }
        session.outbound = Some(out_tx.clone());
        session.attachments += 1;
        session.pending.push_back((out_tx, in_rx));
    }
    shared.touch();
    loop {
        tokio::select! {
            biased;
            () = shared.stopped() => break,
            out = out_rx.recv() => match out {
                Some(Outbound::Text(text)) => {
                    if socket.send(Message::Text(text.into())).await.is_err() { break; }
                }
                Some(Outbound::Close) | None => {
                    let frame = CloseFrame { code: close_code::NORMAL, reason: "session closed".into() };
                    let _ = socket.send(Message::Close(Some(frame))).await;
                    break;
                }
                Some(Outbound::Drop(ack)) => {
                    drop(socket);
                    detach(&shared, &id);
                    let _ = ack.send(());
                    return;
                }
            },
            msg = socket.recv() => match msg {
                Some(Ok(Message::Text(text))) => {
                    let replies = on_text(&shared, &id, text.as_str(), &in_tx);
                    for r in replies {
                        if socket.send(Message::Text(r.to_string().into())).await.is_err() { break; }
                    }
                }
                Some(Ok(Message::Binary(_))) => {
                    shared.lock().violation(&id, "binary frame on the sideband; events are JSON text".into(), &Value::Null);
                }
                Some(Ok(_)) => {}
                Some(Err(_)) | None => break,
            },
        }
    }
    detach(&shared, &id);
}

fn detach(shared: &LiveShared, id: &str) {
    if let Some(s) = shared.lock().sessions.get_mut(id) {
        s.outbound = None;
    }
    shared.touch();
}

fn on_text(
    shared: &LiveShared,
    id: &str,
    text: &str,
    inbound: &mpsc::UnboundedSender<Value>,
) -> Vec<Value> {
    let event: Value = match serde_json::from_str(text) {
        Ok(v) => v,
        Err(e) => {
            let raw = Value::String(text.to_owned());
            shared
                .lock()
                .violation(id, format!("unparseable client event: {e}"), &raw);
            return vec![error(shared, None, "invalid_json", "", format!("{e}"))];
        }
    };
    let replies = {
        let mut state = shared.lock();
        let events = &mut state.session_mut(id).client_events;
        if events.len() >= super::state::MAX_EVENTS {
            events.pop_front();
        }
        events.push_back(event.clone());
        apply(shared, &mut state, id, &event)
    };
    let _ = inbound.send(event);
    shared.touch();
    replies
}

fn error(
    shared: &LiveShared,
    client_event_id: Option<&str>,
    code: &str,
    param: &str,
    message: String,
) -> Value {
    json!({"type": "error", "event_id": shared.id("event"), "client_event_id": client_event_id,
           "error": {"code": code, "message": message, "type": "invalid_request_error",
                     "param": (!param.is_empty()).then_some(param), "client_event_id": client_event_id}})
}

/// Checks and applies one client event; returns the server's replies.
fn apply(shared: &LiveShared, state: &mut LiveState, id: &str, event: &Value) -> Vec<Value> {
    let Some(map) = event.as_object() else {
        state.violation(id, "a client event must be a JSON object".into(), event);
        return vec![error(
            shared,
            None,
            "invalid_type",
            "",
            "expected an object".into(),
        )];
    };
    let kind = map.get("type").and_then(Value::as_str).unwrap_or("");
    let ceid = map.get("event_id").and_then(Value::as_str);
    if let Err(r) = validate::client_event(kind, map) {
        state.violation(id, format!("{kind}: {}: {}", r.code, r.message), event);
        return vec![error(shared, ceid, r.code, &r.param, r.message)];
    }
    let budget = state.budget_bytes;
    let delegation = state.session_mut(id).delegation_type().to_owned();
    let needs_responses = matches!(kind, "response.item.create" | "response.create");
    if needs_responses && delegation != "responses" {
        let msg = format!("{kind} requires Responses delegation");
        let reply = error(shared, ceid, "invalid_request", "type", msg.clone());
        state.violation(id, msg, event);
        return vec![reply];
    }
    let session = state.session_mut(id);
    let (replies, violation) =
        apply_to_session(shared, session, budget, id, kind, map, ceid, &delegation);
    if let Some(msg) = violation {
        state.violation(id, msg, event);
    }
    replies
}

/// One checked client event applied to its session: the replies, and what the client did
/// wrong, if anything.
#[allow(clippy::too_many_arguments)]
fn apply_to_session(
    shared: &LiveShared,
    session: &mut super::state::Session,
    budget: usize,
    id: &str,
    kind: &str,
    map: &serde_json::Map<String, Value>,
    ceid: Option<&str>,
    delegation: &str,
) -> (Vec<Value>, Option<String>) {
    match kind {
        "response.item.create" => {
            let item = &map["item"];
            if item.get("type").and_then(Value::as_str) != Some("function_call_output") {
                return (Vec::new(), None);
            }
            let call = item["call_id"].as_str().unwrap_or_default().to_owned();
            let output = item["output"].as_str().unwrap_or_default().to_owned();
            session.outputs.push((call.clone(), output.clone()));
            let Some(turn) = session.turns.iter_mut().find(|t| t.calls.contains(&call)) else {
                let msg = format!("function_call_output for unknown call_id '{call}'");
                return (
                    vec![error(
                        shared,
                        ceid,
                        "invalid_value",
                        "item.call_id",
                        msg.clone(),
                    )],
                    Some(msg),
                );
            };
            if turn.answered.contains_key(&call) {
                let msg = format!("call_id '{call}' has its output already");
                return (
                    vec![error(
                        shared,
                        ceid,
                        "invalid_value",
                        "item.call_id",
                        msg.clone(),
                    )],
                    Some(msg),
                );
            }
            if session.input_bytes + output.len() > budget
                || session.input_items + 1 > INPUT_BUDGET_ITEMS
            {
                // Not the client's fault: the call stays pending.
                turn.refused.push(call);
                let msg = "The Responses input buffer is full; send a shorter result.".to_owned();
                return (
                    vec![error(
                        shared,
                        ceid,
                        "response_input_buffer_full",
                        "item.output",
                        msg,
                    )],
                    None,
                );
            }
            session.input_bytes += output.len();
            session.input_items += 1;
            turn.answered.insert(call, output);
            (Vec::new(), None)
        }
        "response.create" => {
            session.response_creates += 1;
            let waiting: Vec<usize> = (0..session.turns.len())
                .filter(|&i| !session.turns[i].continued)
                .collect();
            let missing: Vec<(bool, &String)> = waiting
                .iter()
                .flat_map(|&i| {
                    let t = &session.turns[i];
                    t.calls
                        .iter()
                        .filter(|c| !t.answered.contains_key(*c))
                        .map(|c| (t.refused.contains(c), c))
                })
                .collect();
            if !missing.is_empty() {
                let msg = "Every function call of the delegated response needs its function_call_output before response.create.".to_owned();
                // A client cannot know an output was refused before its continuation is
                // read (there is no acknowledgement): only a never-sent output is its fault.
                let fault = missing
                    .iter()
                    .any(|(refused, _)| !refused)
                    .then(|| msg.clone());
                return (
                    vec![error(
                        shared,
                        ceid,
                        "function_call_outputs_required",
                        "",
                        msg,
                    )],
                    fault,
                );
            }
            for i in waiting {
                session.turns[i].continued = true;
            }
            (Vec::new(), None)
        }
        "session.commentary.append" | "session.thinking.append" => {
            if delegation == "responses" && !map["delegation_id"].is_null() {
                let msg =
                    "Non-null delegation_id is not accepted with Responses delegation.".to_owned();
                return (
                    vec![error(
                        shared,
                        ceid,
                        "invalid_value",
                        "delegation_id",
                        msg.clone(),
                    )],
                    Some(msg),
                );
            }
            let content = map["content"].as_str().unwrap_or_default().to_owned();
            // 500 tokens: about 2,000 bytes of text.
            if content.len() > 2_000 || content.trim().is_empty() {
                let msg = "content must be 1 to 500 tokens.".to_owned();
                return (
                    vec![error(shared, ceid, "invalid_value", "content", msg.clone())],
                    Some(msg),
                );
            }
            let appended = kind.replace(".append", ".appended");
            if kind == "session.commentary.append" {
                session.commentary.push(content);
            }
            let at = 1_000 * session.commentary.len() as u64;
            (
                vec![json!({"type": appended, "event_id": shared.id("event"),
                        "client_event_id": ceid, "start_ms": at, "end_ms": at + 800})],
                None,
            )
        }
        "session.update" => {
            session.session_updates.push(Value::Object(map.clone()));
            let d = &map["session"]["delegation"];
            if let Some(t) = d.get("type").and_then(Value::as_str)
                && t != delegation
            {
                let msg = "The delegation type cannot change.".to_owned();
                return (
                    vec![error(
                        shared,
                        ceid,
                        "immutable_field_update",
                        "session.delegation.type",
                        msg.clone(),
                    )],
                    Some(msg),
                );
            }
            if let (Some(config), Some(new)) = (
                session
                    .config
                    .as_mut()
                    .and_then(|c| c.pointer_mut("/delegation/responses")),
                d.get("responses").and_then(Value::as_object),
            ) && let Some(cur) = config.as_object_mut()
            {
                for (k, v) in new {
                    cur.insert(k.clone(), v.clone());
                }
            }
            (
                vec![
                    json!({"type": "session.updated", "event_id": shared.id("event"),
                        "client_event_id": ceid, "session": session.config}),
                ],
                None,
            )
        }
        "session.close" => {
            session.status = Status::Ended;
            if let Some(out) = session.outbound.take() {
                let closed = json!({"type": "session.closed", "event_id": shared.id("event"),
                    "reason": "close_requested", "session": {"id": id}, "usage": {"seconds": 1}});
                let _ = out.send(Outbound::Text(closed.to_string()));
                let _ = out.send(Outbound::Close);
            }
            (Vec::new(), None)
        }
        _ => (Vec::new(), None),
    }
}
