//! The WebSocket events the door reads, and the client events it writes (GA shapes).

use serde::Deserialize;
use serde_json::{Value, json};

/// A server event, reduced to the fields the door acts on; everything else is ignored.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct ServerEvent {
    #[serde(rename = "type")]
    pub kind: String,
    pub response_id: Option<String>,
    pub item_id: Option<String>,
    pub call_id: Option<String>,
    pub name: Option<String>,
    pub arguments: Option<String>,
    pub item: Option<Item>,
    pub response: Option<Response>,
    pub error: Option<ErrorBody>,
    /// `input_audio_buffer.dtmf_event_received`: the keypad key the caller pressed.
    pub event: Option<String>,
}

impl ServerEvent {
    /// Reads one WebSocket text frame; any JSON object is an event (unknown fields and types are
    /// ignored), anything else is an error to log and skip.
    pub fn parse(text: &str) -> Result<ServerEvent, serde_json::Error> {
        serde_json::from_str(text)
    }
}

/// A conversation item; only function calls matter here.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct Item {
    pub id: Option<String>,
    #[serde(rename = "type")]
    pub kind: String,
    pub call_id: Option<String>,
    pub name: Option<String>,
    pub arguments: Option<String>,
}

/// A response as `response.created` / `response.done` carry it.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct Response {
    pub id: String,
    pub status: String,
    pub status_details: Option<StatusDetails>,
    pub output: Vec<Item>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct StatusDetails {
    pub reason: Option<String>,
}

/// The body of an `error` event.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct ErrorBody {
    #[serde(rename = "type")]
    pub kind: Option<String>,
    pub code: Option<String>,
    pub message: Option<String>,
    pub event_id: Option<String>,
}

/// What the model is told to be while an agent is active.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentProfile {
    pub instructions: String,
    /// The `tools` array of the session (function tools, or one `mcp` tool).
    pub tools: Value,
    pub tool_choice: Value,
    /// GPT-Live only: the backend model that calls the tools (`None`: the session's).
    pub backend_model: Option<String>,
    /// GPT-Live only: whether the backend may call several tools at once.
    pub parallel_tool_calls: bool,
}

impl AgentProfile {
    /// The session fields this agent sets (for `accept` and `session.update`).
    pub fn session(&self) -> Value {
        json!({
            "type": "realtime",
            "instructions": self.instructions,
            "tools": self.tools,
            "tool_choice": self.tool_choice,
        })
    }
}

pub fn session_update(session: Value) -> String {
    json!({"type": "session.update", "session": session}).to_string()
}

pub fn function_call_output(call_id: &str, output: &str) -> String {
    json!({"type": "conversation.item.create",
           "item": {"type": "function_call_output", "call_id": call_id, "output": output}})
    .to_string()
}

/// News for the model that is not the answer to a pending call (an async tool finished).
pub fn system_message(text: &str) -> String {
    json!({"type": "conversation.item.create",
           "item": {"type": "message", "role": "system",
                    "content": [{"type": "input_text", "text": text}]}})
    .to_string()
}

pub fn response_create() -> String {
    r#"{"type":"response.create"}"#.to_owned()
}

/// Cuts our response `id` short (a filler an answer is waiting behind); the API ends it with
/// `response.done` `cancelled`, or answers `response_cancel_not_active` if it already ended.
pub fn response_cancel(id: &str) -> String {
    json!({"type": "response.cancel", "response_id": id}).to_string()
}

/// A response that only says `text` (a slow tool's filler, or the goodbye): no tools.
pub fn say(text: &str) -> String {
    json!({"type": "response.create", "response": {
        "instructions": format!("Say this to the caller, in the conversation's language, and nothing else: \"{text}\""),
        "tool_choice": "none"}})
    .to_string()
}
