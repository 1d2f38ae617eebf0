//! The OpenAI SIP door, as the server mounts it: the per-tenant webhook (Realtime's
//! `realtime.call.incoming`, GPT-Live's `live.transport.incoming` and its deprecated
//! `live.call.incoming`), routing an incoming call to an agent and to the API the tenant's
//! phone settings name, and running the call on the node's [`RealtimeDoor`].
//!
//! One SIP call can raise both a Realtime and a GPT-Live event; the first accept picks the
//! runtime at OpenAI. Only the event of the API configured for the number called is acted on;
//! the other is acknowledged, ignored and logged with the reason.

use std::collections::HashMap;
use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::HeaderMap;
use secrecy::{ExposeSecret, SecretString};
use serde_json::{Map, Value, json};
use switchboard_core::CallInfo;
use switchboard_core::Context;
use switchboard_realtime::{
    AgentProfile, Api, CallPlan, IncomingCall, LiveStart, RealtimeDoor, webhook,
};
use switchboard_runtime::{CallSession, SessionDeps, SessionOptions};
use switchboard_store::Door;
use switchboard_store::ownership::FIRST_FENCE;

use crate::calls::LiveCall;
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::extract::Path;
use crate::phone::{DEFAULT_LIVE_MODEL, DEFAULT_MODEL, RealtimeFeature};
use crate::state::AppState;
use crate::toolset::call_config;

/// The tenant secret holding the OpenAI project's API key.
pub const OPENAI_API_KEY: &str = "openai_api_key";
/// The tenant secret holding the OpenAI project's webhook secret (`whsec_…`).
pub const OPENAI_WEBHOOK_SECRET: &str = "openai_webhook_secret";

#[utoipa::path(post, path = "/v1/realtime/webhook/{tenant_id}", tag = "realtime",
    description = "Where OpenAI posts `realtime.call.incoming`, `live.transport.incoming` and the deprecated `live.call.incoming` for this tenant (set it as the project's webhook URL). Verified with the tenant secret `openai_webhook_secret` (Standard Webhooks); answered at once, the call is accepted in the background by the API the tenant's phone settings name for the number called (an event of the other API is acknowledged and ignored); a repeated `webhook-id` is acknowledged and ignored.",
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
    let (api, incoming) = match event.kind.as_str() {
        "realtime.call.incoming" => (Api::Realtime, IncomingCall::parse(&event.data)),
        "live.transport.incoming" | "live.call.incoming" => {
            // A session on another transport (WebRTC, a WebSocket) is not a phone call.
            if let Some(t) = event.data.get("type").and_then(Value::as_str)
                && t != "sip"
            {
                return Ok(Json(json!({"status": "ignored", "type": event.kind,
                    "reason": format!("a `{t}` session is not a phone call")})));
            }
            (
                Api::Live,
                IncomingCall::parse_live(&event.kind, &event.data),
            )
        }
        _ => return Ok(Json(json!({"status": "ignored", "type": event.kind}))),
    };
    let incoming = incoming.map_err(ApiError::bad_request)?;
    // A tenant whose phone settings do not parse still gets its calls declined by the
    // configured API's event (with the reason logged); the other event is ignored.
    let configured = RealtimeFeature::of(&tenant.features)
        .map(|f| f.api_for(incoming.to.as_deref()))
        .unwrap_or_default();
    if configured != api {
        let reason = format!(
            "the number called is answered by the {} API (features.realtime); this {} event is left to it",
            configured.as_str(),
            event.kind
        );
        tracing::info!(name: "phone_webhook_ignored", tenant_id = %tenant.id, call_id = %incoming.call_id, kind = %event.kind, configured = configured.as_str(), reason = %reason, "phone_webhook_ignored");
        return Ok(Json(json!({"status": "ignored", "type": event.kind,
            "call_id": incoming.call_id, "reason": reason})));
    }
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
    tracing::info!(name: "realtime_call_incoming", tenant_id = %tenant.id, call_id = %incoming.call_id, api = api.as_str(), to = incoming.to.as_deref().unwrap_or(""), "realtime_call_incoming");
    let call_id = incoming.call_id.clone();
    let features = tenant.features.clone();
    tokio::spawn(answer(state.clone(), tenant.id, features, api, incoming));
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
async fn answer(
    state: AppState,
    tenant: String,
    features: Value,
    api: Api,
    incoming: IncomingCall,
) {
    let call_id = incoming.call_id.clone();
    // Held until the session has started; the semaphore is never closed.
    let Ok(setup) = Arc::clone(&state.call_setups).acquire_owned().await else {
        return;
    };
    let key = match Box::pin(state.store.get_secret(&tenant, OPENAI_API_KEY)).await {
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
    // The one-off steps are boxed: the call's task lives as long as the call, sized for its
    // largest state, and set-up's futures are far larger than the wait that follows.
    match Box::pin(prepare(&state, &tenant, &features, api, &incoming)).await {
        Err(d) => {
            tracing::warn!(name: "realtime_call_declined", call_id = %call_id, api = api.as_str(), status = d.status, reason = %d.reason, "realtime_call_declined");
            Box::pin(reject(&state, api, &key, &call_id, d.status)).await;
        }
        Ok(prepared) => run(state, tenant, key, api, incoming, prepared, setup).await,
    }
}

/// Declines a call with a SIP status, through the API that raised it.
async fn reject(state: &AppState, api: Api, key: &SecretString, call_id: &str, status: u16) {
    let api_client = state.realtime.api();
    let result = match api {
        Api::Realtime => api_client.reject(key, call_id, Some(status)).await,
        Api::Live => api_client.reject_live(key, call_id, status).await,
    };
    if let Err(e) = result {
        tracing::error!(name: "realtime_reject_failed", call_id = %call_id, api = api.as_str(), error = %e, "realtime_reject_failed");
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
    api: Api,
    incoming: &IncomingCall,
) -> Result<Prepared, Decline> {
    let internal = |e: ApiError| Decline {
        status: 480,
        reason: e.to_string(),
    };
    let feature = RealtimeFeature::of(features).map_err(|reason| Decline {
        status: 480,
        reason,
    })?;
    let routed = feature.agent_for(incoming.to.as_deref());
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
    let mut plan = build_plan(
        state,
        tenant,
        &incoming.call_id,
        &feature,
        api,
        &agent,
        &config,
    )
    .await?;
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
    api: Api,
    agent: &str,
    config: &switchboard_runtime::CallConfig,
) -> Result<CallPlan, Decline> {
    let internal = |e: ApiError| Decline {
        status: 480,
        reason: e.to_string(),
    };
    // OpenAI calls the call's own MCP endpoint with a credential good for this call alone.
    // GPT-Live's backend takes function tools: MCP tools there are unverified.
    let mcp =
        match (
            &feature.public_url,
            feature.mcp_agents.is_empty() || api == Api::Live,
        ) {
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
            let toolset = crate::toolset::realtime_toolset(config, &a.name);
            let tool_choice = match &feature.tool_choice {
                Some(c) => json!(c),
                None => toolset.get("tool_choice").cloned().unwrap_or(json!("auto")),
            };
            let mut profile = AgentProfile {
                instructions: a.instructions.clone(),
                tools: toolset.get("tools").cloned().unwrap_or(json!([])),
                tool_choice,
                backend_model: a
                    .live
                    .as_ref()
                    .and_then(|l| l.backend_model.clone())
                    .or(feature.backend_model.clone()),
                parallel_tool_calls: feature.parallel_tool_calls.unwrap_or(true),
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
    let live = (api == Api::Live).then(|| {
        let settings = first.live.clone().unwrap_or_default();
        LiveStart {
            model: settings
                .model
                .or(feature.live_model.clone())
                .unwrap_or_else(|| DEFAULT_LIVE_MODEL.to_owned()),
            voice_instructions: settings.voice_instructions,
            voice: settings
                .voice
                .or(first.voice.clone())
                .or(feature.voice.clone()),
        }
    });
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
        live,
    })
}

async fn run(
    state: AppState,
    tenant: String,
    key: SecretString,
    api: Api,
    incoming: IncomingCall,
    prepared: Prepared,
    setup: tokio::sync::OwnedSemaphorePermit,
) {
    let call_id = incoming.call_id.clone();
    let Some((sink, opened)) = state.realtime.open(&call_id, key.clone(), api) else {
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
    let owner = (state.node.id.as_str(), door_of(api));
    match Box::pin(state.store.create_call_within(
        &tenant,
        &call,
        &prepared.pinned,
        &ctx,
        cap,
        owner,
    ))
    .await
    {
        Ok(Some(_)) => {}
        Ok(None) => {
            tracing::warn!(name: "realtime_call_declined", call_id = %call_id, status = 486, reason = "the tenant's live call limit (max_calls_per_tenant) is reached", "realtime_call_declined");
            state.realtime.forget(&call_id);
            Box::pin(reject(&state, api, &key, &call_id, 486)).await;
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
    let session = match Box::pin(CallSession::start_with_context(call, ctx, deps)).await {
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
        activity: Default::default(),
    }));
    // Set up: the accept and the socket that follow are OpenAI's round trips, not ours.
    drop(setup);
    let end = state
        .realtime
        .run(opened, prepared.plan, session.clone())
        .await;
    Box::pin(finish(&state, &tenant, &call_id, &session, end)).await;
}

/// The `door` a call answered by `api` is recorded with (a new owner re-attaches by it).
pub fn door_of(api: Api) -> Door {
    match api {
        Api::Realtime => Door::Realtime,
        Api::Live => Door::Live,
    }
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
        journal: state.call_journal(tenant, fence),
        options: SessionOptions {
            hold_terminal_effects: true,
            answer_before_journal: true,
            max_handoffs: state.config.limits.max_handoffs,
            records: state.config.records,
            commit_retry: state.config.commit_retry,
            warm_upstreams: state.config.warm_upstreams,
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

/// Takes over a live Realtime or GPT-Live call (`door`) whose node died (this node now owns it
/// with fencing token `fence`): restores its session from the journal, re-attaches its
/// WebSocket or sideband, and answers the
/// function calls still pending (resumed from their checkpoints, or run again when they never
/// reached an effect). The caller hears a pause, not a dead line.
pub(crate) async fn resume_call(
    state: &AppState,
    tenant: &str,
    call_id: &str,
    fence: i64,
    door: Door,
) -> ApiResult<Arc<LiveCall>> {
    let api = if door == Door::Live {
        Api::Live
    } else {
        Api::Realtime
    };
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
    let feature = RealtimeFeature::of(&tenant_row.features).map_err(ApiError::bad_request)?;
    let config = crate::calls::pinned_config(state, tenant, &row.pinned).await?;
    let plan = build_plan(state, tenant, call_id, &feature, api, &row.agent, &config)
        .await
        .map_err(|d| ApiError::internal(d.reason))?;
    let Some((sink, opened)) = state.realtime.open(call_id, key, api) else {
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
    tracing::info!(name: "realtime_call_taken_over", call_id = %call_id, api = api.as_str(), fence, "realtime_call_taken_over");
    metrics::counter!("switchboard_realtime_takeovers_total").increment(1);
    let live = Arc::new(LiveCall {
        tenant_id: tenant.to_owned(),
        session: session.clone(),
        sink: requests,
        realtime: true,
        activity: Default::default(),
    });
    state.calls.insert(Arc::clone(&live));
    let (state, tenant, call_id) = (state.clone(), tenant.to_owned(), call_id.to_owned());
    tokio::spawn(async move {
        let end = state.realtime.resume(opened, plan, session.clone()).await;
        Box::pin(finish(&state, &tenant, &call_id, &session, end)).await;
    });
    Ok(live)
}

/// The door a server's state holds: REST client and live calls.
pub fn door(config: &crate::ServerConfig) -> Arc<RealtimeDoor> {
    RealtimeDoor::new(
        switchboard_realtime::CallsApi::new(config.openai.clone()),
        driver_options(config.lease),
    )
}

/// A taken-over call continues an answer at most three leases old (a dead node is found within
/// a lease and a sweep), and never less than the default window.
fn driver_options(lease: std::time::Duration) -> switchboard_realtime::DriverOptions {
    let defaults = switchboard_realtime::DriverOptions::default();
    switchboard_realtime::DriverOptions {
        continue_within: defaults.continue_within.max(lease.saturating_mul(3)),
        ..defaults
    }
}
