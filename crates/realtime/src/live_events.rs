//! GPT-Live's sideband events: the server events the Live door reads (the backend model's
//! stream arrives nested in `response.event`), the client events it writes, and the accept
//! body. Every client event carries only fields of the published schema: OpenAI refuses
//! unknown ones.

use serde::Deserialize;
use serde_json::{Value, json};

use crate::events::AgentProfile;

/// A sideband server event, reduced to what the door acts on.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct LiveEvent {
    #[serde(rename = "type")]
    pub kind: String,
    /// `response.event`: the delegation the nested backend event belongs to (may be absent).
    pub delegation_id: Option<String>,
    /// `response.event`: the nested Responses streaming event; `transport.dtmf.received` (and
    /// `.sent`): the keypad keys, a string.
    pub event: Option<EventField>,
    /// `session.closed`: why.
    pub reason: Option<String>,
    /// `error`.
    pub error: Option<LiveError>,
    /// The `event_id` of the client event this answers, when it had one.
    pub client_event_id: Option<String>,
}

impl LiveEvent {
    /// Reads one text frame; unknown fields and types are ignored.
    pub fn parse(text: &str) -> Result<LiveEvent, serde_json::Error> {
        serde_json::from_str(text)
    }
}

/// The `event` field, whose type depends on the event's: an object nested in `response.event`,
/// the keys pressed in `transport.dtmf.*`. Read in one pass, without buffering the nested event.
#[derive(Debug)]
pub enum EventField {
    Backend(BackendEvent),
    Keys(String),
}

impl<'de> Deserialize<'de> for EventField {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Field;
        impl<'de> serde::de::Visitor<'de> for Field {
            type Value = EventField;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a nested event object or the keys pressed")
            }

            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<EventField, E> {
                Ok(EventField::Keys(v.to_owned()))
            }

            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> Result<EventField, A::Error> {
                BackendEvent::deserialize(serde::de::value::MapAccessDeserializer::new(map))
                    .map(EventField::Backend)
            }
        }
        d.deserialize_any(Field)
    }
}

/// A Responses streaming event as the backend model emits it.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct BackendEvent {
    #[serde(rename = "type")]
    pub kind: String,
    /// `response.output_item.done`: the finished output item.
    pub item: Option<BackendItem>,
    /// Lifecycle snapshots (`response.created`, `response.completed`, …): their `output` is
    /// cleared on the sideband, so only the id is read.
    pub response: Option<BackendResponse>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct BackendItem {
    pub id: Option<String>,
    #[serde(rename = "type")]
    pub kind: String,
    pub call_id: Option<String>,
    pub name: Option<String>,
    pub arguments: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct BackendResponse {
    pub id: Option<String>,
    pub status: Option<String>,
}

/// The `error` of an `error` event.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct LiveError {
    pub code: Option<String>,
    pub message: Option<String>,
    #[serde(rename = "type")]
    pub kind: Option<String>,
    pub param: Option<String>,
    pub client_event_id: Option<String>,
}

/// What a GPT-Live session is started with, beside the first agent's delegation.
#[derive(Debug, Clone, PartialEq)]
pub struct LiveStart {
    /// The GPT-Live model.
    pub model: String,
    /// The voice model's instructions (fixed for the session).
    pub voice_instructions: Option<String>,
    /// The voice (fixed for the session).
    pub voice: Option<String>,
}

/// The `session` object of `POST /live/sessions/{id}/accept`: the voice model's settings and
/// the agent's Responses delegation.
pub fn accept_session(start: &LiveStart, agent: &AgentProfile) -> Value {
    let mut session = json!({
        "type": "live",
        "model": start.model,
        "delegation": {"type": "responses", "responses": delegation(agent, true)},
    });
    if let Value::Object(m) = &mut session {
        if let Some(text) = start
            .voice_instructions
            .as_ref()
            .filter(|t| !t.trim().is_empty())
        {
            m.insert("instructions".into(), json!(text));
        }
        if let Some(voice) = &start.voice {
            m.insert("audio".into(), json!({"output": {"voice": voice}}));
        }
    }
    session
}

/// The Responses delegation config of an agent: the backend model, the agent's instructions,
/// its tools as function tools. `with_model` is false for a `session.update` that keeps the
/// backend model of the session.
pub fn delegation(agent: &AgentProfile, with_model: bool) -> Value {
    let mut responses = json!({
        "tools": function_tools(&agent.tools),
        "tool_choice": agent.tool_choice,
        "parallel_tool_calls": agent.parallel_tool_calls,
    });
    if let Value::Object(m) = &mut responses {
        if !agent.instructions.is_empty() {
            m.insert("instructions".into(), json!(agent.instructions));
        }
        if with_model || agent.backend_model.is_some() {
            m.insert(
                "model".into(),
                json!(
                    agent
                        .backend_model
                        .as_deref()
                        .unwrap_or(DEFAULT_BACKEND_MODEL)
                ),
            );
        }
    }
    responses
}

/// The backend model when neither the agent nor the tenant names one.
pub const DEFAULT_BACKEND_MODEL: &str = "gpt-5.2";

/// The function tools of a toolset with only the fields a Live function tool has
/// (`type`, `name`, `description`, `parameters`, `strict`); other tool types are left out.
fn function_tools(tools: &Value) -> Value {
    let list = tools.as_array().map(Vec::as_slice).unwrap_or_default();
    Value::Array(
        list.iter()
            .filter(|t| t.get("type").and_then(Value::as_str) == Some("function"))
            .map(|t| {
                let mut out = serde_json::Map::new();
                for key in ["type", "name", "description", "parameters", "strict"] {
                    if let Some(v) = t.get(key).filter(|v| !v.is_null()) {
                        out.insert(key.into(), v.clone());
                    }
                }
                Value::Object(out)
            })
            .collect(),
    )
}

/// A handoff: the new agent's tools and backend instructions for the next delegations.
pub fn session_update(agent: &AgentProfile) -> String {
    json!({"type": "session.update", "session": {"delegation": {
        "type": "responses", "responses": delegation(agent, false)}}})
    .to_string()
}

/// A function call's result for the backend, tagged so an error can name it.
pub fn function_call_output(event_id: &str, call_id: &str, output: &str) -> String {
    json!({"type": "response.item.create", "event_id": event_id,
           "item": {"type": "function_call_output", "call_id": call_id, "output": output}})
    .to_string()
}

/// Continues the backend once every call of its turn is answered.
pub fn response_create() -> String {
    r#"{"type":"response.create"}"#.to_owned()
}

/// Context for the voice model to say in its own words (filler speech, the goodbye, an async
/// tool's news). Responses delegation takes only session-wide commentary (`delegation_id`
/// null). `text` is cut to what the 500-token cap allows.
pub fn commentary(event_id: &str, text: &str) -> String {
    json!({"type": "session.commentary.append", "event_id": event_id,
           "content": cut(text, MAX_COMMENTARY_BYTES, ""), "delegation_id": null})
    .to_string()
}

/// Commentary is capped at 500 tokens; 1,500 bytes stays under it for any language.
pub const MAX_COMMENTARY_BYTES: usize = 1_500;

/// `text` cut to at most `max` bytes on a character boundary, `marker` appended when cut.
pub fn cut(text: &str, max: usize, marker: &str) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max.saturating_sub(marker.len());
    while end > 0 && !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}{marker}", &text[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agent() -> AgentProfile {
        AgentProfile {
            instructions: "Book tables.".into(),
            tools: json!([
                {"type": "function", "name": "book", "description": "Books", "parameters": {"type": "object"}, "x-extra": 1},
                {"type": "mcp", "server_label": "s"}
            ]),
            tool_choice: json!("auto"),
            backend_model: Some("gpt-5.2-mini".into()),
            parallel_tool_calls: true,
        }
    }

    /// `event` is a nested event in `response.event` and the keys pressed in
    /// `transport.dtmf.received` (the SDK's `TransportDtmfReceived`): both read.
    #[test]
    fn the_event_field_is_read_in_either_shape() {
        let dtmf = LiveEvent::parse(
            r#"{"type": "transport.dtmf.received", "event": "42#", "event_id": "ev_1"}"#,
        )
        .unwrap();
        assert!(matches!(dtmf.event, Some(EventField::Keys(k)) if k == "42#"));
        let nested = LiveEvent::parse(
            r#"{"type": "response.event", "delegation_id": "d1", "event": {"type": "response.output_item.done",
                "item": {"type": "function_call", "call_id": "c1", "name": "book", "arguments": "{}"}}}"#,
        )
        .unwrap();
        let Some(EventField::Backend(inner)) = nested.event else {
            panic!("a nested event: {nested:?}");
        };
        assert_eq!(inner.item.and_then(|i| i.call_id).as_deref(), Some("c1"));
        assert!(LiveEvent::parse(r#"{"type": "x", "event": 3}"#).is_err());
    }

    #[test]
    fn the_accept_session_holds_only_schema_fields() {
        let start = LiveStart {
            model: "gpt-live-1".into(),
            voice_instructions: Some("Be warm.".into()),
            voice: Some("marin".into()),
        };
        let s = accept_session(&start, &agent());
        assert_eq!(
            s,
            json!({"type": "live", "model": "gpt-live-1", "instructions": "Be warm.",
                   "audio": {"output": {"voice": "marin"}},
                   "delegation": {"type": "responses", "responses": {
                       "model": "gpt-5.2-mini", "instructions": "Book tables.",
                       "tools": [{"type": "function", "name": "book", "description": "Books", "parameters": {"type": "object"}}],
                       "tool_choice": "auto", "parallel_tool_calls": true}}})
        );
        let bare = LiveStart {
            model: "gpt-live-1".into(),
            voice_instructions: Some("  ".into()),
            voice: None,
        };
        let s = accept_session(&bare, &agent());
        assert!(s.get("instructions").is_none() && s.get("audio").is_none());
    }

    #[test]
    fn cutting_keeps_characters_whole_and_marks_the_cut() {
        assert_eq!(cut("short", 10, "[cut]"), "short");
        let out = cut("ééééé", 8, "…");
        assert!(out.len() <= 8 && out.ends_with('…'), "{out}");
        assert_eq!(cut("abcdef", 2, "[cut]"), "[cut]");
    }
}
