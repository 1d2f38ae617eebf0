//! From stored configuration to what a call and a model need: compiled tools (cached per
//! immutable version in the bounded [`ToolCache`](crate::tool_cache::ToolCache)), an agent's
//! toolset, and a call's pinned `CallConfig`.

use std::collections::HashMap;
use std::sync::Arc;

use secrecy::ExposeSecret;
use serde_json::{Value, json};
use switchboard_core::builder::{Format, ToolChoice, Toolset};
use switchboard_core::toolkits;
use switchboard_core::transfer::{ReferConfig, request_transfer_tool};
use switchboard_core::{FunctionDef, Tool};
use switchboard_runtime::{CallConfig, ToolEntry};
use switchboard_store::ToolVersion;

use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

/// The name of the tenant secret used to sign `api_call`s with `sign: true`.
pub const SIGNING_SECRET: &str = "signing_secret";

/// Compiles a stored tool version, once.
pub fn compile(state: &AppState, tenant: &str, v: &ToolVersion) -> ApiResult<Arc<Tool>> {
    if let Some(t) = state.tools.get(tenant, &v.name, v.version) {
        return Ok(t);
    }
    let tool = Tool::parse(&v.definition, &state.config.limits).map_err(|d| {
        ApiError::internal(format!(
            "stored tool `{}` version {} no longer parses: {d}",
            v.name, v.version
        ))
    })?;
    let tool = Arc::new(tool);
    state
        .tools
        .put(tenant, &v.name, v.version, Arc::clone(&tool));
    Ok(tool)
}

/// Every toolkit action as a compiled tool, made once per server (they depend only on the
/// catalogue and the limits).
#[derive(Debug, Default)]
pub struct ToolkitTools(HashMap<(&'static str, &'static str), Arc<Tool>>);

impl ToolkitTools {
    pub fn new(limits: &switchboard_core::Limits) -> Self {
        let mut map = HashMap::new();
        for kit in toolkits::catalogue() {
            for a in &kit.actions {
                match kit.tool(a, limits) {
                    Ok(t) => {
                        map.insert((kit.name, a.name), Arc::new(t));
                    }
                    // Only limits far below the defaults can refuse a catalogue tool.
                    Err(e) => {
                        tracing::error!(name: "toolkit_tool_refused", error = %e, "toolkit_tool_refused")
                    }
                }
            }
        }
        ToolkitTools(map)
    }

    /// The compiled tool of a `memory` toolkit action, to recognise it on an agent.
    pub(crate) fn memory_tool(&self, action: &'static str) -> Option<&Arc<Tool>> {
        self.0.get(&("memory", action))
    }

    /// The longest `timeout` of a toolkit action named `action` (in any toolkit).
    pub(crate) fn longest_timeout_ms(&self, action: &str) -> Option<u64> {
        self.0
            .iter()
            .filter(|((_, a), _)| *a == action)
            .map(|(_, t)| t.timeout_ms())
            .max()
    }

    fn get(&self, kit: &str, action: &str) -> ApiResult<Arc<Tool>> {
        self.0.get(&(kit, action)).cloned().ok_or_else(|| {
            ApiError::internal(format!(
                "toolkit `{kit}`, action `{action}` does not fit this server's limits; raise them (serve --limits)"
            ))
        })
    }
}

/// The tenant's transfer configuration, when transfer is on.
pub async fn refer_config(state: &AppState, tenant: &str) -> ApiResult<Option<Arc<ReferConfig>>> {
    let t = state
        .store
        .get_tenant(tenant)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("tenant `{tenant}`")))?;
    match t.features.get("refer") {
        None | Some(Value::Null) => Ok(None),
        Some(r) => {
            let cfg = ReferConfig::parse(r).map_err(|p| {
                ApiError::internal(format!(
                    "stored features.refer no longer parses: {}",
                    p.len()
                ))
            })?;
            Ok(cfg.enabled.then(|| Arc::new(cfg)))
        }
    }
}

/// An OAuth2 toolkit's handler finds the agent's connection by the name the server puts in
/// its config (the toolkit's config schema has no such field, so no tenant sets it). Not in its
/// secrets: every secret string is redacted from what a call shows, and an agent's name is not
/// a secret.
fn connection_config(kit: &toolkits::Toolkit, agent: &str, config: Value) -> Value {
    if kit.auth_type != Some("oauth2") {
        return config;
    }
    let mut m = match config {
        Value::Object(m) => m,
        _ => serde_json::Map::new(),
    };
    m.insert(
        switchboard_toolkits::google::CONNECTION_KEY.to_owned(),
        serde_json::json!({"agent": agent}),
    );
    Value::Object(m)
}

/// One agent's tools as a call pins them, with config and secrets, each with its pin: a stored
/// tool's version, an MCP tool's definition (`{"mcp": …}`, as its server listed it), or 0 for
/// the built-in ones.
pub async fn agent_tools(
    state: &AppState,
    tenant: &str,
    agent: &str,
    refer: Option<&ReferConfig>,
) -> ApiResult<HashMap<String, (Value, ToolEntry)>> {
    let tools = state
        .store
        .agent_tools_with_secrets(tenant, agent)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("agent `{agent}`")))?;
    let mut out = HashMap::new();
    let mut mcp_entries = Vec::new();
    for t in tools {
        if let Some(name) = toolkits::split_ref(&t.tool) {
            // A toolkit this version does not know (stored by a newer one) offers nothing.
            let Some(kit) = toolkits::find(name) else {
                continue;
            };
            let config = Arc::new(connection_config(kit, agent, t.config));
            let secrets = Arc::new(t.sensitive_config);
            for a in kit.selected(t.actions.as_deref()) {
                let entry = ToolEntry {
                    tool: state.toolkit_tools.get(kit.name, a.name)?,
                    enabled: t.enabled,
                    config: Arc::clone(&config),
                    secrets: Arc::clone(&secrets),
                };
                out.entry(a.name.to_owned()).or_insert((json!(0), entry));
            }
            continue;
        }
        if crate::mcp::sources::split_ref(&t.tool).is_some() {
            mcp_entries.push((t.tool, t.enabled));
            continue;
        }
        let v = state
            .store
            .get_tool(tenant, &t.tool)
            .await?
            .ok_or_else(|| ApiError::bad_request(format!("agent `{agent}` uses tool `{}`, which does not exist any more; create it or remove it from the agent", t.tool)))?;
        let entry = ToolEntry {
            tool: compile(state, tenant, &v)?,
            enabled: t.enabled,
            config: Arc::new(t.config),
            secrets: Arc::new(t.sensitive_config),
        };
        out.insert(t.tool, (json!(v.version), entry));
    }
    if let Some(cfg) = refer
        && let Some(tool) = request_transfer_tool(cfg, &state.config.limits)
    {
        out.entry(tool.name().to_owned())
            .or_insert((json!(0), ToolEntry::new(Arc::new(tool))));
    }
    if !mcp_entries.is_empty() {
        // Named last: an MCP tool yields its name to the agent's own tools and the transfer tool.
        let taken = out.keys().cloned().collect();
        let attached =
            crate::mcp::sources::agent_mcp_tools(state, tenant, agent, &mcp_entries, &taken).await;
        for (name, enabled, tool, definition) in attached {
            let entry = ToolEntry {
                enabled,
                ..ToolEntry::new(Arc::new(tool))
            };
            out.insert(name, (json!({ "mcp": definition }), entry));
        }
    }
    Ok(out)
}

/// The functions a model sees for one agent, checked as a toolset (unique names, valid choice).
pub async fn agent_toolset(
    state: &AppState,
    tenant: &str,
    agent: &str,
    strict: bool,
    choice: Option<ToolChoice>,
) -> ApiResult<Toolset> {
    let refer = refer_config(state, tenant).await?;
    let tools = agent_tools(state, tenant, agent, refer.as_deref()).await?;
    let mut functions: Vec<Arc<FunctionDef>> = tools
        .values()
        .filter(|(_, e)| e.enabled)
        .map(|(_, e)| e.tool.function_def(strict))
        .collect();
    functions.sort_by(|a, b| a.name.cmp(&b.name));
    Toolset::build(functions, choice).map_err(|e| ApiError::bad_request(e.to_string()))
}

/// Everything a new call may use, pinned now: every agent's tools (for handoffs) and runaway
/// guards, the transfer config and the signing secret. Returns the config and the pinned versions to store.
pub async fn call_config(state: &AppState, tenant: &str) -> ApiResult<(CallConfig, Value)> {
    let refer = refer_config(state, tenant).await?;
    let mut config = CallConfig {
        tenant_id: tenant.to_owned(),
        refer: refer.clone(),
        latency: Arc::clone(&state.latency),
        ..CallConfig::default()
    };
    let mut pinned = serde_json::Map::new();
    let mut guards = serde_json::Map::new();
    let mut page = switchboard_store::Page::first(switchboard_store::Page::MAX_LIMIT);
    loop {
        let agents = state.store.list_agents(tenant, page.clone()).await?;
        for a in &agents.items {
            let tools = agent_tools(state, tenant, &a.name, refer.as_deref()).await?;
            pinned.insert(
                a.name.clone(),
                json!(
                    tools
                        .iter()
                        .map(|(n, (pin, _))| (n.clone(), pin.clone()))
                        .collect::<serde_json::Map<_, _>>()
                ),
            );
            config.agents.insert(
                a.name.clone(),
                tools.into_iter().map(|(n, (_, e))| (n, e)).collect(),
            );
            if let Some(ms) = a.turn_budget_ms {
                config.turn_budgets.insert(a.name.clone(), u64::from(ms));
            }
            if let Some(filler) = &a.filler {
                config.fillers.insert(a.name.clone(), filler.clone());
            }
            if let Some(g) = a.guards {
                config.guards.insert(a.name.clone(), g);
                guards.insert(a.name.clone(), json!(g));
            }
        }
        match agents.next {
            Some(next) => {
                page = switchboard_store::Page::after(switchboard_store::Page::MAX_LIMIT, next)
            }
            None => break,
        }
    }
    config.signing_secret = state
        .store
        .get_secret(tenant, SIGNING_SECRET)
        .await?
        .map(|s| s.expose_secret().to_owned().into());
    let pinned = json!({ "agents": pinned, "guards": guards });
    config.tool_versions = tool_versions(&pinned);
    Ok((config, pinned))
}

/// The stored tools' versions of a call's pins (`{"agents": {agent: {tool: version}}}`); the
/// built-in (0) and MCP (`{"mcp": …}`) pins have none.
pub(crate) fn tool_versions(pinned: &Value) -> HashMap<String, HashMap<String, i64>> {
    pinned
        .get("agents")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(agent, tools)| {
            let versions = tools
                .as_object()
                .into_iter()
                .flatten()
                .filter_map(|(name, pin)| Some((name.clone(), pin.as_i64().filter(|v| *v > 0)?)))
                .collect();
            (agent.clone(), versions)
        })
        .collect()
}

/// The toolset of one agent of a live call, in OpenAI Realtime format.
pub(crate) fn realtime_toolset(config: &CallConfig, agent: &str) -> Value {
    let mut functions: Vec<_> = config
        .tools(agent)
        .map(|t| {
            t.values()
                .filter(|e| e.enabled)
                .map(|e| e.tool.function_def(false))
                .collect()
        })
        .unwrap_or_default();
    functions.sort_by(|a, b| a.name.cmp(&b.name));
    Toolset::build(functions, None)
        .map(|t| t.render(Format::OpenAiRealtime))
        .unwrap_or_else(|e| json!({"error": e.to_string()}))
}
