//! Agents: instructions, enabled tools with config and sensitive config, handoff targets; and the
//! toolset a model sees for an agent, in each provider's format.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};
use switchboard_core::builder::{Format, ToolChoice};
use switchboard_store::{AgentDef, AgentToolDef};
use utoipa::{IntoParams, ToSchema};

use super::{PageOf, PageQuery};
use crate::auth::Tenant;
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::extract::{Body, Path, Query};
use crate::state::AppState;
use crate::toolset::{agent_toolset, refer_config};

/// An agent as written.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentBody {
    /// Optional; must match the URL when given.
    pub name: Option<String>,
    #[serde(default)]
    pub instructions: String,
    pub model: Option<String>,
    pub voice: Option<String>,
    #[serde(default)]
    pub tools: Vec<AgentToolBody>,
    /// Agents this one may hand the call to.
    #[serde(default)]
    pub handoffs: Vec<String>,
    /// The tenant's default agent (for calls that name none).
    #[serde(default)]
    pub default: bool,
}

/// One tool of an agent.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentToolBody {
    pub tool: String,
    #[serde(default = "yes")]
    pub enabled: bool,
    /// The `config` scope of the tool's templates.
    #[schema(value_type = Option<Object>)]
    pub config: Option<Value>,
    /// The `secrets` scope: sealed at rest, never returned. Absent keeps the stored value;
    /// `null` clears it.
    #[schema(value_type = Option<Object>)]
    #[serde(default, deserialize_with = "present")]
    pub sensitive_config: Option<Value>,
}

fn yes() -> bool {
    true
}

fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

/// An agent as stored: sensitive config shows only whether it is set.
#[derive(Debug, Serialize, ToSchema)]
pub struct AgentView {
    pub name: String,
    pub instructions: String,
    pub model: Option<String>,
    pub voice: Option<String>,
    pub tools: Vec<AgentToolView>,
    pub handoffs: Vec<String>,
    pub default: bool,
    pub created_at: String,
    pub updated_at: String,
}

/// One tool of an agent, as stored.
#[derive(Debug, Serialize, ToSchema)]
pub struct AgentToolView {
    pub tool: String,
    pub enabled: bool,
    #[schema(value_type = Object)]
    pub config: Value,
    pub sensitive_config_set: bool,
}

impl From<switchboard_store::Agent> for AgentView {
    fn from(a: switchboard_store::Agent) -> Self {
        AgentView {
            name: a.name,
            instructions: a.instructions,
            model: a.model,
            voice: a.voice,
            tools: a
                .tools
                .into_iter()
                .map(|t| AgentToolView {
                    tool: t.tool,
                    enabled: t.enabled,
                    config: t.config,
                    sensitive_config_set: t.sensitive_config_set,
                })
                .collect(),
            handoffs: a.handoffs,
            default: a.default,
            created_at: a.created_at,
            updated_at: a.updated_at,
        }
    }
}

#[utoipa::path(get, path = "/v1/agents", tag = "agents", security(("bearer" = [])), params(PageQuery),
    responses((status = 200, body = PageOf<AgentView>)))]
pub async fn list_agents(
    State(state): State<AppState>,
    tenant: Tenant,
    Query(q): Query<PageQuery>,
) -> ApiResult<Json<PageOf<AgentView>>> {
    Ok(Json(
        state.store.list_agents(&tenant.id, q.page()?).await?.into(),
    ))
}

#[utoipa::path(get, path = "/v1/agents/{name}", tag = "agents", security(("bearer" = [])),
    responses((status = 200, body = AgentView), (status = 404, body = ErrorBody)))]
pub async fn get_agent(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(name): Path<String>,
) -> ApiResult<Json<AgentView>> {
    let a = state
        .store
        .get_agent(&tenant.id, &name)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("agent `{name}`")))?;
    Ok(Json(a.into()))
}

#[utoipa::path(put, path = "/v1/agents/{name}", tag = "agents", security(("bearer" = [])), request_body = AgentBody,
    responses((status = 200, body = AgentView), (status = 400, body = ErrorBody)))]
pub async fn put_agent(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(name): Path<String>,
    Body(body): Body<AgentBody>,
) -> ApiResult<Json<AgentView>> {
    if body.name.as_deref().is_some_and(|n| n != name) {
        return Err(ApiError::bad_request(format!(
            "the body's name differs from `{name}` in the URL"
        )));
    }
    let transfer_on = refer_config(&state, &tenant.id).await?.is_some();
    let mut missing = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for t in &body.tools {
        if !seen.insert(t.tool.as_str()) {
            return Err(ApiError::bad_request(format!(
                "tool `{}` is listed twice; list each tool once",
                t.tool
            )));
        }
        if transfer_on && t.tool == switchboard_core::transfer::REQUEST_TRANSFER {
            return Err(ApiError::bad_request(
                "`request_transfer` is the transfer toolkit's tool, which every agent has while transfer is on; rename your tool",
            ));
        }
        if let Some((label, tool)) = crate::mcp::sources::split_ref(&t.tool) {
            check_mcp_tool(&state, &tenant.id, label, tool).await?;
        } else if state.store.get_tool(&tenant.id, &t.tool).await?.is_none() {
            missing.push(t.tool.clone());
        }
        if let Some(v) = &t.sensitive_config
            && !(v.is_object() || v.is_null())
        {
            return Err(ApiError::bad_request(format!(
                "sensitive_config of `{}` must be an object (or null to clear it)",
                t.tool
            )));
        }
        if t.config.as_ref().is_some_and(|c| !c.is_object()) {
            return Err(ApiError::bad_request(format!(
                "config of `{}` must be an object",
                t.tool
            )));
        }
    }
    if !missing.is_empty() {
        return Err(ApiError::bad_request(format!(
            "these tools do not exist: {}; create them first (POST /v1/tools)",
            missing.join(", ")
        )));
    }
    let def = AgentDef {
        name: name.clone(),
        instructions: body.instructions,
        model: body.model,
        voice: body.voice,
        tools: body
            .tools
            .into_iter()
            .map(|t| AgentToolDef {
                tool: t.tool,
                enabled: t.enabled,
                config: t.config.unwrap_or_else(|| Value::Object(Map::new())),
                sensitive_config: t.sensitive_config,
            })
            .collect(),
        handoffs: body.handoffs,
        default: body.default,
    };
    Ok(Json(state.store.put_agent(&tenant.id, &def).await?.into()))
}

/// An agent tool entry `"<label>/<tool>"` must name a registered MCP server, and a tool it has
/// (when its tools can be listed now or were listed before).
async fn check_mcp_tool(state: &AppState, tenant: &str, label: &str, tool: &str) -> ApiResult<()> {
    if state.store.get_mcp_server(tenant, label).await?.is_none() {
        return Err(ApiError::bad_request(format!(
            "tool `{label}/{tool}` names MCP server `{label}`, which is not registered; register it first (PUT /v1/mcp-servers/{label})"
        )));
    }
    match crate::mcp::sources::server_tools(state, tenant, label, false).await {
        Ok(tools) if !tools.iter().any(|t| t.name == tool) => {
            let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
            Err(ApiError::bad_request(format!(
                "MCP server `{label}` has no tool `{tool}`; it has: {}",
                if names.is_empty() {
                    "none".to_owned()
                } else {
                    names.join(", ")
                }
            )))
        }
        // Not reachable now and never listed: accepted; the tool is offered once it answers.
        _ => Ok(()),
    }
}

#[utoipa::path(delete, path = "/v1/agents/{name}", tag = "agents", security(("bearer" = [])),
    responses((status = 204, description = "Deleted"), (status = 404, body = ErrorBody)))]
pub async fn delete_agent(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(name): Path<String>,
) -> ApiResult<StatusCode> {
    if state.store.delete_agent(&tenant.id, &name).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::not_found(format!("agent `{name}`")))
    }
}

/// `?format=&strict=&tool_choice=` of the toolset endpoint.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ToolsetQuery {
    /// openai-realtime (default), openai-chat, openai-responses, anthropic or mcp.
    #[param(pattern = "^(openai-realtime|openai-chat|openai-responses|anthropic|mcp)$")]
    pub format: Option<String>,
    /// OpenAI strict mode.
    pub strict: Option<bool>,
    /// auto, none, required, or a function name.
    #[param(min_length = 1)]
    pub tool_choice: Option<String>,
}

#[utoipa::path(get, path = "/v1/agents/{name}/toolset", tag = "agents", security(("bearer" = [])), params(ToolsetQuery),
    responses((status = 200, body = Object, description = "`{tools, tool_choice}` in the provider's format"), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn get_toolset(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(name): Path<String>,
    Query(q): Query<ToolsetQuery>,
) -> ApiResult<Json<Value>> {
    let format: Format = q
        .format
        .as_deref()
        .unwrap_or("openai-realtime")
        .parse()
        .map_err(|e| ApiError::bad_request(format!("{e}")))?;
    let choice = q
        .tool_choice
        .as_deref()
        .map(str::parse::<ToolChoice>)
        .transpose()
        .map_err(|e| ApiError::bad_request(e.to_string()))?;
    let toolset =
        agent_toolset(&state, &tenant.id, &name, q.strict.unwrap_or(false), choice).await?;
    Ok(Json(toolset.render(format)))
}
