//! The OpenAI Realtime SIP door, as the server mounts it: the per-tenant webhook, routing an
//! incoming call to an agent, and running the call on the node's [`RealtimeDoor`].

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::HeaderMap;
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use switchboard_core::CallInfo;
use switchboard_core::Context;
use switchboard_realtime::{AgentProfile, CallPlan, IncomingCall, RealtimeDoor, webhook};
use switchboard_runtime::{CallSession, SessionDeps, SessionOptions};
use switchboard_store::Door;
use switchboard_store::ownership::FIRST_FENCE;

use crate::calls::LiveCall;
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::extract::Path;
use crate::state::AppState;
use crate::toolset::call_config;

/// The tenant secret holding the OpenAI project's API key.
pub const OPENAI_API_KEY: &str = "openai_api_key";
/// The tenant secret holding the OpenAI project's webhook secret (`whsec_…`).
pub const OPENAI_WEBHOOK_SECRET: &str = "openai_webhook_secret";

/// `features.realtime`: how a tenant's phone calls are answered.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RealtimeFeature {
    /// Called number (E.164, as in the SIP `To` header) → agent. Other numbers go to the
    /// tenant's default agent.
    #[serde(default)]
    pub phone_numbers: BTreeMap<String, String>,
    /// The model, unless the agent names one.
    #[serde(default)]
    pub model: Option<String>,
    /// The voice, unless the agent names one.
    #[serde(default)]
    pub voice: Option<String>,
    /// `auto` (default), `required`, `none`.
    #[serde(default)]
    pub tool_choice: Option<String>,
    /// Agents whose tools OpenAI gets as one `type: "mcp"` tool (this deployment's MCP endpoint
    /// for the agent, which OpenAI calls itself) instead of function tools.
    #[serde(default)]
    pub mcp_agents: Vec<String>,
    /// This deployment's public base URL (`https://switchboard.example.com`), which OpenAI
    /// reaches the MCP endpoint at; needed with `mcp_agents`.
    #[serde(default)]
    pub public_url: Option<String>,
}

/// The model used when neither the agent nor the tenant names one.
pub const DEFAULT_MODEL: &str = "gpt-realtime";

impl RealtimeFeature {
    /// Reads and checks `features.realtime`; each problem names its place and its fix.
    pub fn parse(value: &Value) -> Result<RealtimeFeature, String> {
        let f = RealtimeFeature::deserialize(value).map_err(|e| {
            format!(
                "features.realtime: {e}; known fields: phone_numbers, model, voice, tool_choice, mcp_agents, public_url"
            )
        })?;
        for (number, agent) in &f.phone_numbers {
            if number.is_empty() || number.len() > 64 {
                return Err(format!(
                    "features.realtime.phone_numbers: `{number}` is not a number; write it as in the SIP To header, e.g. +18005551212"
                ));
            }
            if agent.is_empty() {
                return Err(format!(
                    "features.realtime.phone_numbers.{number}: name the agent that answers it"
                ));
            }
        }
        if !f.mcp_agents.is_empty() {
            match f.public_url.as_deref() {
                Some(u) if u.starts_with("https://") || u.starts_with("http://") => {}
                _ => {
                    return Err("features.realtime.public_url: give this deployment's public base URL (https://…) so OpenAI can reach the MCP endpoint of `mcp_agents`".into());
                }
            }
        }
        if let Some(c) = &f.tool_choice
            && !matches!(c.as_str(), "auto" | "required" | "none")
        {
            return Err(format!(
                "features.realtime.tool_choice: `{c}` is not one of auto, required, none"
            ));
        }
        Ok(f)
    }
}

#[utoipa::path(post, path = "/v1/realtime/webhook/{tenant_id}", tag = "realtime",
    description = "Where OpenAI posts `realtime.call.incoming` for this tenant (set it as the project's webhook URL). Verified with the tenant secret `openai_webhook_secret` (Standard Webhooks); answered at once, the call is accepted in the background; a repeated `webhook-id` is acknowledged and ignored.",
    request_body = Object,
    responses((status = 200, body = Object, description = "Taken (or a repeat, or an event type that needs nothing)"),
              (status = 400, body = ErrorBody), (status = 401, body = ErrorBody, description = "Bad, stale or missing signature or timestamp; also an unknown tenant or one without a webhook secret, answered alike")))]
pub async fn webhook_route(
    State(state): State<AppState>,
    Path(tenant_id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> ApiResult<Json<Value>> {
    // What needs no secret is checked first; then an unknown tenant, a tenant without a webhook
    // secret and a bad signature get one and the same answer, so the URL reveals nothing.
    if let Err(e) = webhook::precheck(&headers, webhook::unix_now()) {
        return Err(refused(&tenant_id, &e.to_string(), e.to_string()));
    }
    let tenant = state.store.get_tenant(&tenant_id).await?;
    let secret = match &tenant {
        Some(t) => state.store.get_secret(&t.id, OPENAI_WEBHOOK_SECRET).await?,
        None => None,
    };
    let (Some(tenant), Some(secret)) = (tenant, secret) else {
        let why = "unknown tenant, or no `openai_webhook_secret` secret";
        let answer = webhook::VerifyError::BadSignature.to_string();
        return Err(refused(&tenant_id, why, answer));
    };
    if let Err(e) = webhook::verify(secret.expose_secret(), &headers, &body) {
        return Err(refused(&tenant.id, &e.to_string(), e.to_string()));
    }
    let event: webhook::WebhookEvent = serde_json::from_slice(&body)
        .map_err(|e| ApiError::bad_request(format!("the webhook body is not an event: {e}")))?;
    if event.kind != "realtime.call.incoming" {
        return Ok(Json(json!({"status": "ignored", "type": event.kind})));
    }
    let incoming = IncomingCall::parse(&event.data).map_err(ApiError::bad_request)?;
    let webhook_id = headers
        .get("webhook-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    if !state.store.claim_webhook(&tenant.id, webhook_id).await? {
        tracing::info!(name: "realtime_webhook_duplicate", webhook_id = %webhook_id, "realtime_webhook_duplicate");
        return Ok(Json(
            json!({"status": "duplicate", "call_id": incoming.call_id}),
        ));
    }
    tracing::info!(name: "realtime_call_incoming", tenant_id = %tenant.id, call_id = %incoming.call_id, to = incoming.to.as_deref().unwrap_or(""), "realtime_call_incoming");
    let call_id = incoming.call_id.clone();
    let features = tenant.features.clone();
    tokio::spawn(answer(state.clone(), tenant.id, features, incoming));
    Ok(Json(json!({"status": "accepted", "call_id": call_id})))
}

/// A refused delivery: logged with its tenant and reason, answered with `answer`, which never
/// names the tenant.
fn refused(tenant_id: &str, why: &str, answer: String) -> ApiError {
    tracing::warn!(name: "realtime_webhook_refused", tenant_id = %tenant_id, error = %why, "realtime_webhook_refused");
    metrics::counter!("switchboard_realtime_webhooks_refused_total").increment(1);
    ApiError::unauthorized(answer)
}

/// Why an incoming call is declined, with the SIP status to decline it with.
struct Decline {
    status: u16,
    reason: String,
}

/// Routes, accepts and runs one incoming call, in the background of its webhook.
async fn answer(state: AppState, tenant: String, features: Value, incoming: IncomingCall) {
    let call_id = incoming.call_id.clone();
    let key = match state.store.get_secret(&tenant, OPENAI_API_KEY).await {
        Ok(Some(k)) => k,
        Ok(None) => {
            tracing::error!(name: "realtime_call_unanswerable", call_id = %call_id, reason = "the tenant has no openai_api_key secret", "realtime_call_unanswerable");
            return;
        }
        Err(e) => {
            tracing::error!(name: "realtime_call_unanswerable", call_id = %call_id, reason = %e, "realtime_call_unanswerable");
            return;
        }
    };
    match prepare(&state, &tenant, &features, &incoming).await {
        Err(d) => {
            tracing::warn!(name: "realtime_call_declined", call_id = %call_id, status = d.status, reason = %d.reason, "realtime_call_declined");
            if let Err(e) = state
                .realtime
                .api()
                .reject(&key, &call_id, Some(d.status))
                .await
            {
                tracing::error!(name: "realtime_reject_failed", call_id = %call_id, error = %e, "realtime_reject_failed");
            }
        }
        Ok(prepared) => run(state, tenant, key, incoming, prepared).await,
    }
}

struct Prepared {
    plan: CallPlan,
    config: switchboard_runtime::CallConfig,
    pinned: Value,
    /// What the agent remembers about the caller, when it loads a profile.
    profile: Option<switchboard_store::memory::Profile>,
}

/// The agent for the number called, and everything the call will use, pinned now.
async fn prepare(
    state: &AppState,
    tenant: &str,
    features: &Value,
    incoming: &IncomingCall,
) -> Result<Prepared, Decline> {
    let internal = |e: ApiError| Decline {
        status: 480,
        reason: e.to_string(),
    };
    let feature = match features.get("realtime") {
        None | Some(Value::Null) => RealtimeFeature::default(),
        Some(v) => RealtimeFeature::parse(v).map_err(|reason| Decline {
            status: 480,
            reason,
        })?,
    };
    let routed = incoming
        .to
        .as_ref()
        .and_then(|to| feature.phone_numbers.get(to))
        .cloned();
    let agent = match routed {
        Some(a) => a,
        None => state
            .store
            .default_agent(tenant)
            .await
            .map_err(|e| internal(e.into()))?
            .ok_or_else(|| Decline {
                status: 404,
                reason: format!(
                    "no agent answers {} and the tenant has no default agent",
                    incoming.to.as_deref().unwrap_or("this number")
                ),
            })?,
    };
    let (config, pinned) = call_config(state, tenant).await.map_err(internal)?;
    let mut plan = build_plan(state, tenant, &incoming.call_id, &feature, &agent, &config).await?;
    let caller = incoming.from.as_deref();
    let profile = crate::caller_profile::load(state, tenant, &config, &agent, caller).await;
    if let Some(p) = &profile {
        crate::caller_profile::add_to_plan(state, &config, &mut plan, p);
    }
    Ok(Prepared {
        plan,
        config,
        pinned,
        profile,
    })
}

/// What a call is accepted with and every agent's session for handoffs, for a call whose
/// active agent is `agent` and whose tools are `config`.
async fn build_plan(
    state: &AppState,
    tenant: &str,
    call_id: &str,
    feature: &RealtimeFeature,
    agent: &str,
    config: &switchboard_runtime::CallConfig,
) -> Result<CallPlan, Decline> {
    let internal = |e: ApiError| Decline {
        status: 480,
        reason: e.to_string(),
    };
    // OpenAI calls the call's own MCP endpoint with a credential good for this call alone.
    let mcp =
        match (&feature.public_url, feature.mcp_agents.is_empty()) {
            (Some(base), false) => {
                let url = crate::mcp::call_endpoint(base, call_id).ok_or_else(|| Decline {
                    status: 480,
                    reason: format!("features.realtime.public_url `{base}` is not a base URL"),
                })?;
                let token = crate::mcp::call_token::mint(&state.store, tenant, call_id)
                    .ok_or_else(|| Decline {
                        status: 480,
                        reason: "could not seal the call's MCP credential".into(),
                    })?;
                Some((url, token))
            }
            _ => None,
        };
    let mut agents = HashMap::new();
    let mut first = None;
    let mut page = switchboard_store::Page::first(switchboard_store::Page::MAX_LIMIT);
    loop {
        let list = state
            .store
            .list_agents(tenant, page.clone())
            .await
            .map_err(|e| internal(e.into()))?;
        for a in &list.items {
            let toolset = crate::routes::calls::realtime_toolset(config, &a.name);
            let tool_choice = match &feature.tool_choice {
                Some(c) => json!(c),
                None => toolset.get("tool_choice").cloned().unwrap_or(json!("auto")),
            };
            let mut profile = AgentProfile {
                instructions: a.instructions.clone(),
                tools: toolset.get("tools").cloned().unwrap_or(json!([])),
                tool_choice,
            };
            if let (true, Some((url, token))) = (feature.mcp_agents.contains(&a.name), &mcp) {
                profile.tools = json!([{
                    "type": "mcp", "server_label": "switchboard", "server_url": url,
                    "require_approval": "never",
                    "headers": {"Authorization": format!("Bearer {token}")},
                }]);
                profile.tool_choice = json!("auto");
            }
            if a.name == agent {
                first = Some(a.clone());
            }
            agents.insert(a.name.clone(), profile);
        }
        match list.next {
            Some(next) => {
                page = switchboard_store::Page::after(switchboard_store::Page::MAX_LIMIT, next)
            }
            None => break,
        }
    }
    let first = first.ok_or_else(|| Decline {
        status: 404,
        reason: format!(
            "features.realtime routes the call to agent `{agent}`, which does not exist"
        ),
    })?;
    let mut accept_extra = Map::new();
    let model = first
        .model
        .clone()
        .or(feature.model.clone())
        .unwrap_or_else(|| DEFAULT_MODEL.to_owned());
    accept_extra.insert("model".into(), json!(model));
    if let Some(voice) = first.voice.clone().or(feature.voice.clone()) {
        accept_extra.insert("audio".into(), json!({"output": {"voice": voice}}));
    }
    Ok(CallPlan {
        agent: agent.to_owned(),
        agents: Arc::new(agents),
        accept_extra,
    })
}

async fn run(
    state: AppState,
    tenant: String,
    key: SecretString,
    incoming: IncomingCall,
    prepared: Prepared,
) {
    let call_id = incoming.call_id.clone();
    let Some((sink, opened)) = state.realtime.open(&call_id, key.clone()) else {
        return;
    };
    let call = CallInfo {
        id: call_id.clone(),
        tenant_id: tenant.clone(),
        agent: prepared.plan.agent.clone(),
        from: incoming.from.clone(),
        to: incoming.to.clone(),
        started_at: switchboard_runtime::now_rfc3339(),
    };
    let user = Value::Object(Map::new());
    let mut ctx = Context::new(&call, user.clone());
    if let Some(p) = &prepared.profile {
        crate::caller_profile::into_context(&mut ctx, p);
    }
    let cap = state.config.max_calls_per_tenant;
    let owner = (state.node.id.as_str(), Door::Realtime);
    match state
        .store
        .create_call_within(&tenant, &call, &prepared.pinned, &ctx, cap, owner)
        .await
    {
        Ok(Some(_)) => {}
        Ok(None) => {
            tracing::warn!(name: "realtime_call_declined", call_id = %call_id, status = 486, reason = "the tenant's live call limit (max_calls_per_tenant) is reached", "realtime_call_declined");
            state.realtime.forget(&call_id);
            if let Err(e) = state.realtime.api().reject(&key, &call_id, Some(486)).await {
                tracing::error!(name: "realtime_reject_failed", call_id = %call_id, error = %e, "realtime_reject_failed");
            }
            return;
        }
        Err(e) => {
            // Another node took this call (or the store is down): this node leaves it alone.
            tracing::warn!(name: "realtime_call_not_recorded", call_id = %call_id, error = %e, "realtime_call_not_recorded");
            state.realtime.forget(&call_id);
            return;
        }
    }
    let requests = Arc::new(crate::calls::HttpSink::default());
    let sink = Arc::new(crate::calls::PhoneSink {
        requests: Arc::clone(&requests),
        line: sink,
    });
    let deps = session_deps(&state, &tenant, prepared.config, sink, FIRST_FENCE);
    let session = match CallSession::start_with_context(call, ctx, deps).await {
        Ok(s) => s,
        Err(e) => {
            tracing::error!(name: "realtime_call_not_started", call_id = %call_id, error = %e, "realtime_call_not_started");
            state.realtime.forget(&call_id);
            return;
        }
    };
    state.calls.insert(Arc::new(LiveCall {
        tenant_id: tenant.clone(),
        session: session.clone(),
        sink: requests,
        realtime: true,
    }));
    let end = state
        .realtime
        .run(opened, prepared.plan, session.clone())
        .await;
    finish(&state, &tenant, &call_id, &session, end).await;
}

/// What a Realtime call's session needs: its own context is the authority (one node serves
/// the call), journaled after each tool under the node's fencing token.
fn session_deps(
    state: &AppState,
    tenant: &str,
    config: switchboard_runtime::CallConfig,
    sink: Arc<dyn switchboard_runtime::OutputSink>,
    fence: i64,
) -> SessionDeps {
    SessionDeps {
        config: Arc::new(config),
        executor: state.realtime_executor.clone(),
        sink,
        journal: Arc::new(state.store.journal(tenant).owned().fenced(fence)),
        options: SessionOptions {
            hold_terminal_effects: true,
            answer_before_journal: true,
            max_handoffs: state.config.limits.max_handoffs,
            records: state.config.records,
            commit_retry: state.config.commit_retry,
            ..SessionOptions::default()
        },
    }
}

/// After a call's loop ends: it is no longer live here, and its session ends (unless another
/// node owns the call now: then the session stopped already and the call goes on there).
async fn finish(
    state: &AppState,
    tenant: &str,
    call_id: &str,
    session: &CallSession,
    end: switchboard_realtime::CallEnd,
) {
    if let Some(live) = state.calls.get(tenant, call_id)
        && live.session.call_id() == session.call_id()
    {
        state.calls.remove(tenant, call_id);
    }
    if end != switchboard_realtime::CallEnd::Released {
        let _ = session.end().await;
    }
    tracing::info!(name: "realtime_call_finished", call_id = %call_id, end = ?end, "realtime_call_finished");
}

/// Takes over a live Realtime call whose node died (this node now owns it with fencing token
/// `fence`): restores its session from the journal, re-attaches its WebSocket, and answers the
/// function calls still pending (resumed from their checkpoints, or run again when they never
/// reached an effect). The caller hears a pause, not a dead line.
pub(crate) async fn resume_call(
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
    let tenant_row = state
        .store
        .get_tenant(tenant)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("tenant `{tenant}`")))?;
    let key = state
        .store
        .get_secret(tenant, OPENAI_API_KEY)
        .await?
        .ok_or_else(|| ApiError::conflict("the tenant has no `openai_api_key` secret"))?;
    let feature = match tenant_row.features.get("realtime") {
        None | Some(Value::Null) => RealtimeFeature::default(),
        Some(v) => RealtimeFeature::parse(v).map_err(ApiError::bad_request)?,
    };
    let config = crate::routes::calls::pinned_config(state, tenant, &row.pinned).await?;
    let plan = build_plan(state, tenant, call_id, &feature, &row.agent, &config)
        .await
        .map_err(|d| ApiError::internal(d.reason))?;
    let Some((sink, opened)) = state.realtime.open(call_id, key) else {
        return Err(ApiError::conflict(format!(
            "call `{call_id}` is being served here already"
        )));
    };
    let requests = Arc::new(crate::calls::HttpSink::default());
    let sink = Arc::new(crate::calls::PhoneSink {
        requests: Arc::clone(&requests),
        line: sink,
    });
    let deps = session_deps(state, tenant, config, sink, fence);
    let session = match CallSession::restore(call_id, deps).await {
        Ok(Some(s)) => s,
        Ok(None) => {
            state.realtime.forget(call_id);
            return Err(ApiError::conflict(format!("call `{call_id}` has ended")));
        }
        Err(e) => {
            state.realtime.forget(call_id);
            return Err(ApiError::internal(e.to_string()));
        }
    };
    tracing::info!(name: "realtime_call_taken_over", call_id = %call_id, fence, "realtime_call_taken_over");
    metrics::counter!("switchboard_realtime_takeovers_total").increment(1);
    let live = Arc::new(LiveCall {
        tenant_id: tenant.to_owned(),
        session: session.clone(),
        sink: requests,
        realtime: true,
    });
    state.calls.insert(Arc::clone(&live));
    let (state, tenant, call_id) = (state.clone(), tenant.to_owned(), call_id.to_owned());
    tokio::spawn(async move {
        let end = state.realtime.resume(opened, plan, session.clone()).await;
        finish(&state, &tenant, &call_id, &session, end).await;
    });
    Ok(live)
}

/// The door a server's state holds: REST client and live calls.
pub fn door(config: &crate::ServerConfig) -> Arc<RealtimeDoor> {
    RealtimeDoor::new(
        switchboard_realtime::CallsApi::new(config.openai.clone()),
        switchboard_realtime::DriverOptions::default(),
    )
}
