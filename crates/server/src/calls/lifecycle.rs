//! A live call's life on this node, whichever door it came through: started here, located
//! (served here, or by which live node), picked up from a dead owner (its session restored
//! from the journal with the config the call pinned), and what its session needs. The HTTP
//! door's routes, the MCP door, the Realtime door, the ownership middleware and the idle
//! expiry all go through here.

use std::sync::Arc;

use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use switchboard_core::{CallInfo, Context};
use switchboard_runtime::{CallConfig, CallSession, SessionDeps, SessionOptions, ToolEntry};
use switchboard_store::NodeInfo;
use switchboard_store::ownership::{Door, FIRST_FENCE};
use utoipa::ToSchema;

use super::{HttpSink, LiveCall};
use crate::auth::Tenant;
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;
use crate::toolset::{call_config, compile, realtime_toolset};

/// A call to start.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewCall {
    /// The agent to start with; the tenant's default agent when absent.
    pub agent: Option<String>,
    /// Your id for the call (unique within your tenant); one is made when absent.
    #[schema(min_length = 1)]
    pub call_id: Option<String>,
    /// Caller and callee numbers (`call.from`, `call.to`).
    pub from: Option<String>,
    pub to: Option<String>,
    /// The `user` scope: who is calling, tokens for your APIs (never shown back).
    #[schema(value_type = Option<Object>)]
    pub user: Option<Value>,
}

/// A started call and the toolset its first agent's model should get.
#[derive(Debug, Serialize, ToSchema)]
pub struct CallStarted {
    pub call_id: String,
    pub agent: String,
    /// `{tools, tool_choice}` in OpenAI Realtime format.
    #[schema(value_type = Object)]
    pub toolset: Value,
    /// What the agent remembers about this caller (its `memory` toolkit with `load_profile`):
    /// `{text, facts: [{entity, content, created_at}]}`. Add `text` to the model's
    /// instructions; tools read it at `workflow.caller_profile`. Absent for a new caller.
    #[schema(value_type = Option<Object>)]
    pub caller_profile: Option<Value>,
}

fn session_options(state: &AppState) -> SessionOptions {
    SessionOptions {
        hold_terminal_effects: false,
        max_handoffs: state.config.limits.max_handoffs,
        records: state.config.records,
        commit_retry: state.config.commit_retry,
        warm_upstreams: state.config.warm_upstreams,
        ..SessionOptions::default()
    }
}

/// What a session of a call this node owns with fencing token `fence` needs. Its journal is
/// `owned`: the owner is the call's only writer (another node's writes are fenced off), so the
/// session's context is the authority and each answer is journaled through the store's group
/// commit, as at the phone doors.
fn deps(state: &AppState, config: CallConfig, sink: Arc<HttpSink>, fence: i64) -> SessionDeps {
    let journal = state.call_journal(&config.tenant_id, fence);
    SessionDeps {
        config: Arc::new(config),
        executor: state.executor.clone(),
        sink,
        journal,
        options: session_options(state),
    }
}

/// Starts a call on this node (a store row and a `CallSession`, registered as live): what every
/// door that starts calls itself (HTTP, MCP) does.
pub(crate) async fn start_call(
    state: &AppState,
    tenant_id: &str,
    new: NewCall,
    parent: Option<switchboard_runtime::TraceParent>,
) -> ApiResult<CallStarted> {
    let tenant = Tenant {
        id: tenant_id.to_owned(),
        key_id: String::new(),
    };
    let agent = match new.agent {
        Some(a) => a,
        None => state
            .store
            .default_agent(&tenant.id)
            .await?
            .ok_or_else(|| {
                ApiError::bad_request(
                    "name an `agent`, or mark one of the tenant's agents as default",
                )
            })?,
    };
    state
        .store
        .get_agent(&tenant.id, &agent)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("agent `{agent}`")))?;
    if new.user.as_ref().is_some_and(|u| !u.is_object()) {
        return Err(ApiError::bad_request("`user` must be an object"));
    }
    let (config, pinned) = call_config(state, &tenant.id).await?;
    let call_id = new
        .call_id
        .unwrap_or_else(|| format!("call_{}", fastrand_id()));
    let call = CallInfo {
        id: call_id.clone(),
        tenant_id: tenant.id.clone(),
        agent: agent.clone(),
        from: new.from,
        to: new.to,
        started_at: switchboard_runtime::now_rfc3339(),
    };
    let user = new.user.unwrap_or_else(|| Value::Object(Map::new()));
    let mut ctx = Context::new(&call, user.clone());
    let caller = switchboard_core::context::caller_of(&ctx.call, &ctx.user);
    let profile =
        crate::caller_profile::load(state, &tenant.id, &config, &agent, caller.as_deref()).await;
    if let Some(p) = &profile {
        crate::caller_profile::into_context(&mut ctx, p);
    }
    let cap = state.config.max_calls_per_tenant;
    let owner = (state.node.id.as_str(), Door::Http);
    if state
        .store
        .create_call_within(&tenant.id, &call, &pinned, &ctx, cap, owner)
        .await?
        .is_none()
    {
        return Err(too_many_calls(cap));
    }
    let toolset = realtime_toolset(&config, &agent);
    let sink = Arc::new(HttpSink::default());
    let deps = deps(state, config, Arc::clone(&sink), FIRST_FENCE);
    let session = CallSession::start_traced(call, ctx, deps, parent)
        .await
        .map_err(|e| ApiError::internal(e.to_string()))?;
    state.calls.insert(Arc::new(LiveCall {
        tenant_id: tenant.id.clone(),
        session,
        sink,
        realtime: false,
        activity: Default::default(),
    }));
    Ok(CallStarted {
        call_id,
        agent,
        toolset,
        caller_profile: profile.as_ref().map(crate::caller_profile::view),
    })
}

/// The answer when the tenant has as many live calls as it may have.
pub(crate) fn too_many_calls(cap: usize) -> ApiError {
    ApiError::new(
        StatusCode::TOO_MANY_REQUESTS,
        "rate_limited",
        format!("this tenant already has {cap} live calls (max_calls_per_tenant); end some first"),
    )
    .with_details(json!({"retry_after_s": 1, "max_calls_per_tenant": cap}))
}

fn fastrand_id() -> String {
    std::iter::repeat_with(fastrand::alphanumeric)
        .take(24)
        .collect()
}

/// The call's config as pinned when it started (tool versions), for a node that picks it up.
pub(crate) async fn pinned_config(
    state: &AppState,
    tenant: &str,
    pinned: &Value,
) -> ApiResult<CallConfig> {
    let (mut config, fresh) = call_config(state, tenant).await?;
    config.tool_versions = crate::toolset::tool_versions(pinned);
    // The guards the call started with (a call pinned before guards were pinned has none: it
    // keeps the agents' guards as they are now).
    if let Some(guards) = pinned.get("guards").and_then(Value::as_object) {
        config.guards = guards
            .iter()
            .filter_map(|(agent, g)| Some((agent.clone(), serde_json::from_value(g.clone()).ok()?)))
            .collect();
    }
    let Some(agents) = pinned.get("agents").and_then(Value::as_object) else {
        return Ok(config);
    };
    for (agent, tools) in agents {
        let Some(entries) = config.agents.get_mut(agent) else {
            continue;
        };
        // An MCP tool the call did not start with (its server grew it since) is not offered.
        let fresh_mcp = fresh
            .pointer(&format!(
                "/agents/{}",
                agent.replace('~', "~0").replace('/', "~1")
            ))
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .filter(|(name, pin)| pin.get("mcp").is_some() && tools.get(name.as_str()).is_none());
        for (name, _) in fresh_mcp {
            entries.remove(name);
        }
        for (name, pin) in tools.as_object().into_iter().flatten() {
            // An MCP tool as its server listed it when the call started (whatever it lists now).
            if let Some(definition) = pin.get("mcp") {
                let tool = switchboard_core::Tool::parse(definition, &state.config.limits)
                    .map_err(|d| {
                        ApiError::internal(format!("a pinned MCP tool no longer parses: {d}"))
                    })?;
                let entry = match entries.remove(name) {
                    Some(e) => ToolEntry {
                        tool: Arc::new(tool),
                        ..e
                    },
                    None => ToolEntry::new(Arc::new(tool)),
                };
                entries.insert(name.clone(), entry);
                continue;
            }
            let Some(version) = pin.as_i64().filter(|v| *v > 0) else {
                continue;
            };
            if let Some(v) = state.store.get_tool_version(tenant, name, version).await? {
                let tool = compile(state, tenant, &v)?;
                let entry = entries
                    .remove(name)
                    .map(|e| ToolEntry {
                        tool: Arc::clone(&tool),
                        ..e
                    })
                    .unwrap_or_else(|| ToolEntry::new(tool));
                entries.insert(name.clone(), entry);
            }
        }
    }
    Ok(config)
}

/// Where a live call is served.
pub(crate) enum Serving {
    /// On this node (it owned the call, or just took it over from a dead owner).
    Here(Arc<LiveCall>),
    /// By another node, alive, which owns the call: requests for it go there.
    Elsewhere(NodeInfo),
}

/// The live call, taking it over when its owner is dead (a node that stopped or was killed):
/// the database's lease decides, so two nodes never both serve one call.
pub(crate) async fn live(
    state: &AppState,
    tenant: &str,
    call_id: &str,
) -> ApiResult<Arc<LiveCall>> {
    match locate(state, tenant, call_id).await? {
        Serving::Here(call) => Ok(call),
        Serving::Elsewhere(node) => Err(served_elsewhere(call_id, &node)),
    }
}

/// The answer when another node serves the call and this request cannot be passed on to it.
pub(crate) fn served_elsewhere(call_id: &str, node: &NodeInfo) -> ApiError {
    let _ = node;
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "unavailable",
        format!("call `{call_id}` is served by another node of this deployment, which could not be reached; retry in a moment"),
    )
    .with_details(json!({"retry_after_s": 1}))
}

/// [`live`], or which node serves the call when another (alive) node owns it.
pub(crate) async fn locate(state: &AppState, tenant: &str, call_id: &str) -> ApiResult<Serving> {
    if let Some(c) = state.calls.get(tenant, call_id) {
        if !c.session.is_closed() {
            if !crate::ownership::may_serve(state).await {
                return Err(crate::deadlines::lease_lost(call_id));
            }
            return Ok(Serving::Here(c));
        }
        // Ended, or released to a node that took it over: forget it here.
        state.calls.remove(tenant, call_id);
    }
    // Past its lease this node may not serve the call (another may have taken it over) nor
    // take one over.
    if !crate::ownership::may_serve(state).await {
        return Err(crate::deadlines::lease_lost(call_id));
    }
    // One pick-up at a time on this node: the cap is checked and the call registered with
    // nothing in between. Across nodes, the lease decides (`take_over_call`).
    let _pickup = state.calls.pickup().await;
    if let Some(c) = state.calls.get(tenant, call_id)
        && !c.session.is_closed()
    {
        return Ok(Serving::Here(c));
    }
    // A takeover can lose a race with another node's: read the owner again.
    for _ in 0..3 {
        let owner = state
            .store
            .call_owner(tenant, call_id)
            .await?
            .ok_or_else(|| ApiError::not_found(format!("call `{call_id}`")))?;
        if owner.status == switchboard_store::CallStatus::Ended {
            return Err(ApiError::conflict(format!("call `{call_id}` has ended")));
        }
        match &owner.node {
            Some(node) if node.alive && node.id != state.node.id => {
                return Ok(Serving::Elsewhere(node.clone()));
            }
            _ => {}
        }
        let cap = state.config.max_calls_per_tenant;
        if state.calls.count(tenant) >= cap {
            return Err(too_many_calls(cap));
        }
        let Some(fence) = state
            .store
            .take_over_call(tenant, call_id, &state.node.id, owner.fence)
            .await?
        else {
            continue;
        };
        if matches!(owner.door, Door::Realtime | Door::Live) {
            return crate::ownership::take_over_realtime(state, tenant, call_id, fence, owner.door)
                .await
                .map(Serving::Here);
        }
        return pick_up(state, tenant, call_id, fence)
            .await
            .map(Serving::Here);
    }
    Err(ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "unavailable",
        format!("call `{call_id}` is changing owner; retry in a moment"),
    )
    .with_details(json!({"retry_after_s": 1})))
}

/// Serves a call this node has just become the owner of (fencing token `fence`): its session
/// restored from the journal, every run that was waiting at an effect resumed and every
/// claimed run that never reached one started again.
async fn pick_up(
    state: &AppState,
    tenant: &str,
    call_id: &str,
    fence: i64,
) -> ApiResult<Arc<LiveCall>> {
    let row = state
        .store
        .get_call(tenant, call_id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("call `{call_id}`")))?;
    let config = pinned_config(state, tenant, &row.pinned).await?;
    let sink = Arc::new(HttpSink::default());
    let session = CallSession::restore(call_id, deps(state, config, Arc::clone(&sink), fence))
        .await
        .map_err(|e| ApiError::internal(e.to_string()))?
        .ok_or_else(|| ApiError::conflict(format!("call `{call_id}` has ended")))?;
    tracing::info!(name: "call_picked_up", call_id = %call_id, fence, "call_picked_up");
    let live = Arc::new(LiveCall {
        tenant_id: tenant.to_owned(),
        session,
        sink,
        realtime: false,
        activity: Default::default(),
    });
    state.calls.insert(Arc::clone(&live));
    Ok(live)
}
