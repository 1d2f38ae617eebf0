//! A function call from the model, the answer delivered for it, and the record kept of it.

use serde::{Deserialize, Serialize};
use switchboard_core::result::{Handoff, LogEntry};
use switchboard_core::{ErrorCode, ToolResult};

use crate::BoxFuture;
use crate::replay::RunTrace;

/// One function call from the model (seed 001's `ToolInvocation`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Invocation {
    pub call_id: String,
    /// The model's id for this call; every answer is keyed by it.
    pub function_call_id: String,
    pub name: String,
    pub arguments_json: String,
    /// The model response that asked for it: the unit of barge-in cancellation.
    #[serde(default)]
    pub response_id: Option<String>,
    #[serde(default)]
    pub item_id: Option<String>,
}

/// One answer for one function call, with what the door must do around it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Delivery {
    pub result: ToolResult,
    pub tool: String,
    pub response_id: Option<String>,
    /// The response that asked for it was interrupted: the door must not ask the model for a
    /// new response because of this answer.
    pub interrupted: bool,
    /// An async tool finished: its outcome is news to add to the conversation, not the answer
    /// to a pending call (that was "started").
    pub async_completion: bool,
    /// The agent that became active because of this call; the door updates the model's
    /// instructions and tools before sending the answer.
    pub handoff: Option<Handoff>,
    /// Set when this answer repeats an earlier identical write's.
    pub duplicate_of: Option<String>,
    /// Transfers and hang-ups the client must carry out (when Switchboard does not control the
    /// call itself).
    pub actions: Vec<crate::effects::CallAction>,
}

/// Where answers go: the Realtime WebSocket, an HTTP reply, an MCP reply.
pub trait OutputSink: Send + Sync {
    /// Delivers one answer. Called exactly once per function call.
    fn deliver(&self, delivery: Delivery) -> BoxFuture<'_, ()>;

    /// This node no longer owns the call (another node took it over and fenced this one off):
    /// the function calls still running here will be answered by the new owner, not through
    /// this sink. Called once, after which the session stops.
    fn released(&self) {}

    /// The call's active agent became `agent` through a function call this sink did not
    /// deliver itself (another door answered it): a door that keeps the model's instructions and
    /// tools in step with the active agent updates them now.
    fn handed_off(&self, agent: &str) {
        let _ = agent;
    }

    /// A function call of the call was answered to another client (an MCP request on a phone
    /// call), not through this sink: a door waiting for that answer (its transfer or hang-up
    /// is under way) waits no more.
    fn answered_elsewhere(&self, function_call_id: &str) {
        let _ = function_call_id;
    }
}

/// What the call keeps of one invocation: what was asked (secrets redacted) and how it ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InvocationRecord {
    pub function_call_id: String,
    pub tool: String,
    /// The arguments as sent, with secret values replaced by `[redacted]`.
    pub arguments: String,
    pub ok: bool,
    pub error: Option<ErrorCode>,
    /// The answer the model got (secrets redacted), so a repeated request can be answered again.
    #[serde(default)]
    pub output: String,
    pub latency_ms: f64,
    pub started_at: String,
    pub finished_at: String,
    pub response_id: Option<String>,
    pub interrupted: bool,
    pub duplicate_of: Option<String>,
    #[serde(default)]
    pub logs: Vec<LogEntry>,
    /// What replaying it needs (redacted as the rest of the record); absent for a duplicate, a
    /// run resumed after a restart, or a trace over the record's field bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<Box<RunTrace>>,
    /// The size of the trace that was not kept because it was over the field bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_bytes: Option<usize>,
    /// What the adaptive policy decided for its run (expected latency, turn budget, filler,
    /// background, deadline); absent for a run that never reached it (answered before it
    /// started, or resumed at an effect).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<Box<crate::adaptive::Policy>>,
}
