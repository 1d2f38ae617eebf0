//! Calls over HTTP, for any voice stack: start a call, invoke tools in it, cancel a response's
//! tools when the caller barges in, end it, and read its context and invocation record.

use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use switchboard_core::builder::{Format, Toolset};
use switchboard_core::{CallInfo, Context};
use switchboard_runtime::effects::CallAction;
use switchboard_runtime::redact::Redactor;
use switchboard_runtime::{
    CallConfig, CallSession, Delivery, Invocation, InvocationRecord, Lookup, SessionDeps,
    SessionOptions, ToolEntry,
};
use utoipa::ToSchema;

use crate::auth::Tenant;
use crate::calls::{HttpSink, LiveCall};
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::extract::{Body, Path};
use crate::state::AppState;
use crate::toolset::{call_config, compile};
use switchboard_store::NodeInfo;
use switchboard_store::ownership::{Door, FIRST_FENCE};

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

/// A function call from the model: its id, name and arguments, or the model's item as it came.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewInvocation {
    /// The model's id for this function call; repeats are answered with the first answer.
    /// Required unless `item` is given.
    #[schema(min_length = 1, max_length = 200)]
    pub function_call_id: Option<String>,
    /// The function's name; required unless `item` is given.
    pub name: Option<String>,
    /// The arguments: an object, or the JSON text the model produced (as OpenAI's events carry
    /// it), parsed like `arguments_json` (other JSON, an array or a number, is answered
    /// `tool_args_parse_error`, as that text would be)…
    #[schema(value_type = Option<serde_json::Value>)]
    pub arguments: Option<Value>,
    /// …or the JSON text the model produced.
    pub arguments_json: Option<String>,
    /// The model response it belongs to (for cancellation on barge-in).
    pub response_id: Option<String>,
    /// Instead of the fields above: the model's function call as it came, an OpenAI Responses
    /// `function_call` item, a Chat Completions tool call or an Anthropic `tool_use` block. The
    /// answer then carries `item` in the matching shape.
    #[schema(value_type = Option<Object>)]
    pub item: Option<Value>,
    /// The shape of the answer's `item` (default: the request item's; none without one).
    pub answer_as: Option<super::items::ItemFormat>,
}

/// The answer to a function call.
#[derive(Debug, Serialize, ToSchema)]
pub struct InvocationResult {
    pub function_call_id: String,
    pub ok: bool,
    pub error: Option<String>,
    /// The JSON text to give the model as the function call's output.
    pub output: String,
    /// `output`, parsed.
    #[schema(value_type = Object)]
    pub result: Value,
    /// Transfers and hang-ups for your stack to carry out.
    #[schema(value_type = Vec<Object>)]
    pub actions: Vec<Value>,
    /// Set when the call moved to another agent: update the model with this toolset and the
    /// agent's instructions.
    #[schema(value_type = Option<Object>)]
    pub handoff: Option<Value>,
    pub duplicate_of: Option<String>,
    /// The response was interrupted: do not ask the model for a new response for this answer.
    pub interrupted: bool,
    /// This answer was recorded earlier (a repeated request).
    pub replayed: bool,
    /// The answer as the item that goes back to the model (`function_call_output`, a `tool`
    /// message or a `tool_result` block), when the request gave an `item` or `answer_as`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub item: Option<Value>,
}

/// A call, its context and its invocation record.
#[derive(Debug, Serialize, ToSchema)]
pub struct CallView {
    pub call_id: String,
    pub agent: String,
    pub status: String,
    /// The call's context; the call's secrets and the user's tokens are redacted wherever they
    /// appear.
    #[schema(value_type = Object)]
    pub context: Value,
    /// The newest invocation records (at most the server's `max_records_per_call`), oldest
    /// first; each record's `arguments`, `output` and logs are bounded too.
    #[schema(value_type = Vec<Object>)]
    pub invocations: Vec<Value>,
    /// How many invocations the call has recorded in all (more than `invocations` holds
    /// when older ones were left out).
    pub invocations_total: u64,
    pub live_on_this_node: bool,
}

fn session_options(state: &AppState) -> SessionOptions {
    SessionOptions {
        hold_terminal_effects: false,
        max_handoffs: state.config.limits.max_handoffs,
        records: state.config.records,
        commit_retry: state.config.commit_retry,
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

#[utoipa::path(post, path = "/v1/calls", tag = "calls", security(("bearer" = [])), request_body = NewCall,
    responses((status = 201, body = CallStarted), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody), (status = 429, body = ErrorBody)))]
pub async fn create_call(
    State(state): State<AppState>,
    tenant: Tenant,
    Body(new): Body<NewCall>,
) -> ApiResult<(StatusCode, Json<CallStarted>)> {
    let started = start_call(&state, &tenant.id, new).await?;
    Ok((StatusCode::CREATED, Json(started)))
}

/// Starts a call on this node (a store row and a `CallSession`, registered as live): what every
/// door that starts calls itself (HTTP, MCP) does.
pub(crate) async fn start_call(
    state: &AppState,
    tenant_id: &str,
    new: NewCall,
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
    let session = CallSession::start_with_context(call, ctx, deps)
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

/// Which door a function call came through, for [`submit_and_wait`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Via {
    /// `POST /v1/calls/{id}/invocations`: not for a phone call, whose model speaks on its line.
    Http,
    /// A call's MCP endpoint (or an agent's): also for a phone call, whose tools OpenAI may
    /// call over MCP.
    Mcp,
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

fn result_from_record(r: &InvocationRecord) -> InvocationResult {
    InvocationResult {
        function_call_id: r.function_call_id.clone(),
        ok: r.ok,
        error: r.error.map(|e| e.as_str().to_owned()),
        result: serde_json::from_str(&r.output).unwrap_or(Value::Null),
        output: r.output.clone(),
        actions: Vec::new(),
        handoff: None,
        duplicate_of: r.duplicate_of.clone(),
        interrupted: r.interrupted,
        replayed: true,
        item: None,
    }
}

fn result_from_delivery(
    d: Delivery,
    live: &LiveCall,
    config: Option<&CallConfig>,
) -> InvocationResult {
    let _ = live;
    let handoff = d.handoff.as_ref().map(|h| {
        let toolset = config
            .map(|c| realtime_toolset(c, &h.agent))
            .unwrap_or(Value::Null);
        json!({"agent": h.agent, "reason": h.reason, "message": h.message, "toolset": toolset})
    });
    InvocationResult {
        function_call_id: d.result.function_call_id.clone(),
        ok: d.result.ok,
        error: d.result.error.map(|e| e.as_str().to_owned()),
        result: serde_json::from_str(&d.result.output).unwrap_or(Value::Null),
        output: d.result.output,
        actions: d
            .actions
            .iter()
            .map(|a: &CallAction| serde_json::to_value(a).unwrap_or(Value::Null))
            .collect(),
        handoff,
        duplicate_of: d.duplicate_of,
        interrupted: d.interrupted,
        replayed: false,
        item: None,
    }
}

#[utoipa::path(post, path = "/v1/calls/{call_id}/invocations", tag = "calls", security(("bearer" = [])), request_body = NewInvocation,
    responses((status = 200, body = InvocationResult, description = "Always an answer for the model, also when the tool failed"), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)))]
pub async fn invoke(
    State(state): State<AppState>,
    arrived: Option<axum::Extension<crate::deadlines::Arrived>>,
    tenant: Tenant,
    Path(call_id): Path<String>,
    Body(new): Body<NewInvocation>,
) -> ApiResult<Json<InvocationResult>> {
    let arrived = arrived.map_or_else(std::time::Instant::now, |a| a.0.0);
    let call = model_call(new)?;
    let live = live(&state, &tenant.id, &call_id).await?;
    let invocation = Invocation {
        call_id: call_id.clone(),
        function_call_id: call.function_call_id,
        name: call.name,
        arguments_json: call.arguments_json,
        response_id: call.response_id,
        item_id: None,
    };
    let mut answer = submit_and_wait(&state, &live, invocation, Via::Http, arrived).await?;
    if let Some(format) = call.answer_as {
        answer.item = Some(super::items::answer_item(
            format,
            &answer.function_call_id,
            answer.ok,
            &answer.output,
        ));
    }
    Ok(Json(answer))
}

/// A request's function call, read from its fields or its `item`.
struct RequestedCall {
    function_call_id: String,
    name: String,
    arguments_json: String,
    response_id: Option<String>,
    answer_as: Option<super::items::ItemFormat>,
}

fn model_call(new: NewInvocation) -> ApiResult<RequestedCall> {
    let call = match new.item {
        Some(item) => {
            if new.function_call_id.is_some()
                || new.name.is_some()
                || new.arguments.is_some()
                || new.arguments_json.is_some()
            {
                return Err(ApiError::bad_request(
                    "give the model's `item`, or `function_call_id`, `name` and the arguments, not both",
                ));
            }
            let read = super::items::read_item(&item)?;
            RequestedCall {
                function_call_id: read.function_call_id,
                name: read.name,
                arguments_json: read.arguments_json,
                response_id: new.response_id,
                answer_as: Some(new.answer_as.unwrap_or(read.format)),
            }
        }
        None => {
            let (Some(function_call_id), Some(name)) = (new.function_call_id, new.name) else {
                return Err(ApiError::bad_request(
                    "`function_call_id` and `name` are required (or send the model's function call as `item`)",
                ));
            };
            let arguments_json = match (new.arguments, new.arguments_json) {
                (Some(_), Some(_)) => {
                    return Err(ApiError::bad_request(
                        "give `arguments` or `arguments_json`, not both",
                    ));
                }
                // The model's JSON text, as OpenAI's events carry it: parsed like arguments_json.
                (Some(Value::String(s)), None) => s,
                // An object, or what the model made instead of one (an array, a number): the
                // tool answers the latter `tool_args_parse_error`, as it answers that text.
                (Some(v), None) => v.to_string(),
                (None, Some(s)) => s,
                (None, None) => "{}".to_owned(),
            };
            RequestedCall {
                function_call_id,
                name,
                arguments_json,
                response_id: new.response_id,
                answer_as: new.answer_as,
            }
        }
    };
    if call.function_call_id.is_empty() || call.function_call_id.len() > 200 {
        return Err(ApiError::bad_request(
            "function_call_id must be 1-200 characters",
        ));
    }
    Ok(call)
}

/// Hands a function call to a live call and waits for its answer; a function call id the call
/// has answered before (here or on another node) gets the recorded answer.
pub(crate) async fn submit_and_wait(
    state: &AppState,
    live: &LiveCall,
    invocation: Invocation,
    via: Via,
    arrived: std::time::Instant,
) -> ApiResult<InvocationResult> {
    let call_id = invocation.call_id.clone();
    if live.realtime && via == Via::Http {
        return Err(ApiError::conflict(format!(
            "call `{call_id}` is served by the Realtime door: its model's function calls arrive on the call's WebSocket, not here (an MCP client may call its tools at /v1/calls/{call_id}/mcp)"
        )));
    }
    let fc = invocation.function_call_id.clone();
    live.activity.touch();
    let rx = live.sink.wait_for(&fc);
    if live.realtime {
        live.sink.submitted_here(&fc);
    }
    // The session knows every answer of the call, a previous owner's included (loaded when it
    // took the call over, or read from the journal once it has let old records go).
    match live.session.lookup(&fc).await {
        Some(Lookup::Done(record)) => {
            live.sink.forget(&fc);
            return Ok(result_from_record(&record));
        }
        Some(Lookup::Pending) => {}
        // Ended meanwhile (by `DELETE`, or idle): nothing will answer.
        None if live.session.is_closed() => {
            live.sink.forget(&fc);
            return Err(ApiError::conflict(format!("call `{call_id}` has ended")));
        }
        None => live.session.submit_at(invocation, arrived),
    }
    let wait = Duration::from_secs_f64(state.config.limits.max_timeout_s + 10.0);
    match tokio::time::timeout(wait, rx).await {
        Ok(Ok(delivery)) => {
            live.activity.touch();
            let config = live.session.config();
            Ok(result_from_delivery(delivery, live, Some(&config)))
        }
        // The session let go of its waiters: another node took the call over, and will answer
        // this function call from the journal.
        Ok(Err(_)) => Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            format!("call `{call_id}` moved to another node while this ran; send the same function call again to get its answer"),
        )
        .with_details(json!({"retry_after_s": 1}))),
        Err(_) => {
            live.sink.forget(&fc);
            Err(ApiError::new(
                StatusCode::GATEWAY_TIMEOUT,
                "timeout",
                "no answer in time; the call's record will have it (GET the call)",
            ))
        }
    }
}

#[utoipa::path(post, path = "/v1/calls/{call_id}/responses/{response_id}/cancel", tag = "calls", security(("bearer" = [])),
    responses((status = 202, body = Object, description = "Read tools of that response are cancelled; write tools finish; transfers and hang-ups are dropped"), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody, description = "The call has ended")))]
pub async fn cancel_response(
    State(state): State<AppState>,
    tenant: Tenant,
    Path((call_id, response_id)): Path<(String, String)>,
) -> ApiResult<(StatusCode, Json<Value>)> {
    let live = live(&state, &tenant.id, &call_id).await?;
    live.activity.touch();
    live.session.cancel_response(&response_id);
    Ok((
        StatusCode::ACCEPTED,
        Json(json!({"call_id": call_id, "response_id": response_id, "status": "cancelling"})),
    ))
}

/// The redactor of a call's view: the secrets of its tools as the call pinned them (when it is
/// live here) and as they are now, the signing secret, and the user's tokens.
pub(crate) async fn view_redactor(
    state: &AppState,
    tenant: &str,
    live: Option<&LiveCall>,
    context: &Context,
) -> ApiResult<Redactor> {
    let (current, _) = call_config(state, tenant).await?;
    let pinned = live.map(|l| l.session.config());
    Ok(Redactor::for_calls(
        std::iter::once(&current).chain(pinned.as_deref()),
        &context.user,
    ))
}

/// The call as `GET /v1/calls/{id}` shows it: every string of the context (all namespaces) and
/// of the records, keys included, with the call's secrets replaced.
fn view(
    redactor: &Redactor,
    call_id: &str,
    agent: &str,
    status: &str,
    context: &Context,
    (records, invocations_total): (&[InvocationRecord], u64),
    live: bool,
) -> CallView {
    let mut ctx = serde_json::to_value(context).unwrap_or(Value::Null);
    redactor.redact_value(&mut ctx);
    CallView {
        call_id: redactor.redact(call_id),
        agent: redactor.redact(agent),
        status: status.to_owned(),
        context: ctx,
        invocations: records
            .iter()
            // The replay trace is for `POST /v1/tools/{name}:replay`, not for the view.
            .map(|r| InvocationRecord {
                trace: None,
                ..r.clone()
            })
            .filter_map(|r| serde_json::to_value(redactor.redact_record(&r)).ok())
            .map(|mut v| {
                redactor.redact_value(&mut v);
                v
            })
            .collect(),
        invocations_total,
        live_on_this_node: live,
    }
}

#[utoipa::path(get, path = "/v1/calls/{call_id}", tag = "calls", security(("bearer" = [])),
    responses((status = 200, body = CallView), (status = 404, body = ErrorBody)))]
pub async fn get_call(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(call_id): Path<String>,
) -> ApiResult<Json<CallView>> {
    // The database is the authority: every node commits there before it answers.
    let row = state
        .store
        .get_call(&tenant.id, &call_id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("call `{call_id}`")))?;
    let (records, total) = recent_invocations(&state, &tenant.id, &call_id).await?;
    let live = state.calls.get(&tenant.id, &call_id);
    let redactor = view_redactor(&state, &tenant.id, live.as_deref(), &row.context).await?;
    Ok(Json(view(
        &redactor,
        &call_id,
        &row.agent,
        row.status.as_str(),
        &row.context,
        (&records, total),
        live.is_some(),
    )))
}

#[utoipa::path(delete, path = "/v1/calls/{call_id}", tag = "calls", security(("bearer" = [])),
    responses((status = 200, body = CallView, description = "Ended: what was still running was cancelled"), (status = 404, body = ErrorBody)))]
pub async fn end_call(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(call_id): Path<String>,
) -> ApiResult<Json<CallView>> {
    let live = live(&state, &tenant.id, &call_id).await;
    if let Ok(live) = live {
        state.calls.remove(&tenant.id, &call_id);
        if live.realtime {
            state.realtime.stop(&call_id);
        }
        if let Some(s) = live.session.end().await {
            // The session holds the newest records; the database counts them all.
            let (_, total) = recent_invocations(&state, &tenant.id, &call_id).await?;
            let total = total.max(u64::try_from(s.records.len()).unwrap_or(u64::MAX));
            let redactor = view_redactor(&state, &tenant.id, Some(&live), &s.context).await?;
            return Ok(Json(view(
                &redactor,
                &call_id,
                s.context.active_agent(),
                "ended",
                &s.context,
                (&s.records, total),
                false,
            )));
        }
    }
    let row = state
        .store
        .get_call(&tenant.id, &call_id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("call `{call_id}`")))?;
    let (records, total) = recent_invocations(&state, &tenant.id, &call_id).await?;
    let redactor = view_redactor(&state, &tenant.id, None, &row.context).await?;
    Ok(Json(view(
        &redactor,
        &call_id,
        &row.agent,
        row.status.as_str(),
        &row.context,
        (&records, total),
        false,
    )))
}

/// The newest records of a call that a view shows, and how many it has in all.
async fn recent_invocations(
    state: &AppState,
    tenant: &str,
    call_id: &str,
) -> ApiResult<(Vec<InvocationRecord>, u64)> {
    let limit = state.config.records.records();
    Ok(state
        .store
        .recent_invocations(tenant, call_id, limit)
        .await?)
}
