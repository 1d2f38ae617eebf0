//! Pure shape checks for what clients send, with OpenAI's error codes and parameter paths.

use serde_json::{Map, Value};

/// Why a request or event was refused: the OpenAI error `code`, `message` and `param`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Invalid {
    pub(crate) code: &'static str,
    pub(crate) message: String,
    pub(crate) param: Option<String>,
}

impl Invalid {
    pub(crate) fn new(code: &'static str, message: impl Into<String>, param: Option<&str>) -> Self {
        Invalid {
            code,
            message: message.into(),
            param: param.map(str::to_owned),
        }
    }

    pub(crate) fn unknown(param: &str) -> Self {
        Self::new(
            "unknown_parameter",
            format!("Unknown parameter: '{param}'."),
            Some(param),
        )
    }

    pub(crate) fn missing(param: &str) -> Self {
        Self::new(
            "missing_required_parameter",
            format!("Missing required parameter: '{param}'."),
            Some(param),
        )
    }

    pub(crate) fn wrong_type(param: &str, expected: &str, got: &Value) -> Self {
        Self::new(
            "invalid_type",
            format!(
                "Invalid type for '{param}': expected {expected}, but got {} instead.",
                kind(got)
            ),
            Some(param),
        )
    }

    pub(crate) fn value(param: &str, message: impl Into<String>) -> Self {
        Self::new("invalid_value", message, Some(param))
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "an integer",
        Value::Number(_) => "a decimal",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Top-level fields of a session configuration (accept body, `session.update`'s `session`).
const SESSION_FIELDS: &[&str] = &[
    "type",
    "model",
    "instructions",
    "audio",
    "tools",
    "tool_choice",
    "output_modalities",
    "max_output_tokens",
    "tracing",
    "truncation",
    "prompt",
    "include",
];

/// Fields of `response.create`'s `response`.
const RESPONSE_FIELDS: &[&str] = &[
    "instructions",
    "tool_choice",
    "tools",
    "conversation",
    "output_modalities",
    "metadata",
    "input",
    "audio",
    "max_output_tokens",
    "prompt",
];

/// Refuses the first field of `object` not in `allowed`, naming it as `{prefix}{field}`.
pub(crate) fn only_fields(
    object: &Map<String, Value>,
    allowed: &[&str],
    prefix: &str,
) -> Result<(), Invalid> {
    match object.keys().find(|key| !allowed.contains(&key.as_str())) {
        Some(key) => Err(Invalid::unknown(&format!("{prefix}{key}"))),
        None => Ok(()),
    }
}

pub(crate) fn object<'a>(value: &'a Value, param: &str) -> Result<&'a Map<String, Value>, Invalid> {
    value
        .as_object()
        .ok_or_else(|| Invalid::wrong_type(param, "an object", value))
}

pub(crate) fn string<'a>(value: &'a Value, param: &str) -> Result<&'a str, Invalid> {
    value
        .as_str()
        .ok_or_else(|| Invalid::wrong_type(param, "a string", value))
}

fn array<'a>(value: &'a Value, param: &str) -> Result<&'a Vec<Value>, Invalid> {
    value
        .as_array()
        .ok_or_else(|| Invalid::wrong_type(param, "an array", value))
}

/// Checks `object[field]`, if present, with `check`, naming it `{prefix}{field}`.
fn optional(
    object: &Map<String, Value>,
    field: &str,
    prefix: &str,
    check: impl FnOnce(&Value, &str) -> Result<(), Invalid>,
) -> Result<(), Invalid> {
    match object.get(field) {
        Some(value) => check(value, &format!("{prefix}{field}")),
        None => Ok(()),
    }
}

fn is_string(value: &Value, param: &str) -> Result<(), Invalid> {
    string(value, param).map(drop)
}

fn is_object(value: &Value, param: &str) -> Result<(), Invalid> {
    object(value, param).map(drop)
}

fn one_of(value: &Value, param: &str, allowed: &[&str]) -> Result<(), Invalid> {
    let text = string(value, param)?;
    if allowed.contains(&text) {
        Ok(())
    } else {
        Err(Invalid::value(
            param,
            format!(
                "Invalid value: '{text}'. Supported values are: {}.",
                allowed
                    .iter()
                    .map(|a| format!("'{a}'"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ))
    }
}

fn strings(value: &Value, param: &str) -> Result<(), Invalid> {
    for (i, entry) in array(value, param)?.iter().enumerate() {
        string(entry, &format!("{param}[{i}]"))?;
    }
    Ok(())
}

/// Checks a session configuration: the accept body (`prefix` "") or `session.update`'s
/// `session` (`prefix` "session."); `tool_choice` is checked against this configuration's
/// tools, or `current_tools` when it sets none.
pub(crate) fn session(
    value: &Value,
    prefix: &str,
    current_tools: Option<&Value>,
) -> Result<(), Invalid> {
    let whole = prefix.strip_suffix('.').unwrap_or("body");
    let config = object(value, whole)?;
    only_fields(config, SESSION_FIELDS, prefix)?;
    match config.get("type") {
        None => return Err(Invalid::missing(&format!("{prefix}type"))),
        Some(ty) => one_of(ty, &format!("{prefix}type"), &["realtime"])?,
    }
    optional(config, "model", prefix, is_string)?;
    optional(config, "instructions", prefix, is_string)?;
    optional(config, "audio", prefix, audio)?;
    optional(config, "output_modalities", prefix, output_modalities)?;
    optional(config, "max_output_tokens", prefix, max_output_tokens)?;
    optional(config, "tracing", prefix, tracing)?;
    optional(config, "truncation", prefix, truncation)?;
    optional(config, "prompt", prefix, prompt)?;
    optional(config, "include", prefix, strings)?;
    optional(config, "tools", prefix, tools)?;
    let tools_in_force = config.get("tools").or(current_tools);
    optional(config, "tool_choice", prefix, |choice, param| {
        tool_choice(choice, param, tools_in_force)
    })
}

/// Checks `response.create`'s `response`; `tool_choice` is checked against its own tools, or the
/// session's when it sets none.
pub(crate) fn response(value: &Value, session_tools: Option<&Value>) -> Result<(), Invalid> {
    let prefix = "response.";
    let response = object(value, "response")?;
    only_fields(response, RESPONSE_FIELDS, prefix)?;
    optional(response, "instructions", prefix, is_string)?;
    optional(response, "conversation", prefix, |v, p| {
        one_of(v, p, &["auto", "none"])
    })?;
    optional(response, "output_modalities", prefix, output_modalities)?;
    optional(response, "metadata", prefix, metadata)?;
    optional(response, "input", prefix, |v, p| {
        for (i, entry) in array(v, p)?.iter().enumerate() {
            object(entry, &format!("{p}[{i}]"))?;
        }
        Ok(())
    })?;
    optional(response, "audio", prefix, audio)?;
    optional(response, "max_output_tokens", prefix, max_output_tokens)?;
    optional(response, "prompt", prefix, prompt)?;
    optional(response, "tools", prefix, tools)?;
    let tools_in_force = response.get("tools").or(session_tools);
    optional(response, "tool_choice", prefix, |choice, param| {
        tool_choice(choice, param, tools_in_force)
    })
}

fn audio(value: &Value, param: &str) -> Result<(), Invalid> {
    let audio = object(value, param)?;
    let prefix = format!("{param}.");
    only_fields(audio, &["input", "output"], &prefix)?;
    optional(audio, "input", &prefix, is_object)?;
    optional(audio, "output", &prefix, is_object)
}

fn output_modalities(value: &Value, param: &str) -> Result<(), Invalid> {
    for (i, entry) in array(value, param)?.iter().enumerate() {
        one_of(entry, &format!("{param}[{i}]"), &["audio", "text"])?;
    }
    Ok(())
}

fn max_output_tokens(value: &Value, param: &str) -> Result<(), Invalid> {
    match value {
        Value::String(s) if s == "inf" => Ok(()),
        Value::Number(n) => match n.as_u64() {
            Some(1..=4096) => Ok(()),
            _ => Err(Invalid::value(
                param,
                format!("Invalid value: {n}. Expected an integer between 1 and 4096, or 'inf'."),
            )),
        },
        other => Err(Invalid::wrong_type(param, "an integer or 'inf'", other)),
    }
}

fn tracing(value: &Value, param: &str) -> Result<(), Invalid> {
    match value {
        Value::Null | Value::Object(_) => Ok(()),
        other => one_of(other, param, &["auto"]),
    }
}

fn truncation(value: &Value, param: &str) -> Result<(), Invalid> {
    match value {
        Value::Object(_) => Ok(()),
        other => one_of(other, param, &["auto", "disabled"]),
    }
}

fn prompt(value: &Value, param: &str) -> Result<(), Invalid> {
    match value {
        Value::Null => Ok(()),
        other => {
            let prompt = object(other, param)?;
            match prompt.get("id") {
                Some(id) => is_string(id, &format!("{param}.id")),
                None => Err(Invalid::missing(&format!("{param}.id"))),
            }
        }
    }
}

fn metadata(value: &Value, param: &str) -> Result<(), Invalid> {
    match value {
        Value::Null => Ok(()),
        other => {
            for (key, entry) in object(other, param)? {
                is_string(entry, &format!("{param}.{key}"))?;
            }
            Ok(())
        }
    }
}

/// Checks a `tools` array: every entry, and that function names and MCP labels are unique.
fn tools(value: &Value, param: &str) -> Result<(), Invalid> {
    let mut names = Vec::new();
    for (i, entry) in array(value, param)?.iter().enumerate() {
        let entry_param = format!("{param}[{i}]");
        let key = tool(entry, &entry_param)?;
        if names.contains(&key) {
            return Err(Invalid::value(
                &entry_param,
                format!("Duplicate tool: '{}' appears twice in '{param}'.", key.1),
            ));
        }
        names.push(key);
    }
    Ok(())
}

/// Checks one tool; returns its kind and its name (function) or server label (MCP).
fn tool<'a>(value: &'a Value, param: &str) -> Result<(&'a str, &'a str), Invalid> {
    let tool = object(value, param)?;
    let prefix = format!("{param}.");
    let Some(ty) = tool.get("type") else {
        return Err(Invalid::missing(&format!("{prefix}type")));
    };
    one_of(ty, &format!("{prefix}type"), &["function", "mcp"])?;
    match ty.as_str() {
        Some("mcp") => mcp_tool(tool, &prefix).map(|label| ("mcp", label)),
        _ => function_tool(tool, &prefix).map(|name| ("function", name)),
    }
}

fn function_tool<'a>(tool: &'a Map<String, Value>, prefix: &str) -> Result<&'a str, Invalid> {
    only_fields(tool, &["type", "name", "description", "parameters"], prefix)?;
    let name_param = format!("{prefix}name");
    let name = string(
        tool.get("name")
            .ok_or_else(|| Invalid::missing(&name_param))?,
        &name_param,
    )?;
    if !is_function_name(name) {
        return Err(Invalid::value(
            &name_param,
            format!("Invalid value: '{name}'. Function names must match ^[a-zA-Z0-9_-]{{1,64}}$."),
        ));
    }
    optional(tool, "description", prefix, is_string)?;
    optional(tool, "parameters", prefix, |value, param| {
        let schema = object(value, param)?;
        match schema.get("type") {
            None => Ok(()),
            Some(ty) => one_of(ty, &format!("{param}.type"), &["object"]),
        }
    })?;
    Ok(name)
}

fn is_function_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

fn mcp_tool<'a>(tool: &'a Map<String, Value>, prefix: &str) -> Result<&'a str, Invalid> {
    only_fields(
        tool,
        &[
            "type",
            "server_label",
            "server_url",
            "connector_id",
            "allowed_tools",
            "require_approval",
            "headers",
            "authorization",
            "server_description",
        ],
        prefix,
    )?;
    let label_param = format!("{prefix}server_label");
    let label = string(
        tool.get("server_label")
            .ok_or_else(|| Invalid::missing(&label_param))?,
        &label_param,
    )?;
    if label.is_empty() {
        return Err(Invalid::value(
            &label_param,
            "'server_label' must not be empty.",
        ));
    }
    let url_param = format!("{prefix}server_url");
    match tool.get("server_url") {
        Some(url) => {
            let url = string(url, &url_param)?;
            if !(url.starts_with("https://") || url.starts_with("http://")) {
                return Err(Invalid::value(
                    &url_param,
                    format!("Invalid value: '{url}'. Expected an http(s) URL."),
                ));
            }
        }
        None if tool.contains_key("connector_id") => {}
        None => return Err(Invalid::missing(&url_param)),
    }
    optional(tool, "connector_id", prefix, is_string)?;
    optional(tool, "allowed_tools", prefix, |value, param| match value {
        Value::Null => Ok(()),
        Value::Array(_) => strings(value, param),
        other => {
            let filter = object(other, param)?;
            let inner = format!("{param}.");
            only_fields(filter, &["tool_names", "read_only"], &inner)?;
            optional(filter, "tool_names", &inner, strings)
        }
    })?;
    optional(
        tool,
        "require_approval",
        prefix,
        |value, param| match value {
            Value::Null | Value::Object(_) => Ok(()),
            other => one_of(other, param, &["always", "never"]),
        },
    )?;
    optional(tool, "headers", prefix, |value, param| match value {
        Value::Null => Ok(()),
        other => {
            for (key, header) in object(other, param)? {
                is_string(header, &format!("{param}.{key}"))?;
            }
            Ok(())
        }
    })?;
    optional(tool, "authorization", prefix, is_string)?;
    optional(tool, "server_description", prefix, is_string)?;
    Ok(label)
}

/// Checks a `tool_choice`; a named function or MCP server must be among `tools`.
fn tool_choice(value: &Value, param: &str, tools: Option<&Value>) -> Result<(), Invalid> {
    if value.is_string() {
        return one_of(value, param, &["auto", "none", "required"]);
    }
    let choice = object(value, param)?;
    let prefix = format!("{param}.");
    let Some(ty) = choice.get("type") else {
        return Err(Invalid::missing(&format!("{prefix}type")));
    };
    one_of(ty, &format!("{prefix}type"), &["function", "mcp"])?;
    let (kind, key, fields): (&str, &str, &[&str]) = match ty.as_str() {
        Some("mcp") => ("mcp", "server_label", &["type", "server_label", "name"]),
        _ => ("function", "name", &["type", "name"]),
    };
    only_fields(choice, fields, &prefix)?;
    optional(choice, "name", &prefix, is_string)?;
    let key_param = format!("{prefix}{key}");
    let wanted = string(
        choice
            .get(key)
            .ok_or_else(|| Invalid::missing(&key_param))?,
        &key_param,
    )?;
    let known = tools
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|tool| {
            tool.get("type").and_then(Value::as_str) == Some(kind)
                && tool.get(key).and_then(Value::as_str) == Some(wanted)
        });
    if known {
        Ok(())
    } else {
        Err(Invalid::value(
            &key_param,
            format!("Tool choice '{wanted}' is not one of the {kind} tools in force."),
        ))
    }
}

/// Checks a `message` item of `conversation.item.create`.
pub(crate) fn message(item: &Map<String, Value>) -> Result<(), Invalid> {
    only_fields(
        item,
        &["type", "id", "object", "role", "content", "status"],
        "item.",
    )?;
    optional(item, "id", "item.", is_string)?;
    match item.get("role") {
        Some(role) => one_of(role, "item.role", &["system", "user", "assistant"])?,
        None => return Err(Invalid::missing("item.role")),
    }
    let Some(content) = item.get("content") else {
        return Err(Invalid::missing("item.content"));
    };
    for (i, part) in array(content, "item.content")?.iter().enumerate() {
        let param = format!("item.content[{i}]");
        let part = object(part, &param)?;
        let prefix = format!("{param}.");
        only_fields(
            part,
            &["type", "text", "audio", "transcript", "image_url", "detail"],
            &prefix,
        )?;
        let Some(ty) = part.get("type") else {
            return Err(Invalid::missing(&format!("{prefix}type")));
        };
        let ty_param = format!("{prefix}type");
        one_of(
            ty,
            &ty_param,
            &[
                "input_text",
                "text",
                "output_text",
                "input_audio",
                "output_audio",
                "input_image",
            ],
        )?;
        if matches!(ty.as_str(), Some("input_text" | "text" | "output_text")) {
            let text_param = format!("{prefix}text");
            match part.get("text") {
                Some(text) => is_string(text, &text_param)?,
                None => return Err(Invalid::missing(&text_param)),
            }
        }
    }
    Ok(())
}

/// Checks a refer body: exactly `{"target_uri": "tel:+<E.164>" | "sip:<uri>"}`.
pub(crate) fn refer(body: &Value) -> Result<(), Invalid> {
    let refer = object(body, "body")?;
    only_fields(refer, &["target_uri"], "")?;
    let Some(target) = refer.get("target_uri") else {
        return Err(Invalid::missing("target_uri"));
    };
    let target = string(target, "target_uri")?;
    if is_tel_uri(target) || is_sip_uri(target) {
        Ok(())
    } else {
        Err(Invalid::value(
            "target_uri",
            format!(
                "Invalid value: '{target}'. Expected 'tel:+<E.164 number>' or 'sip:<user>@<host>'."
            ),
        ))
    }
}

fn is_tel_uri(uri: &str) -> bool {
    uri.strip_prefix("tel:+").is_some_and(|digits| {
        (2..=15).contains(&digits.len())
            && digits.bytes().all(|b| b.is_ascii_digit())
            && !digits.starts_with('0')
    })
}

fn is_sip_uri(uri: &str) -> bool {
    uri.strip_prefix("sip:").is_some_and(|rest| {
        !rest.is_empty() && !rest.starts_with('@') && !rest.contains(char::is_whitespace)
    })
}

/// Checks a reject body: empty, or `{"status_code": <SIP final status 400-699>}`.
pub(crate) fn reject(body: &Value) -> Result<(), Invalid> {
    if body.is_null() {
        return Ok(());
    }
    let reject = object(body, "body")?;
    only_fields(reject, &["status_code"], "")?;
    optional(reject, "status_code", "", |value, param| {
        match value.as_u64() {
            Some(400..=699) => Ok(()),
            Some(code) => Err(Invalid::value(
                param,
                format!("Invalid value: {code}. Expected a SIP status code between 400 and 699."),
            )),
            None => Err(Invalid::wrong_type(param, "an integer", value)),
        }
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// One line per case: the body, and the error code and param expected (`None` = valid).
    fn check_session(cases: &[(Value, Option<(&str, &str)>)]) {
        for (body, expected) in cases {
            let got = session(body, "", None)
                .err()
                .map(|e| (e.code, e.param.unwrap_or_default()));
            let expected = expected.map(|(code, param)| (code, param.to_owned()));
            assert_eq!(got, expected, "body: {body}");
        }
    }

    #[test]
    fn accept_bodies() {
        let weather = json!({"type": "function", "name": "get_weather", "parameters": {"type": "object", "properties": {}}});
        let crm = json!({"type": "mcp", "server_label": "crm", "server_url": "https://crm.example/mcp", "allowed_tools": ["lookup"], "require_approval": "never", "headers": {"Authorization": "Bearer x"}});
        check_session(&[
            (
                json!({"type": "realtime", "model": "gpt-realtime", "instructions": "Hi", "audio": {"output": {"voice": "marin"}}, "tools": [weather, crm], "tool_choice": "auto"}),
                None,
            ),
            (
                json!({"type": "realtime", "tools": [weather], "tool_choice": {"type": "function", "name": "get_weather"}}),
                None,
            ),
            (
                json!({"type": "realtime", "tools": [crm], "tool_choice": {"type": "mcp", "server_label": "crm"}}),
                None,
            ),
            (
                json!({"type": "realtime", "max_output_tokens": "inf", "output_modalities": ["audio"]}),
                None,
            ),
            (
                json!({"model": "gpt-realtime"}),
                Some(("missing_required_parameter", "type")),
            ),
            (
                json!({"type": "transcription"}),
                Some(("invalid_value", "type")),
            ),
            (
                json!({"type": "realtime", "voice": "marin"}),
                Some(("unknown_parameter", "voice")),
            ),
            (
                json!({"type": "realtime", "tools": [{"type": "function", "name": "bad name"}]}),
                Some(("invalid_value", "tools[0].name")),
            ),
            (
                json!({"type": "realtime", "tools": [{"type": "function", "name": "a", "strict": true}]}),
                Some(("unknown_parameter", "tools[0].strict")),
            ),
            (
                json!({"type": "realtime", "tools": [{"type": "function", "name": "a", "parameters": "{}"}]}),
                Some(("invalid_type", "tools[0].parameters")),
            ),
            (
                json!({"type": "realtime", "tools": [weather, weather]}),
                Some(("invalid_value", "tools[1]")),
            ),
            (
                json!({"type": "realtime", "tools": [{"type": "mcp", "server_label": "crm"}]}),
                Some(("missing_required_parameter", "tools[0].server_url")),
            ),
            (
                json!({"type": "realtime", "tools": [weather], "tool_choice": {"type": "function", "name": "other"}}),
                Some(("invalid_value", "tool_choice.name")),
            ),
            (
                json!({"type": "realtime", "tool_choice": "sometimes"}),
                Some(("invalid_value", "tool_choice")),
            ),
            (
                json!({"type": "realtime", "max_output_tokens": 0}),
                Some(("invalid_value", "max_output_tokens")),
            ),
            (json!("realtime"), Some(("invalid_type", "body"))),
        ]);
    }

    #[test]
    fn session_update_checks_tool_choice_against_current_tools() {
        let tools = json!([{"type": "function", "name": "request_transfer"}]);
        let update = json!({"type": "realtime", "tool_choice": {"type": "function", "name": "request_transfer"}});
        assert_eq!(session(&update, "session.", Some(&tools)), Ok(()));
        let err = session(&update, "session.", None).err().map(|e| e.param);
        assert_eq!(err, Some(Some("session.tool_choice.name".to_owned())));
    }

    #[test]
    fn refer_and_reject_bodies() {
        assert_eq!(refer(&json!({"target_uri": "tel:+14155550123"})), Ok(()));
        assert_eq!(
            refer(&json!({"target_uri": "sip:agent@example.com"})),
            Ok(())
        );
        for bad in [
            json!({"target_uri": "+14155550123"}),
            json!({"target_uri": "tel:14155550123"}),
            json!({"target_uri": "sip:"}),
            json!({"target_uri": "tel:+1415", "extra": 1}),
            json!({}),
            Value::Null,
        ] {
            assert!(refer(&bad).is_err(), "{bad}");
        }
        assert_eq!(reject(&Value::Null), Ok(()));
        assert_eq!(reject(&json!({"status_code": 486})), Ok(()));
        assert!(reject(&json!({"status_code": 200})).is_err());
        assert!(reject(&json!({"reason": "busy"})).is_err());
    }

    #[test]
    fn message_items() {
        let ok = json!({"type": "message", "role": "system", "content": [{"type": "input_text", "text": "Be brief."}]});
        assert_eq!(message(ok.as_object().unwrap()), Ok(()));
        let bad = json!({"type": "message", "role": "tool", "content": []});
        assert!(message(bad.as_object().unwrap()).is_err());
        let no_text =
            json!({"type": "message", "role": "user", "content": [{"type": "input_text"}]});
        assert!(message(no_text.as_object().unwrap()).is_err());
    }
}
