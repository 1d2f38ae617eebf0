//! The simulated API's handling of client events on a call's WebSocket: one small function per
//! event type, each checking the event, applying it to the call, and producing server events.

use serde_json::{Map, Value, json};

use crate::Violation;
use crate::state::{CallState, Ids, Shared, State};
use crate::validate::{self, Invalid};

/// What one client event may touch while it is being handled (under the state lock).
struct Ctx<'a> {
    call_id: &'a str,
    call: &'a mut CallState,
    violations: &'a mut Vec<Violation>,
    ids: &'a Ids,
    event: &'a Value,
    replies: Vec<Value>,
}

impl Ctx<'_> {
    fn violate(&mut self, message: String) {
        self.violations.push(Violation {
            call_id: self.call_id.to_owned(),
            message,
            event: self.event.clone(),
        });
    }

    /// An `error` server event answering the current client event.
    fn error(&self, code: &str, message: &str, param: Option<&str>) -> Value {
        let client_event_id = self.event.get("event_id").cloned().unwrap_or(Value::Null);
        error_event(self.ids, code, message, param, client_event_id)
    }
}

fn error_event(
    ids: &Ids,
    code: &str,
    message: &str,
    param: Option<&str>,
    client_event_id: Value,
) -> Value {
    json!({
        "event_id": ids.event(),
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "code": code,
            "message": message,
            "param": param,
            "event_id": client_event_id,
        },
    })
}

/// Handles one parsed client event on `call_id`'s WebSocket; returns the server events to send.
pub(crate) fn handle(shared: &Shared, call_id: &str, event: &Value) -> Vec<Value> {
    let mut guard = shared.lock();
    let State {
        calls, violations, ..
    } = &mut *guard;
    let Some(call) = calls.get_mut(call_id) else {
        return Vec::new();
    };
    let mut ctx = Ctx {
        call_id,
        call,
        violations,
        ids: shared.ids(),
        event,
        replies: Vec::new(),
    };
    if let Err(invalid) = dispatch(&mut ctx) {
        let reply = ctx.error(invalid.code, &invalid.message, invalid.param.as_deref());
        let event_type = event.get("type").and_then(Value::as_str).unwrap_or("?");
        ctx.violate(format!("client event {event_type}: {}", invalid.message));
        ctx.replies.push(reply);
    }
    ctx.replies
}

/// Handles a text frame that is not JSON: a violation and an `invalid_event` error.
pub(crate) fn unparseable(shared: &Shared, call_id: &str, raw: &Value, err: &str) -> Value {
    let message = format!("The client event is not valid JSON: {err}.");
    shared
        .lock()
        .violation(call_id, format!("client event: {message}"), raw);
    error_event(shared.ids(), "invalid_event", &message, None, Value::Null)
}

fn dispatch(ctx: &mut Ctx<'_>) -> Result<(), Invalid> {
    // Copied out so the object borrows the event, not the context.
    let event: &Value = ctx.event;
    let Some(object) = event.as_object() else {
        return Err(Invalid::new(
            "invalid_event",
            "A client event must be a JSON object.",
            None,
        ));
    };
    if let Some(id) = object.get("event_id") {
        validate::string(id, "event_id")?;
    }
    let Some(ty) = object.get("type") else {
        return Err(Invalid::new(
            "invalid_event",
            "The 'type' field is missing.",
            None,
        ));
    };
    match validate::string(ty, "type")? {
        "session.update" => session_update(ctx, object),
        "conversation.item.create" => item_create(ctx, object),
        "response.create" => response_create(ctx, object),
        "response.cancel" => response_cancel(ctx, object),
        other => Err(Invalid::new(
            "invalid_event",
            format!(
                "Invalid value: '{other}'. The simulator accepts session.update, \
                 conversation.item.create, response.create and response.cancel."
            ),
            Some("type"),
        )),
    }
}

/// `session.update`: merges the session and answers `session.updated` with the whole session.
fn session_update(ctx: &mut Ctx<'_>, event: &Map<String, Value>) -> Result<(), Invalid> {
    ctx.call.session_updates.push(ctx.event.clone());
    validate::only_fields(event, &["type", "event_id", "session"], "")?;
    let Some(update) = event.get("session") else {
        return Err(Invalid::missing("session"));
    };
    let current_tools = ctx.call.session.as_ref().and_then(|s| s.get("tools"));
    validate::session(update, "session.", current_tools)?;
    let session = ctx
        .call
        .session
        .get_or_insert_with(|| Value::Object(Map::new()));
    if let (Some(session), Some(update)) = (session.as_object_mut(), update.as_object()) {
        for (key, value) in update {
            session.insert(key.clone(), value.clone());
        }
    }
    let reply = json!({
        "event_id": ctx.ids.event(),
        "type": "session.updated",
        "session": session.clone(),
    });
    ctx.replies.push(reply);
    Ok(())
}

/// `conversation.item.create`: a function output or a message; answers `conversation.item.added`
/// then `conversation.item.done`.
fn item_create(ctx: &mut Ctx<'_>, event: &Map<String, Value>) -> Result<(), Invalid> {
    validate::only_fields(event, &["type", "event_id", "previous_item_id", "item"], "")?;
    let previous = match event.get("previous_item_id") {
        None | Some(Value::Null) => Value::Null,
        Some(id) => Value::String(validate::string(id, "previous_item_id")?.to_owned()),
    };
    let Some(item) = event.get("item") else {
        return Err(Invalid::missing("item"));
    };
    let item = validate::object(item, "item")?;
    let Some(ty) = item.get("type") else {
        return Err(Invalid::missing("item.type"));
    };
    match validate::string(ty, "item.type")? {
        "function_call_output" => function_call_output(ctx, item)?,
        "message" => validate::message(item)?,
        other => {
            return Err(Invalid::value(
                "item.type",
                format!(
                    "Invalid value: '{other}'. The simulator accepts 'function_call_output' \
                     and 'message' items."
                ),
            ));
        }
    }
    let mut created = item.clone();
    if !created.contains_key("id") {
        created.insert("id".to_owned(), Value::String(ctx.ids.item("item")));
    }
    created.insert("object".to_owned(), json!("realtime.item"));
    created.insert("status".to_owned(), json!("completed"));
    let created = Value::Object(created);
    for ty in ["conversation.item.added", "conversation.item.done"] {
        let reply = json!({
            "event_id": ctx.ids.event(),
            "type": ty,
            "previous_item_id": previous,
            "item": created,
        });
        ctx.replies.push(reply);
    }
    Ok(())
}

/// A `function_call_output` must answer a call the model issued on this call, exactly once.
fn function_call_output(ctx: &mut Ctx<'_>, item: &Map<String, Value>) -> Result<(), Invalid> {
    validate::only_fields(item, &["type", "id", "call_id", "output"], "item.")?;
    let Some(call_id) = item.get("call_id") else {
        return Err(Invalid::missing("item.call_id"));
    };
    let call_id = validate::string(call_id, "item.call_id")?;
    let Some(output) = item.get("output") else {
        return Err(Invalid::missing("item.output"));
    };
    let output = validate::string(output, "item.output")?;
    ctx.call
        .outputs
        .push((call_id.to_owned(), output.to_owned()));
    if !ctx.call.issued.contains(call_id) {
        return Err(Invalid::value(
            "item.call_id",
            format!("No function call with call_id '{call_id}' was issued on this call."),
        ));
    }
    // The API itself would accept a second output; the exactly-once rule is Switchboard's.
    if !ctx.call.answered.insert(call_id.to_owned()) {
        ctx.violate(format!(
            "function_call_output for call_id '{call_id}' sent twice: each function call gets \
             exactly one output"
        ));
    }
    Ok(())
}

/// `response.create`: refused harmlessly while a response is active, else starts one.
fn response_create(ctx: &mut Ctx<'_>, event: &Map<String, Value>) -> Result<(), Invalid> {
    ctx.call.response_creates.push(ctx.event.clone());
    validate::only_fields(event, &["type", "event_id", "response"], "")?;
    if let Some(response) = event.get("response") {
        let session_tools = ctx.call.session.as_ref().and_then(|s| s.get("tools"));
        validate::response(response, session_tools)?;
    }
    if let Some(active) = &ctx.call.active_response {
        let message = format!(
            "Conversation already has an active response in progress: {active}. Wait until the \
             response is finished before creating a new one."
        );
        let reply = ctx.error("conversation_already_has_active_response", &message, None);
        ctx.replies.push(reply);
        return Ok(());
    }
    let (_, created) = ctx.call.begin_response(ctx.ids);
    ctx.replies.push(created);
    Ok(())
}

/// `response.cancel`: ends the active response as cancelled by the client.
fn response_cancel(ctx: &mut Ctx<'_>, event: &Map<String, Value>) -> Result<(), Invalid> {
    validate::only_fields(event, &["type", "event_id", "response_id"], "")?;
    let wanted = match event.get("response_id") {
        None | Some(Value::Null) => None,
        Some(id) => Some(validate::string(id, "response_id")?),
    };
    let active = ctx
        .call
        .active_response
        .clone()
        .filter(|active| wanted.is_none_or(|w| w == active));
    let done = active.and_then(|id| {
        ctx.call.end_response(
            ctx.ids,
            &id,
            "cancelled",
            json!({"type": "cancelled", "reason": "client_cancelled"}),
        )
    });
    let reply = match done {
        Some(done) => done,
        None => {
            let message = match wanted {
                Some(id) => format!("Response '{id}' is not active; there is nothing to cancel."),
                None => "There is no active response to cancel.".to_owned(),
            };
            ctx.error("response_cancel_not_active", &message, None)
        }
    };
    ctx.replies.push(reply);
    Ok(())
}
