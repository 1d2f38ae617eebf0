//! Tenants' MCP servers as tool sources.
//!
//! An agent attaches an MCP server's tool with a tool entry named `"<label>/<tool>"`. The model
//! sees it under the MCP tool's own name, or as `<label>_<tool>` when that name is taken on the
//! agent (by one of its own tools, the transfer tool, or a tool of the same name on another
//! attached server: then every one of them is aliased, so the result does not depend on order).
//! Each becomes a synthesized declarative tool: the MCP tool's `inputSchema` as its parameters
//! and one `mcp.call` action passing the arguments through; `read` when the server marks the
//! tool `readOnlyHint`, else `write`.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use secrecy::SecretString;
use serde_json::{Value, json};
use switchboard_core::{Limits, Tool};
use switchboard_runtime::BoxFuture;
use switchboard_runtime::mcp::{McpServerSource, McpServerSpec, McpToolInfo, McpTransportSpec};
use switchboard_store::{McpServerConfig, Store};

use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

/// The store as the client pool's source of server registrations.
#[derive(Debug)]
pub struct StoreSource(pub Store);

impl McpServerSource for StoreSource {
    fn server<'a>(
        &'a self,
        tenant_id: &'a str,
        label: &'a str,
    ) -> BoxFuture<'a, Result<Option<McpServerSpec>, String>> {
        Box::pin(async move {
            let found = self
                .0
                .mcp_server_config(tenant_id, label)
                .await
                .map_err(|e| e.to_string())?;
            Ok(found.map(|(config, revision)| spec(label, config, revision)))
        })
    }
}

fn secrets(map: BTreeMap<String, String>) -> Vec<(String, SecretString)> {
    map.into_iter()
        .map(|(k, v)| (k, SecretString::from(v)))
        .collect()
}

fn spec(label: &str, config: McpServerConfig, revision: i64) -> McpServerSpec {
    let transport = match config {
        McpServerConfig::Http { url, headers } => McpTransportSpec::Http {
            url,
            headers: secrets(headers),
        },
        McpServerConfig::Stdio { command, args, env } => McpTransportSpec::Stdio {
            command,
            args,
            env: secrets(env),
        },
    };
    McpServerSpec {
        label: label.to_owned(),
        transport,
        revision: revision.to_string(),
    }
}

/// Splits an agent tool entry `"<label>/<tool>"` into its server label and MCP tool name.
pub fn split_ref(entry: &str) -> Option<(&str, &str)> {
    entry
        .split_once('/')
        .filter(|(label, tool)| !label.is_empty() && !tool.is_empty())
}

/// A server's tools: the pool's (cached until the server announces a change, then listed
/// again and kept in the database), or the database's last list when the server cannot be
/// reached now.
pub async fn server_tools(
    state: &AppState,
    tenant_id: &str,
    label: &str,
    refresh: bool,
) -> ApiResult<Arc<Vec<McpToolInfo>>> {
    let row = state
        .store
        .get_mcp_server(tenant_id, label)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("MCP server `{label}`")))?;
    match state
        .mcp
        .clients
        .list_tools(tenant_id, label, refresh)
        .await
    {
        Ok(tools) => {
            let listed = serde_json::to_value(&*tools).unwrap_or(Value::Null);
            if row.tools.as_ref() != Some(&listed) {
                state
                    .store
                    .set_mcp_server_tools(tenant_id, label, row.revision, &listed)
                    .await?;
            }
            Ok(tools)
        }
        Err(e) => match row
            .tools
            .and_then(|t| serde_json::from_value::<Vec<McpToolInfo>>(t).ok())
        {
            Some(kept) if !refresh => {
                tracing::warn!(name: "mcp_tools_from_database", server = %label, error = %e.message, "mcp_tools_from_database");
                Ok(Arc::new(kept))
            }
            _ => Err(ApiError::new(
                axum::http::StatusCode::BAD_GATEWAY,
                "upstream_unavailable",
                format!(
                    "could not list the tools of MCP server `{label}`: {}",
                    e.message
                ),
            )),
        },
    }
}

/// A name as models accept it (`^[a-zA-Z0-9_-]{1,64}$`): other characters become `_`.
fn function_name(raw: &str) -> String {
    raw.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect()
}

/// The declarative tool that calls one MCP tool, under `exposed`, and its definition (what a
/// call pins, so a node picking the call up offers the very same tool).
pub fn synthesize(
    label: &str,
    info: &McpToolInfo,
    exposed: &str,
    limits: &Limits,
) -> Result<(Tool, Value), String> {
    let description = info
        .description
        .clone()
        .or_else(|| info.title.clone())
        .unwrap_or_else(|| format!("{} (MCP server {label})", info.name));
    let schema = match &info.input_schema {
        Value::Object(m) if m.get("type").and_then(Value::as_str) == Some("object") => {
            info.input_schema.clone()
        }
        // An empty or typeless schema means: no arguments described.
        _ => json!({"type": "object", "properties": {}}),
    };
    let definition = json!({
        "name": exposed,
        "description": description,
        "parameters": schema,
        "side_effect": if info.read_only { "read" } else { "write" },
        "actions": [{"type": "mcp.call", "server": label, "tool": info.name, "arguments": "{{params}}", "into": "result"}],
    });
    let tool = Tool::parse(&definition, limits).map_err(|d| {
        format!(
            "MCP tool `{}` of server `{label}` cannot be offered: {d}",
            info.name
        )
    })?;
    Ok((tool, definition))
}

/// The MCP tools attached to one agent, named as the model sees them. `taken` holds the names
/// of the agent's other tools; each comes with its definition. A tool whose server cannot be
/// listed, or which the server does not have (any more), is left out with a warning: the call
/// goes on without it.
pub async fn agent_mcp_tools(
    state: &AppState,
    tenant_id: &str,
    agent: &str,
    entries: &[(String, bool)],
    taken: &HashSet<String>,
) -> Vec<(String, bool, Tool, Value)> {
    let mut found: Vec<(String, String, McpToolInfo, bool)> = Vec::new();
    let mut lists: HashMap<String, Option<Arc<Vec<McpToolInfo>>>> = HashMap::new();
    for (entry, enabled) in entries {
        let Some((label, tool)) = split_ref(entry) else {
            continue;
        };
        if !lists.contains_key(label) {
            let listed = server_tools(state, tenant_id, label, false).await;
            if let Err(e) = &listed {
                tracing::warn!(name: "mcp_tools_unavailable", agent = %agent, server = %label, error = %e.message, "mcp_tools_unavailable");
            }
            lists.insert(label.to_owned(), listed.ok());
        }
        match lists
            .get(label)
            .and_then(|l| l.as_ref())
            .and_then(|l| l.iter().find(|t| t.name == tool))
        {
            Some(info) => found.push((label.to_owned(), entry.clone(), info.clone(), *enabled)),
            None => {
                tracing::warn!(name: "mcp_tool_missing", agent = %agent, tool = %entry, "mcp_tool_missing");
            }
        }
    }
    let mut uses: HashMap<String, usize> = HashMap::new();
    for (_, _, info, _) in &found {
        *uses.entry(function_name(&info.name)).or_default() += 1;
    }
    let mut out = Vec::new();
    for (label, entry, info, enabled) in found {
        let own = function_name(&info.name);
        let exposed = if taken.contains(&own) || uses.get(&own).copied().unwrap_or(0) > 1 {
            function_name(&format!("{label}_{}", info.name))
        } else {
            own
        };
        if taken.contains(&exposed) {
            tracing::warn!(name: "mcp_tool_name_taken", agent = %agent, tool = %entry, name = %exposed, "mcp_tool_name_taken");
            continue;
        }
        match synthesize(&label, &info, &exposed, &state.config.limits) {
            Ok((tool, definition)) => out.push((exposed, enabled, tool, definition)),
            Err(e) => {
                tracing::warn!(name: "mcp_tool_unusable", agent = %agent, tool = %entry, error = %e, "mcp_tool_unusable");
            }
        }
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn info(name: &str, read_only: bool, schema: Value) -> McpToolInfo {
        McpToolInfo {
            name: name.to_owned(),
            title: None,
            description: Some("Adds".to_owned()),
            input_schema: schema,
            read_only,
        }
    }

    #[test]
    fn an_mcp_tool_becomes_a_declarative_tool() {
        let schema =
            json!({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]});
        let (tool, definition) = synthesize(
            "calc",
            &info("add", true, schema),
            "add",
            &Limits::default(),
        )
        .unwrap();
        // The definition is the tool: parsed again, it is the same function.
        let again = Tool::parse(&definition, &Limits::default()).unwrap();
        assert_eq!(again.function_def(false), tool.function_def(false));
        assert_eq!(tool.name(), "add");
        assert_eq!(tool.side_effect(), switchboard_core::SideEffect::Read);
        let def = tool.function_def(false);
        assert_eq!(def.parameters["required"], json!(["a"]));
        let (write, _) = synthesize(
            "calc",
            &info("add", false, json!({})),
            "calc_add",
            &Limits::default(),
        )
        .unwrap();
        assert_eq!(write.side_effect(), switchboard_core::SideEffect::Write);
        assert_eq!(write.function_def(false).parameters["type"], "object");
    }

    #[test]
    fn entries_and_names() {
        assert_eq!(split_ref("calc/add"), Some(("calc", "add")));
        assert_eq!(split_ref("save_meal"), None);
        assert_eq!(split_ref("/add"), None);
        assert_eq!(function_name("files.read"), "files_read");
    }
}
