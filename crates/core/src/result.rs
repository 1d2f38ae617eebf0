//! What a finished tool run produced, and the JSON string the model receives.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::context::{Context, Write};
use crate::error::{ErrorCode, ToolError};

/// A finished run: its answer to the model and what the call must apply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    pub tool: String,
    /// `None` on success.
    pub error: Option<ToolError>,
    /// The last `respond` message.
    pub message: Option<String>,
    /// `result`: the data returned to the model.
    pub data: Map<String, Value>,
    /// Context writes to commit, in order (on failure, only `on_failure`'s own).
    pub writes: Vec<Write>,
    /// An agent to make active.
    pub handoff: Option<Handoff>,
    /// `log` actions and notable events, kept in the invocation record.
    pub logs: Vec<LogEntry>,
    /// The run's own copy of the context with its first writes applied, for a commit onto a
    /// context nothing else has changed since the run read it.
    #[serde(skip)]
    pub applied: Applied,
}

/// A run's own copy of the call's context, holding the run's first writes (those it read back
/// while it ran), and the context the run started from. A commit onto a context that is still
/// that one (no other tool committed meanwhile) starts from this copy and applies only the rest
/// of the writes; otherwise it applies them all to the context as it is.
///
/// A shortcut, not part of what the outcome says: it is neither serialised nor compared, and
/// an outcome without one (`Applied::default()`) commits the ordinary way.
#[derive(Debug, Clone, Default)]
pub struct Applied(Option<AppliedContext>);

#[derive(Debug, Clone)]
struct AppliedContext {
    base: Context,
    context: Context,
    holds: usize,
    size_bound: usize,
}

/// The run's copy, for a commit onto the context the run started from.
#[derive(Debug, Clone, Copy)]
pub struct Onto<'a> {
    /// The run's copy of the context.
    pub context: &'a Context,
    /// How many of the run's writes it holds; the rest are still to apply.
    pub holds: usize,
    /// At most how big (`Context::approx_size`) the copy is with the rest applied: a commit
    /// whose limit is at least this need not measure it.
    pub size_bound: usize,
}

impl Applied {
    /// `context` is `base` with the first `holds` of the run's writes applied; with the rest
    /// applied too, it is at most `size_bound` bytes.
    pub(crate) fn new(base: Context, context: Context, holds: usize, size_bound: usize) -> Self {
        Applied(Some(AppliedContext {
            base,
            context,
            holds,
            size_bound,
        }))
    }

    /// The run's copy, when `live` is still the context the run started from.
    pub fn onto(&self, live: &Context) -> Option<Onto<'_>> {
        self.0
            .as_ref()
            .filter(|a| a.base.same_as(live))
            .map(|a| Onto {
                context: &a.context,
                holds: a.holds,
                size_bound: a.size_bound,
            })
    }
}

impl PartialEq for Applied {
    /// Always equal: outcomes are compared by what they say, not by how they commit.
    fn eq(&self, _: &Applied) -> bool {
        true
    }
}

/// A `handoff` the run asked for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Handoff {
    pub agent: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// Severity of a log entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogLevel {
    Debug,
    Info,
    Warn,
    Error,
}

/// One `log` action or event of a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogEntry {
    pub level: LogLevel,
    pub message: String,
    /// JSON Pointer of the action that logged it (shared with the action).
    pub action: Arc<str>,
}

impl Outcome {
    /// An outcome that failed before any action ran (unknown tool, bad arguments, …).
    pub fn failed(tool: &str, error: ToolError) -> Self {
        Outcome {
            tool: tool.to_owned(),
            error: Some(error),
            message: None,
            data: Map::new(),
            writes: Vec::new(),
            handoff: None,
            logs: Vec::new(),
            applied: Applied::default(),
        }
    }

    pub fn ok(&self) -> bool {
        self.error.is_none()
    }

    /// The error code, if it failed.
    pub fn code(&self) -> Option<ErrorCode> {
        self.error.as_ref().map(|e| e.code)
    }

    /// The envelope the model receives, as the JSON text it is sent as: the same as
    /// `output().to_string()`, written straight from the outcome without building the value.
    pub fn output_json(&self) -> String {
        let envelope = match &self.error {
            None => Envelope::Ok {
                ok: true,
                message: self.message.as_deref(),
                data: &self.data,
            },
            Some(e) => Envelope::Failed {
                ok: false,
                error: e.code,
                tool: &self.tool,
                message: self.failure_message(e),
                details: e.details.as_ref(),
            },
        };
        // Every part is a string, a code, a map with string keys or a JSON value: it serialises.
        serde_json::to_string(&envelope).unwrap_or_else(|_| self.output().to_string())
    }

    /// The message of a failed run's envelope (see [`Outcome::output`]).
    fn failure_message<'a>(&'a self, e: &'a ToolError) -> &'a str {
        match (&self.message, e.code) {
            (Some(m), code) if code != ErrorCode::ValidationFailed => m,
            _ => &e.message,
        }
    }

    /// The envelope the model receives.
    ///
    /// On failure the message is `on_failure`'s `respond` when it has one, since the tool's
    /// author wrote it for the caller; a `validate` rule's own message wins over it, as it says
    /// exactly what to ask the caller for.
    pub fn output(&self) -> Value {
        match &self.error {
            None => {
                let mut out = json!({"ok": true});
                if let Some(m) = &self.message {
                    out["message"] = json!(m);
                }
                out["data"] = Value::Object(self.data.clone());
                out
            }
            Some(e) => {
                let message = self.failure_message(e);
                let mut out =
                    json!({"ok": false, "error": e.code, "tool": self.tool, "message": message});
                if let Some(d) = &e.details {
                    out["details"] = d.clone();
                }
                out
            }
        }
    }
}

/// The envelope's fields, in the order the model reads them, borrowed from the outcome.
#[derive(Serialize)]
#[serde(untagged)]
enum Envelope<'a> {
    Ok {
        ok: bool,
        #[serde(skip_serializing_if = "Option::is_none")]
        message: Option<&'a str>,
        data: &'a Map<String, Value>,
    },
    Failed {
        ok: bool,
        error: ErrorCode,
        tool: &'a str,
        message: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        details: Option<&'a Value>,
    },
}

/// One function call's answer, as it is delivered to the model (seed 001's `ToolResult`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolResult {
    pub function_call_id: String,
    pub ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorCode>,
    /// The JSON string the model reads.
    pub output: String,
}

impl ToolResult {
    /// The result of a finished run.
    pub fn from_outcome(function_call_id: &str, outcome: &Outcome) -> Self {
        ToolResult {
            function_call_id: function_call_id.to_owned(),
            ok: outcome.ok(),
            error: outcome.code(),
            output: outcome.output_json(),
        }
    }

    /// A failure that never reached the interpreter.
    pub fn failure(function_call_id: &str, tool: &str, error: ToolError) -> Self {
        Self::from_outcome(function_call_id, &Outcome::failed(tool, error))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// The text written straight from an outcome is the envelope's own JSON, field for field
    /// and in order, whatever the outcome holds.
    #[test]
    fn output_text_is_the_envelope() {
        let mut data = Map::new();
        data.insert("total".into(), json!(30));
        data.insert("quote\"d".into(), json!(["a\nb", {"x": null}]));
        let ok = Outcome {
            tool: "t".into(),
            error: None,
            message: Some("Booked \"it\" ✓".into()),
            data,
            writes: Vec::new(),
            handoff: None,
            logs: Vec::new(),
            applied: Applied::default(),
        };
        let silent = Outcome {
            message: None,
            data: Map::new(),
            ..ok.clone()
        };
        let failed = Outcome {
            message: Some("Sorry.".into()),
            ..Outcome::failed(
                "t",
                ToolError::new(ErrorCode::ToolExecutionFailed, "it broke")
                    .with_details(json!({"path": "workflow.x"})),
            )
        };
        let invalid = Outcome {
            message: Some("Sorry.".into()),
            ..Outcome::failed(
                "t",
                ToolError::new(ErrorCode::ValidationFailed, "Ask which dishes."),
            )
        };
        for o in [&ok, &silent, &failed, &invalid] {
            assert_eq!(o.output_json(), o.output().to_string());
        }
        assert_eq!(
            silent.output_json(),
            r#"{"ok":true,"data":{}}"#,
            "no message, no field"
        );
        assert_eq!(
            invalid.output_json(),
            r#"{"ok":false,"error":"validation_failed","tool":"t","message":"Ask which dishes."}"#
        );
        assert_eq!(
            ToolResult::from_outcome("fc", &failed).output,
            failed.output().to_string()
        );
    }
}
