//! Agents: instructions, enabled tools with config and sensitive config, handoff targets; and the
//! toolset a model sees for an agent, in each provider's format.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Deserializer, Serialize};
use std::collections::HashMap;

use serde_json::{Map, Value, json};
use switchboard_core::Diagnostic;
use switchboard_core::builder::{Format, ToolChoice};
use switchboard_core::toolkits;
use switchboard_store::{AgentDef, AgentToolDef, LiveSettings};
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
    /// GPT-Live settings: `model`, `voice_instructions` (the voice model's; `instructions`
    /// are the backend model's), `backend_model`, `voice`. Realtime calls ignore them.
    #[schema(value_type = Option<Object>)]
    pub live: Option<LiveSettings>,
    /// Runaway guards overriding the defaults, every field optional:
    /// `{"identical_calls": {"max": 5, "window_s": 60}, "calls_per_minute": 60}`. A function
    /// call past one is answered `loop_detected`, nothing run.
    #[schema(value_type = Option<guards_schema::Guards>)]
    pub guards: Option<Value>,
    /// The longest silence the caller should hear while a tool runs, in milliseconds (200 to
    /// 5,000; default 700): a slow tool gets a new filler each time this much silence passes.
    #[schema(value_type = Option<u32>, minimum = 200, maximum = 5000)]
    pub turn_budget_ms: Option<Value>,
    /// What the caller hears while a slow tool without `messages.delayed` runs (at most 200
    /// characters), e.g. "One moment, please." Said once the turn budget passes in silence, at
    /// once for a tool expected to take longer; absent: silence.
    #[schema(value_type = Option<String>, max_length = 200)]
    pub filler: Option<Value>,
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
    /// For a toolkit (`toolkit:<name>`): the actions to enable, each one function for the
    /// model; absent enables them all.
    #[schema(min_items = 1)]
    pub actions: Option<Vec<String>>,
}

/// The shortest and longest `turn_budget_ms` an agent may set: under 200 ms a filler would start
/// over the model's own first words; past 5 s the caller has long hung up.
const MIN_TURN_BUDGET_MS: u32 = 200;
const MAX_TURN_BUDGET_MS: u32 = 5_000;
/// The longest `filler` an agent may set: a few words, said over and over while a tool runs.
const MAX_FILLER_CHARS: usize = 200;

/// The OpenAPI shape of an agent's `guards` (checked by core's `Guards::parse`, which names
/// each problem's JSON Pointer).
mod guards_schema {
    #![allow(dead_code)]

    use serde::Deserialize;
    use utoipa::ToSchema;

    /// An agent's runaway guards; every field is optional and defaults as shown.
    #[derive(Deserialize, ToSchema)]
    #[serde(deny_unknown_fields)]
    pub struct Guards {
        pub identical_calls: Option<IdenticalCalls>,
        /// Function calls of any tool in any 60 seconds of a call (default 60).
        #[schema(minimum = 1, maximum = 10000)]
        pub calls_per_minute: Option<u32>,
    }

    /// The same tool with the same arguments at most `max` times within `window_s`.
    #[derive(Deserialize, ToSchema)]
    #[serde(deny_unknown_fields)]
    pub struct IdenticalCalls {
        /// Default 5.
        #[schema(minimum = 1, maximum = 1000)]
        pub max: Option<u32>,
        /// Default 60.
        #[schema(minimum = 1, maximum = 3600)]
        pub window_s: Option<u32>,
    }
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
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub live: Option<LiveSettings>,
    /// The agent's runaway guards with the defaults filled in; absent when it keeps the
    /// defaults.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<guards_schema::Guards>)]
    pub guards: Option<switchboard_core::guards::Guards>,
    /// The agent's turn budget in milliseconds; absent when it keeps the default (700).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub turn_budget_ms: Option<u32>,
    /// What the caller hears while a slow tool without `messages.delayed` runs; absent: silence.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub filler: Option<String>,
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
    /// For a toolkit: the actions enabled (absent: all).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub actions: Option<Vec<String>>,
}

impl From<switchboard_store::Agent> for AgentView {
    fn from(a: switchboard_store::Agent) -> Self {
        AgentView {
            name: a.name,
            instructions: a.instructions,
            model: a.model,
            voice: a.voice,
            live: a.live,
            guards: a.guards,
            turn_budget_ms: a.turn_budget_ms,
            filler: a.filler,
            tools: a
                .tools
                .into_iter()
                .map(|t| AgentToolView {
                    tool: t.tool,
                    enabled: t.enabled,
                    config: t.config,
                    sensitive_config_set: t.sensitive_config_set,
                    actions: t.actions,
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
    let def = checked_agent(&state, &tenant.id, &name, body).await?;
    Ok(Json(state.store.put_agent(&tenant.id, &def).await?.into()))
}

/// An agent as written, checked as `PUT /v1/agents/{name}` checks it (the console's editor
/// saves through this too): each problem named at its JSON Pointer, with its fix.
pub(crate) async fn checked_agent(
    state: &AppState,
    tenant: &str,
    name: &str,
    body: AgentBody,
) -> ApiResult<AgentDef> {
    if body.name.as_deref().is_some_and(|n| n != name) {
        return Err(ApiError::bad_request(format!(
            "the body's name differs from `{name}` in the URL"
        )));
    }
    let transfer_on = refer_config(state, tenant).await?.is_some();
    let mut missing = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut problems = Vec::new();
    let guards = match body.guards.as_ref().filter(|g| !g.is_null()) {
        None => None,
        Some(g) => match switchboard_core::guards::Guards::parse(g, "/guards") {
            Ok(g) => Some(g),
            Err(p) => {
                problems.extend(p);
                None
            }
        },
    };
    let turn_budget_ms = match body.turn_budget_ms.as_ref().filter(|v| !v.is_null()) {
        None => None,
        Some(v) => match v.as_u64().and_then(|ms| u32::try_from(ms).ok()) {
            Some(ms) if (MIN_TURN_BUDGET_MS..=MAX_TURN_BUDGET_MS).contains(&ms) => Some(ms),
            _ => {
                problems.push(switchboard_core::diag::Diagnostic {
                    pointer: "/turn_budget_ms".into(),
                    message: format!(
                        "`turn_budget_ms` must be a whole number of milliseconds from \
                         {MIN_TURN_BUDGET_MS} to {MAX_TURN_BUDGET_MS}, not {v}"
                    ),
                    fix: Some("write e.g. 700, or leave it out for the default (700 ms)".into()),
                });
                None
            }
        },
    };
    let filler = match body.filler.as_ref().filter(|v| !v.is_null()) {
        None => None,
        Some(v) => match v.as_str().map(str::trim) {
            Some(text)
                if !text.is_empty()
                    && text.chars().count() <= MAX_FILLER_CHARS
                    && !text.chars().any(char::is_control) =>
            {
                Some(text.to_owned())
            }
            _ => {
                problems.push(switchboard_core::diag::Diagnostic {
                    pointer: "/filler".into(),
                    message: format!(
                        "`filler` must be a line of 1 to {MAX_FILLER_CHARS} characters without control characters"
                    ),
                    fix: Some(
                        "write a short phrase the caller hears while a tool runs, e.g. \"One moment, please.\", or leave it out".into(),
                    ),
                });
                None
            }
        },
    };
    // Each function name the model would see, and which entry gives it.
    let mut functions: HashMap<&str, usize> = HashMap::new();
    if transfer_on {
        functions.insert(switchboard_core::transfer::REQUEST_TRANSFER, usize::MAX);
    }
    for (i, t) in body.tools.iter().enumerate() {
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
        if t.actions.is_some() && toolkits::split_ref(&t.tool).is_none() {
            problems.push(problem(
                format!("/tools/{i}/actions"),
                format!(
                    "`{}` is not a toolkit; only `toolkit:<name>` entries take `actions`",
                    t.tool
                ),
                "remove `actions`",
            ));
        }
        if let Some(kit) = toolkits::split_ref(&t.tool) {
            let Some(kit) = toolkits::find(kit) else {
                let names: Vec<&str> = toolkits::catalogue().iter().map(|k| k.name).collect();
                problems.push(problem(
                    format!("/tools/{i}/tool"),
                    format!("there is no toolkit `{kit}`"),
                    &format!("use one of: toolkit:{}", names.join(", toolkit:")),
                ));
                continue;
            };
            let config = t
                .config
                .clone()
                .unwrap_or_else(|| Value::Object(Map::new()));
            problems.extend(kit.check(
                &format!("/tools/{i}"),
                t.actions.as_deref(),
                &config,
                t.sensitive_config.as_ref(),
            ));
            for a in kit.selected(t.actions.as_deref()) {
                name_function(&mut functions, &mut problems, &body.tools, i, a.name);
            }
        } else if let Some((label, tool)) = crate::mcp::sources::split_ref(&t.tool) {
            check_mcp_tool(state, tenant, label, tool).await?;
        } else if state.store.get_tool(tenant, &t.tool).await?.is_none() {
            missing.push(t.tool.clone());
        } else {
            name_function(&mut functions, &mut problems, &body.tools, i, &t.tool);
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
    if !problems.is_empty() {
        let n = problems.len();
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_agent",
            format!(
                "agent `{name}` has {n} problem{}",
                if n == 1 { "" } else { "s" }
            ),
        )
        .with_details(json!(problems)));
    }
    Ok(AgentDef {
        name: name.to_owned(),
        instructions: body.instructions,
        model: body.model,
        voice: body.voice,
        live: body.live,
        guards,
        turn_budget_ms,
        filler,
        tools: body
            .tools
            .into_iter()
            .map(|t| AgentToolDef {
                tool: t.tool,
                enabled: t.enabled,
                config: t.config.unwrap_or_else(|| Value::Object(Map::new())),
                sensitive_config: t.sensitive_config,
                actions: t.actions,
            })
            .collect(),
        handoffs: body.handoffs,
        default: body.default,
    })
}

fn problem(pointer: String, message: String, fix: &str) -> Diagnostic {
    Diagnostic {
        pointer,
        message,
        fix: Some(fix.to_owned()),
    }
}

/// Claims a function name for entry `i`; a name another entry (or the transfer toolkit)
/// already gives the model is a problem at this entry.
fn name_function<'a>(
    functions: &mut HashMap<&'a str, usize>,
    problems: &mut Vec<Diagnostic>,
    tools: &[AgentToolBody],
    i: usize,
    name: &'a str,
) {
    if let Some(&first) = functions.get(name) {
        let other = match tools.get(first) {
            Some(t) => format!("`{}` (/tools/{first})", t.tool),
            None => "the transfer toolkit".to_owned(),
        };
        problems.push(problem(
            format!("/tools/{i}"),
            format!(
                "`{}` gives the model a function `{name}`, which {other} gives too",
                tools.get(i).map_or("", |t| t.tool.as_str())
            ),
            "enable only some of a toolkit's actions (`actions`), or keep one of the two on this agent",
        ));
    } else {
        functions.insert(name, i);
    }
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
