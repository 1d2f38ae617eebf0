//! Effects: what the pure interpreter asks the outside world to do, and what came back.
//!
//! The interpreter never performs I/O. When an action needs the world (an HTTP request, a SIP
//! REFER, an MCP call, hanging up), the run suspends with an [`EffectRequest`]; the runtime
//! performs it and resumes the run with an [`EffectOutcome`].

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::ToolError;

/// A request from the core to the outside world.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum EffectRequest {
    Http(HttpRequest),
    Transfer(TransferRequest),
    EndCall(EndCallRequest),
    Mcp(McpRequest),
    /// `email.send`, `calendar.*`, `memory.*`: for the toolkit's handler.
    Toolkit(ToolkitRequest),
}

impl EffectRequest {
    /// Whether performing the request changes something outside (anything but GET/HEAD).
    pub fn is_write(&self) -> bool {
        match self {
            EffectRequest::Http(h) => !matches!(h.method.as_str(), "GET" | "HEAD"),
            EffectRequest::Transfer(_) | EffectRequest::EndCall(_) | EffectRequest::Mcp(_) => true,
            EffectRequest::Toolkit(t) => crate::actions::toolkit_is_write(&t.action),
        }
    }

    /// Whether the request ends or moves the call (held until its response completes).
    pub fn is_terminal(&self) -> bool {
        matches!(self, EffectRequest::Transfer(_) | EffectRequest::EndCall(_))
    }
}

/// An HTTP request of an `api_call` action, fully rendered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HttpRequest {
    pub method: String,
    pub url: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub query: Vec<(String, String)>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub headers: Vec<(String, String)>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<Value>,
    /// Per-try timeout.
    pub timeout_ms: u64,
    /// Retries after the first try (connect errors, timeouts, 408/425/429/5xx).
    pub retry_count: u32,
    /// First retry delay; doubles on each further retry.
    pub retry_delay_ms: u64,
    /// Sent as `Idempotency-Key` on every try: `{call_id}-{function_call_id}-{action index}`.
    pub idempotency_key: String,
    /// Add Standard Webhooks signature headers made with the tenant's signing secret.
    #[serde(default)]
    pub sign: bool,
    /// Largest response body accepted.
    pub max_body_bytes: usize,
    /// How deep a JSON response body may nest (`Limits::max_json_depth`).
    #[serde(default = "default_json_depth")]
    pub max_json_depth: usize,
}

fn default_json_depth() -> usize {
    crate::limits::Limits::default().json_depth()
}

/// A SIP REFER of the call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TransferRequest {
    /// `sip:`/`sips:`/`tel:` URI; bare E.164 numbers are already turned into `tel:` URIs.
    pub target_uri: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destination_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// `{call_id}-transfer-{target_uri}`: at most one REFER per call and target.
    pub idempotency_key: String,
}

/// Say goodbye, then hang up.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EndCallRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// A `tools/call` on a registered MCP server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct McpRequest {
    pub server: String,
    pub tool: String,
    pub arguments: Value,
    pub idempotency_key: String,
    /// How deep the tool's result may nest (`Limits::max_json_depth`).
    #[serde(default = "default_json_depth")]
    pub max_json_depth: usize,
}

/// A toolkit action's rendered fields (`to`, `subject`, `body` for `email.send`, …).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolkitRequest {
    /// The action type, e.g. `email.send` or `calendar.create_event`.
    pub action: String,
    pub fields: Map<String, Value>,
    /// `{call_id}-{function_call_id}-{action index}`, for handlers that can deduplicate.
    pub idempotency_key: String,
}

/// What an effect produced.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum EffectOutcome {
    /// The final HTTP response, after any retries, whatever its status.
    Http(HttpResponse),
    /// The effect was performed; an MCP call carries its result here.
    Done {
        #[serde(default)]
        value: Value,
    },
    /// The effect could not be performed (connection refused, timeout, open breaker, REFER
    /// rejected); the code says which.
    Failed(ToolError),
}

/// An HTTP response as later actions see it in `response`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HttpResponse {
    pub status: u16,
    #[serde(default)]
    pub headers: Map<String, Value>,
    /// Parsed JSON when the body is JSON, else the text.
    #[serde(default)]
    pub body: Value,
}
