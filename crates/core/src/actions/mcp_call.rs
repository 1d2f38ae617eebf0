//! `mcp.call`: call a tool on a registered MCP server (an effect).

use serde_json::{Value, json};

use super::{Exec, Flow, ParseCx};
use crate::context::WritePath;
use crate::effect::{EffectOutcome, EffectRequest, McpRequest};
use crate::error::{ErrorCode, ToolError};
use crate::reader::Obj;
use crate::template::ValueTemplate;

pub(crate) const FIELDS: &[&str] = &["type", "server", "tool", "arguments", "into"];

#[derive(Debug)]
pub(crate) struct McpCall {
    server: String,
    tool: String,
    arguments: ValueTemplate,
    into: Option<WritePath>,
}

pub(crate) fn parse(cx: &mut ParseCx<'_>, obj: &Obj<'_>, _depth: usize) -> Option<McpCall> {
    let server = obj.req_str("server", cx.sink);
    let tool = obj.req_str("tool", cx.sink);
    let arguments = match obj.get("arguments") {
        // A string is one template that must render to an object, e.g. `"{{params}}"` (how MCP
        // tools pass the model's arguments through unchanged).
        Some(v @ (Value::Object(_) | Value::String(_))) => {
            cx.value_template(v, &obj.at("arguments"))
        }
        Some(_) => {
            cx.sink.error_fix(
                &obj.at("arguments"),
                "`arguments` must be an object (or one template that renders to an object)",
                "write `{\"name\": \"{{params.name}}\"}` or `\"{{params}}\"`",
            );
            ValueTemplate::Literal(json!({}))
        }
        None => ValueTemplate::Literal(json!({})),
    };
    let into = obj
        .str("into", cx.sink)
        .and_then(|p| cx.write_path(p, &obj.at("into")));
    Some(McpCall {
        server: server?.to_owned(),
        tool: tool?.to_owned(),
        arguments,
        into,
    })
}

impl McpCall {
    pub(crate) fn run(&self, x: &mut Exec<'_>) -> Flow {
        match x.eval(&self.arguments) {
            Ok(arguments) if !arguments.is_object() => Flow::Fail(ToolError::new(
                ErrorCode::ToolExecutionFailed,
                format!(
                    "mcp.call `{}` on `{}`: `arguments` rendered to {}, not an object; fix the tool's `arguments` template",
                    self.tool,
                    self.server,
                    kind(&arguments)
                ),
            )),
            Ok(arguments) => Flow::Suspend(EffectRequest::Mcp(McpRequest {
                server: self.server.clone(),
                tool: self.tool.clone(),
                arguments,
                idempotency_key: x.idempotency_key(),
                max_json_depth: x.tool.limits.json_depth(),
            })),
            Err(e) => Flow::Fail(e),
        }
    }

    pub(crate) fn resume(&self, x: &mut Exec<'_>, outcome: EffectOutcome) -> Flow {
        match outcome {
            EffectOutcome::Done { value } => x.keep_result(value, self.into.as_ref()),
            EffectOutcome::Failed(e) => Flow::Fail(e),
            EffectOutcome::Http(_) => {
                Flow::Fail(x.internal("an mcp.call was resumed with an HTTP outcome".to_owned()))
            }
        }
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
