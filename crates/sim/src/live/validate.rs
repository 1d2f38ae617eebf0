//! Shape checks of GPT-Live request bodies and client events, from the published schema
//! (`openai` SDK `types/live`): required fields, value types, and unknown fields refused the
//! way OpenAI refuses them (`unknown_parameter`, naming the parameter).

use serde_json::{Map, Value};

/// Why a body or event is refused: an OpenAI error code, a message and the parameter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Refusal {
    pub(crate) code: &'static str,
    pub(crate) message: String,
    pub(crate) param: String,
}

type Checked = Result<(), Refusal>;

fn refuse(code: &'static str, param: &str, message: String) -> Refusal {
    Refusal {
        code,
        message,
        param: param.to_owned(),
    }
}

fn object<'a>(value: &'a Value, param: &str) -> Result<&'a Map<String, Value>, Refusal> {
    value.as_object().ok_or_else(|| {
        refuse(
            "invalid_type",
            param,
            format!("Invalid type for '{param}': expected an object."),
        )
    })
}

/// Refuses any key of `map` outside `allowed`.
fn only(map: &Map<String, Value>, allowed: &[&str], param: &str) -> Checked {
    for key in map.keys() {
        if !allowed.contains(&key.as_str()) {
            let full = if param.is_empty() {
                key.clone()
            } else {
                format!("{param}.{key}")
            };
            return Err(refuse(
                "unknown_parameter",
                &full,
                format!("Unknown parameter: '{full}'."),
            ));
        }
    }
    Ok(())
}

fn string<'a>(map: &'a Map<String, Value>, key: &str, param: &str) -> Result<&'a str, Refusal> {
    match map.get(key) {
        Some(Value::String(s)) => Ok(s),
        Some(_) => Err(refuse(
            "invalid_type",
            &format!("{param}.{key}"),
            format!("Invalid type for '{param}.{key}': expected a string."),
        )),
        None => Err(refuse(
            "missing_required_parameter",
            &format!("{param}.{key}"),
            format!("Missing required parameter: '{param}.{key}'."),
        )),
    }
}

fn optional(map: &Map<String, Value>, key: &str, param: &str, ok: fn(&Value) -> bool) -> Checked {
    match map.get(key) {
        Some(v) if !ok(v) => Err(refuse(
            "invalid_type",
            &format!("{param}.{key}"),
            format!("Invalid value for '{param}.{key}'."),
        )),
        _ => Ok(()),
    }
}

const SESSION_FIELDS: &[&str] = &[
    "model",
    "type",
    "audio",
    "delegation",
    "input",
    "instructions",
    "safety_identifier",
    "store",
    "triggers",
];
const RESPONSES_FIELDS: &[&str] = &[
    "model",
    "instructions",
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "max_output_tokens",
    "reasoning",
    "text",
    "service_tier",
];

/// `POST /live/sessions/{id}/accept`: `{"session": {…}}`.
pub(crate) fn accept(body: &Value) -> Checked {
    let body = object(body, "")?;
    only(body, &["session"], "")?;
    let session = body.get("session").ok_or_else(|| {
        refuse(
            "missing_required_parameter",
            "session",
            "Missing required parameter: 'session'.".into(),
        )
    })?;
    let s = object(session, "session")?;
    only(s, SESSION_FIELDS, "session")?;
    if string(s, "type", "session")? != "live" {
        return Err(refuse(
            "invalid_value",
            "session.type",
            "Invalid value for 'session.type': expected 'live'.".into(),
        ));
    }
    string(s, "model", "session")?;
    optional(s, "instructions", "session", |v| {
        v.is_string() || v.is_null()
    })?;
    optional(s, "store", "session", Value::is_boolean)?;
    if let Some(audio) = s.get("audio") {
        let a = object(audio, "session.audio")?;
        if a.contains_key("format") {
            return Err(refuse(
                "invalid_value",
                "session.audio.format",
                "audio.format is only accepted for primary WebSockets; SIP negotiates the media format.".into(),
            ));
        }
        only(a, &["output"], "session.audio")?;
        if let Some(out) = a.get("output") {
            let o = object(out, "session.audio.output")?;
            only(o, &["voice"], "session.audio.output")?;
            optional(o, "voice", "session.audio.output", |v| {
                v.is_string() || v.get("id").is_some_and(Value::is_string)
            })?;
        }
    }
    match s.get("delegation") {
        None | Some(Value::Null) => Ok(()),
        Some(d) => delegation(d, "session.delegation", true),
    }
}

/// A delegation config; `start` requires the backend model (an update may leave it out).
pub(crate) fn delegation(d: &Value, param: &str, start: bool) -> Checked {
    let d = object(d, param)?;
    match string(d, "type", param)? {
        "client" => only(d, &["type", "acknowledgement_delay_ms"], param),
        "responses" => {
            only(d, &["type", "responses", "acknowledgement_delay_ms"], param)?;
            optional(d, "acknowledgement_delay_ms", param, Value::is_u64)?;
            let key = format!("{param}.responses");
            let Some(r) = d.get("responses") else {
                return if start {
                    Err(refuse(
                        "missing_required_parameter",
                        &key,
                        format!("Missing required parameter: '{key}'."),
                    ))
                } else {
                    Ok(())
                };
            };
            let r = object(r, &key)?;
            only(r, RESPONSES_FIELDS, &key)?;
            if start || r.contains_key("model") {
                string(r, "model", &key)?;
            }
            optional(r, "instructions", &key, |v| v.is_string() || v.is_null())?;
            optional(r, "parallel_tool_calls", &key, Value::is_boolean)?;
            optional(r, "tool_choice", &key, |v| {
                matches!(v.as_str(), Some("auto" | "none" | "required"))
                    || v.get("type").is_some_and(Value::is_string)
            })?;
            if let Some(tools) = r.get("tools") {
                let list = tools.as_array().ok_or_else(|| {
                    refuse(
                        "invalid_type",
                        &format!("{key}.tools"),
                        "tools must be an array".into(),
                    )
                })?;
                for (i, t) in list.iter().enumerate() {
                    function_tool(t, &format!("{key}.tools[{i}]"))?;
                }
            }
            Ok(())
        }
        other => Err(refuse(
            "invalid_value",
            &format!("{param}.type"),
            format!("The simulator plays Responses and client delegation, not `{other}`."),
        )),
    }
}

fn function_tool(t: &Value, param: &str) -> Checked {
    let m = object(t, param)?;
    if string(m, "type", param)? != "function" {
        return Err(refuse(
            "invalid_value",
            &format!("{param}.type"),
            "Switchboard sends only function tools to a GPT-Live backend.".into(),
        ));
    }
    only(
        m,
        &["type", "name", "description", "parameters", "strict"],
        param,
    )?;
    let name = string(m, "name", param)?;
    if name.is_empty()
        || name.len() > 64
        || !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        return Err(refuse(
            "invalid_value",
            &format!("{param}.name"),
            format!("Invalid function name '{name}'."),
        ));
    }
    optional(m, "description", param, Value::is_string)?;
    optional(m, "parameters", param, Value::is_object)?;
    optional(m, "strict", param, Value::is_boolean)
}

/// `POST …/reject`: `status_code` is required, 300–699.
pub(crate) fn reject(body: &Value) -> Checked {
    let m = object(body, "")?;
    only(m, &["status_code"], "")?;
    match m.get("status_code").and_then(Value::as_u64) {
        Some(300..=699) => Ok(()),
        Some(_) => Err(refuse(
            "invalid_value",
            "status_code",
            "status_code must be a SIP status from 300 to 699.".into(),
        )),
        None => Err(refuse(
            "missing_required_parameter",
            "status_code",
            "Missing required parameter: 'status_code'.".into(),
        )),
    }
}

/// `POST …/refer`: a non-blank `target_uri`.
pub(crate) fn refer(body: &Value) -> Checked {
    let m = object(body, "")?;
    only(m, &["target_uri"], "")?;
    let uri = string(m, "target_uri", "")?;
    if uri.trim().is_empty() {
        return Err(refuse(
            "invalid_value",
            "target_uri",
            "target_uri must not be blank.".into(),
        ));
    }
    Ok(())
}

/// Checks a client event's fields for its type (which the caller dispatches on).
pub(crate) fn client_event(kind: &str, ev: &Map<String, Value>) -> Checked {
    match kind {
        "response.create" | "session.close" => only(ev, &["type", "event_id"], ""),
        "response.item.create" => {
            only(ev, &["type", "event_id", "item"], "")?;
            let item = ev.get("item").ok_or_else(|| {
                refuse(
                    "missing_required_parameter",
                    "item",
                    "Missing required parameter: 'item'.".into(),
                )
            })?;
            let m = object(item, "item")?;
            if string(m, "type", "item")? != "function_call_output" {
                return Ok(());
            }
            only(m, &["type", "call_id", "output", "id", "status"], "item")?;
            string(m, "call_id", "item")?;
            string(m, "output", "item")?;
            Ok(())
        }
        "session.commentary.append" | "session.thinking.append" => {
            only(ev, &["type", "event_id", "content", "delegation_id"], "")?;
            string(ev, "content", "")?;
            if !ev.contains_key("delegation_id") {
                return Err(refuse(
                    "missing_required_parameter",
                    "delegation_id",
                    "Missing required parameter: 'delegation_id' (null for session-wide context)."
                        .into(),
                ));
            }
            optional(ev, "delegation_id", "", |v| v.is_null() || v.is_string())
        }
        "session.update" => {
            only(ev, &["type", "event_id", "session"], "")?;
            let s = object(ev.get("session").unwrap_or(&Value::Null), "session")?;
            only(s, &["delegation", "triggers"], "session")?;
            match s.get("delegation") {
                Some(d) if !d.is_null() => delegation(d, "session.delegation", false),
                _ => Ok(()),
            }
        }
        other => Err(refuse(
            "invalid_value",
            "type",
            format!(
                "Invalid value: '{other}'. Supported client events are documented in the Live API reference."
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn accept_refuses_unknown_and_realtime_only_fields() {
        let good = json!({"session": {"type": "live", "model": "gpt-live-1",
            "delegation": {"type": "responses", "responses": {"model": "m",
                "tools": [{"type": "function", "name": "f", "parameters": {}}]}}}});
        assert_eq!(accept(&good), Ok(()));
        let flat = json!({"type": "live", "model": "gpt-live-1"});
        assert_eq!(accept(&flat).unwrap_err().param, "type");
        let rt = json!({"session": {"type": "live", "model": "m", "tools": []}});
        assert_eq!(accept(&rt).unwrap_err().param, "session.tools");
        let fmt = json!({"session": {"type": "live", "model": "m", "audio": {"format": {}}}});
        assert_eq!(accept(&fmt).unwrap_err().param, "session.audio.format");
        let extra = json!({"session": {"type": "live", "model": "m", "delegation": {"type": "responses",
            "responses": {"model": "m", "tools": [{"type": "function", "name": "f", "x": 1}]}}}});
        assert_eq!(
            accept(&extra).unwrap_err().param,
            "session.delegation.responses.tools[0].x"
        );
    }

    #[test]
    fn reject_needs_a_sip_status() {
        assert!(reject(&json!({})).is_err());
        assert!(reject(&json!({"status_code": 200})).is_err());
        assert_eq!(reject(&json!({"status_code": 486})), Ok(()));
    }
}
