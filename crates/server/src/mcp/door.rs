//! The MCP door: tools over MCP streamable HTTP, both protocol eras on one endpoint.
//!
//! - **Endpoints**: `/v1/agents/{name}/mcp` (an agent's tools) and `/v1/calls/{call_id}/mcp`
//!   (the tools of a live call's active agent; every `tools/call` is an invocation of that call,
//!   whichever revision the client speaks and whichever node it reaches: a node that does not
//!   serve the call passes the request on to the one that does).
//! - **Auth**: the tenant API key as `Authorization: Bearer`, checked like the REST API's (401
//!   without a valid key); the agent or call must be the key's tenant's (404 otherwise). A
//!   call's endpoint also takes that call's own credential ([`super::call_token`]).
//! - **Eras**: a 2025-11-25 client (`initialize`) gets a session; a 2026-07-28 client sends
//!   its revision on every request and is served statelessly (rmcp checks `MCP-Protocol-Version`,
//!   `Mcp-Method` and `Mcp-Name` against the body, answers `server/discover`, and refuses GET
//!   and DELETE with 405 for it).
//! - **`tools/list`**: the agent's enabled tools as the model sees them (the toolset's `mcp`
//!   format), the transfer tool included when the tenant has transfer on, `ttlMs` 30 s and
//!   `cacheScope: "private"`. For a call (its endpoint, `X-Switchboard-Call-Id`, or a session
//!   that has one) the call's pinned tools of its active agent, `ttlMs` 0: a handoff changes
//!   them (and a session is sent `notifications/tools/list_changed`).
//! - **`tools/call`** on an agent's endpoint: one call per legacy session, started by its first
//!   `tools/call` (a store row and a `CallSession`, shown by `GET /v1/calls/{id}`) and ended
//!   when the session closes (DELETE, idle timeout) or the server shuts down. A stateless
//!   request (every 2026-07-28 request, and all of them with `--mcp-stateless`) runs in a call
//!   of its own, ended when it is answered, unless `X-Switchboard-Call-Id` names a call to
//!   join (which it then does not end). Every result's `_meta` names the call
//!   (`switchboard/call_id`) so a client can pass it back; a client that wants one context
//!   across calls uses the call's endpoint.
//! - **User context**: `X-Switchboard-User`, a JSON object, becomes the call's `user` scope when
//!   the call starts.
//! - **Errors**: a tool that fails answers `isError: true` with our error JSON as its text (the
//!   `output` the model would get), invalid arguments included (so a model can correct them);
//!   a tool the agent does not have is a JSON-RPC error `-32602` (invalid params), as the MCP
//!   specification lists unknown tools among protocol errors.

use std::sync::Arc;

use axum::extract::{FromRequestParts, RawPathParams, Request, State};
use axum::http::HeaderMap;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::model::{
    CacheScope, CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock,
    Implementation, ListToolsResult, MetaObject, PaginatedRequestParams, ServerCapabilities,
    ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::transport::StreamableHttpService;
use rmcp::transport::streamable_http_server::StreamableHttpServerConfig;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde_json::{Map, Value, json};
use switchboard_core::builder::{Format, Toolset};
use switchboard_runtime::{CallConfig, Invocation};

use crate::auth::Tenant;
use crate::calls::LiveCall;
use crate::calls::{NewCall, Serving, Via, live, locate, start_call, submit_and_wait};
use crate::error::ApiError;
use crate::mcp::call_token;
use crate::mcp::sessions::{OwnedSessions, Owner, current_opener, opened_by};
use crate::ownership::FORWARDED_HEADER;
use crate::state::AppState;
use crate::toolset::agent_toolset;

/// Names an existing call for the MCP session (or, when stateless, for the request).
pub const CALL_HEADER: &str = "x-switchboard-call-id";
/// The call's `user` scope, as a JSON object.
pub const USER_HEADER: &str = "x-switchboard-user";
/// The header naming an MCP session (streamable HTTP).
const SESSION_HEADER: &str = "mcp-session-id";
/// How long an agent's tool list may be reused (`ttlMs`): a published tool version reaches
/// clients within this. A call's list has none (a handoff may change it at any moment).
const AGENT_LIST_TTL_MS: u64 = 30_000;
/// `_meta` key of a `tools/call` that sets its function call id (repeats get the first answer).
pub const META_FUNCTION_CALL_ID: &str = "switchboard/function_call_id";

/// Who is calling an MCP endpoint, put in the request's extensions by [`authenticate`].
#[derive(Debug, Clone)]
pub struct McpCaller {
    pub tenant_id: String,
    /// The path the request came to (sessions belong to one endpoint).
    pub endpoint: String,
    /// The agent of an agent endpoint; `None` on a call's endpoint (the call's active agent
    /// serves it).
    pub agent: Option<String>,
    /// The call the request's tools run in: the call endpoint's, or the one
    /// `X-Switchboard-Call-Id` names.
    pub call_id: Option<String>,
    pub user: Option<Value>,
}

/// The tower service for both MCP endpoints, authenticated by [`authenticate`].
pub fn service(state: &AppState) -> StreamableHttpService<AgentServer, OwnedSessions> {
    let settings = &state.config.mcp;
    let config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(settings.allowed_hosts.clone())
        .with_legacy_session_mode(!settings.stateless)
        .with_max_request_body_bytes(state.config.max_body_bytes)
        .with_cancellation_token(state.mcp.shutdown.child_token());
    let for_factory = state.clone();
    StreamableHttpService::new(
        // Made while serving the request that opens the session (or, stateless, the request):
        // the server remembers whose it is.
        move || Ok(AgentServer::new(for_factory.clone(), current_opener())),
        Arc::clone(&state.mcp.sessions),
        config,
    )
}

/// Which MCP endpoint a path is.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Endpoint {
    /// `/v1/agents/{name}/mcp`
    Agent(String),
    /// `/v1/calls/{call_id}/mcp`
    Call(String),
}

/// The endpoint a request was routed to, from its (decoded) path parameters.
async fn endpoint_of(state: &AppState, parts: &mut axum::http::request::Parts) -> Option<Endpoint> {
    let params = RawPathParams::from_request_parts(parts, state).await.ok()?;
    let (name, value) = params.iter().next()?;
    match name {
        "name" => Some(Endpoint::Agent(value.to_owned())),
        "call_id" => Some(Endpoint::Call(value.to_owned())),
        _ => None,
    }
}

fn caller_headers(headers: &HeaderMap) -> Result<(Option<String>, Option<Value>), ApiError> {
    let text = |name: &str| -> Result<Option<String>, ApiError> {
        headers
            .get(name)
            .map(|v| {
                v.to_str()
                    .map(str::to_owned)
                    .map_err(|_| ApiError::bad_request(format!("the {name} header is not text")))
            })
            .transpose()
    };
    let call_id = text(CALL_HEADER)?.filter(|c| !c.is_empty());
    let user = match text(USER_HEADER)? {
        None => None,
        Some(raw) => match serde_json::from_str::<Value>(&raw) {
            Ok(v @ Value::Object(_)) => Some(v),
            _ => {
                return Err(ApiError::bad_request(
                    "the X-Switchboard-User header must be a JSON object, e.g. {\"id\": \"u_42\"}",
                ));
            }
        },
    };
    Ok((call_id, user))
}

/// The tenant a request to `endpoint` acts for: a tenant key's, on either endpoint, or a call
/// token's, on the endpoint of the call it was minted for only.
async fn tenant_of(
    state: &AppState,
    parts: &mut axum::http::request::Parts,
    endpoint: &Endpoint,
) -> Result<String, ApiError> {
    let token = parts
        .headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
        .filter(|t| call_token::is_call_token(t));
    let Some(token) = token else {
        return Ok(Tenant::from_request_parts(parts, state).await?.id);
    };
    let refused = || {
        ApiError::unauthorized(
            "this call credential is not valid here: it opens only the MCP endpoint of its own call, and only while that call is live",
        )
    };
    let grant = call_token::verify(&state.store, token).ok_or_else(refused)?;
    if *endpoint != Endpoint::Call(grant.call_id.clone()) {
        return Err(refused());
    }
    // The credential expires with its call.
    match state
        .store
        .call_owner(&grant.tenant_id, &grant.call_id)
        .await?
    {
        Some(owner) if owner.status != switchboard_store::CallStatus::Ended => Ok(grant.tenant_id),
        _ => Err(refused()),
    }
}

/// Whether the request is of the 2026-07-28 era or later (it names its revision on every
/// request, and opens no session).
fn modern(headers: &HeaderMap) -> bool {
    headers
        .get("mcp-protocol-version")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v >= MODERN_REVISION)
}

/// The first revision without sessions (revisions are dates, so they compare as text).
const MODERN_REVISION: &str = "2026-07-28";

/// Checks the credential, the agent or call of the path and, when the request names an MCP
/// session, that the session was opened on this endpoint by this tenant; a call served by
/// another node gets the request passed on to it. Then hands the request to the MCP service
/// with an [`McpCaller`] in its extensions, as the session's [`Owner`] should it open one.
pub async fn authenticate(State(state): State<AppState>, request: Request, next: Next) -> Response {
    match admit(&state, request).await {
        Ok(Admitted::Here(owner, request)) => crate::mcp::streams::bounded(
            opened_by(owner, next.run(request)).await,
            state.config.mcp.max_stream,
        ),
        Ok(Admitted::Forwarded(response)) => response,
        Err(e) => e.into_response(),
    }
}

enum Admitted {
    Here(Owner, Request),
    Forwarded(Response),
}

async fn admit(state: &AppState, request: Request) -> Result<Admitted, ApiError> {
    let (mut parts, body) = request.into_parts();
    let endpoint = endpoint_of(state, &mut parts)
        .await
        .ok_or_else(|| ApiError::not_found("this path"))?;
    let tenant_id = tenant_of(state, &mut parts, &endpoint).await?;
    let (header_call, user) = caller_headers(&parts.headers)?;
    let (agent, call_id) = match &endpoint {
        Endpoint::Agent(agent) => {
            state
                .store
                .get_agent(&tenant_id, agent)
                .await?
                .ok_or_else(|| ApiError::not_found(format!("agent `{agent}`")))?;
            (Some(agent.clone()), header_call)
        }
        Endpoint::Call(call_id) => {
            if header_call.as_ref().is_some_and(|h| h != call_id) {
                return Err(ApiError::bad_request(format!(
                    "X-Switchboard-Call-Id names another call than this endpoint's (`{call_id}`); drop the header, the path names the call"
                )));
            }
            if !parts.headers.contains_key(FORWARDED_HEADER)
                && let Serving::Elsewhere(node) = locate(state, &tenant_id, call_id).await?
            {
                let response =
                    crate::ownership::forward(state, &node, (&tenant_id, call_id), parts, body)
                        .await;
                return Ok(Admitted::Forwarded(response));
            }
            (None, Some(call_id.clone()))
        }
    };
    let owner = Owner {
        tenant_id: tenant_id.clone(),
        endpoint: parts.uri.path().to_owned(),
    };
    if !state.config.mcp.stateless
        && let Some(session) = parts.headers.get(SESSION_HEADER)
        && !modern(&parts.headers)
        && !session
            .to_str()
            .is_ok_and(|id| state.mcp.sessions.owns(id, &owner))
    {
        // Another tenant's or another endpoint's session is not found, exactly like one that
        // never existed: nothing about it is told and nothing of it changes.
        return Err(ApiError::not_found(
            "MCP session (of this endpoint for this credential)",
        ));
    }
    session_room(state, &parts, &owner)?;
    parts.extensions.insert(McpCaller {
        tenant_id,
        endpoint: owner.endpoint.clone(),
        agent,
        call_id,
        user,
    });
    Ok(Admitted::Here(owner, Request::from_parts(parts, body)))
}

/// Refuses a request that would open a session (a legacy POST naming none) when the tenant has
/// as many open as it may.
fn session_room(
    state: &AppState,
    parts: &axum::http::request::Parts,
    owner: &Owner,
) -> Result<(), ApiError> {
    let max = state.config.mcp.max_sessions_per_tenant;
    if state.config.mcp.stateless
        || parts.method != axum::http::Method::POST
        || parts.headers.contains_key(SESSION_HEADER)
        || modern(&parts.headers)
        || state.mcp.sessions.count_of(&owner.tenant_id) < max
    {
        return Ok(());
    }
    Err(ApiError::new(
        axum::http::StatusCode::TOO_MANY_REQUESTS,
        "rate_limited",
        format!(
            "this tenant already has {max} open MCP sessions on this node (serve --mcp-max-sessions); close sessions it no longer uses (DELETE with their mcp-session-id) or wait for idle ones to expire"
        ),
    )
    .with_details(json!({"retry_after_s": 5, "limit": max})))
}

/// The call an MCP session runs its tools in.
#[derive(Debug)]
struct SessionCall {
    tenant_id: String,
    call_id: String,
    /// Started by this session, so ended with it.
    owned: bool,
}

/// One MCP session's server (or, when stateless, one request's).
pub struct AgentServer {
    state: AppState,
    /// Who opened the session; every request in it must come from the same tenant and agent
    /// (the door's middleware already refuses others; this holds should a request slip past).
    owner: Option<Owner>,
    call: tokio::sync::Mutex<Option<SessionCall>>,
}

impl std::fmt::Debug for AgentServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentServer").finish_non_exhaustive()
    }
}

impl AgentServer {
    fn new(state: AppState, owner: Option<Owner>) -> Self {
        AgentServer {
            state,
            owner,
            call: tokio::sync::Mutex::new(None),
        }
    }

    /// Refuses a request from anyone but the session's owner.
    fn check_owner(&self, caller: &McpCaller) -> Result<(), McpError> {
        match &self.owner {
            Some(o) if o.tenant_id == caller.tenant_id && o.endpoint == caller.endpoint => Ok(()),
            _ => Err(McpError::invalid_request(
                "this MCP session was opened on another endpoint or for another key; open a session of your own",
                None,
            )),
        }
    }

    /// The session's call: the one it has, the one the request names, or a new one.
    async fn call_for(
        &self,
        caller: &McpCaller,
        parent: Option<switchboard_runtime::TraceParent>,
    ) -> Result<Arc<LiveCall>, McpError> {
        self.check_owner(caller)?;
        let mut slot = self.call.lock().await;
        if let Some(c) = slot.as_ref() {
            return live(&self.state, &c.tenant_id, &c.call_id)
                .await
                .map_err(call_error);
        }
        let (live, owned) = match &caller.call_id {
            Some(id) => (
                live(&self.state, &caller.tenant_id, id)
                    .await
                    .map_err(call_error)?,
                false,
            ),
            None => {
                let agent = caller.agent.clone().ok_or_else(|| {
                    McpError::internal_error("a call's endpoint without its call", None)
                })?;
                let started = start_call(
                    &self.state,
                    &caller.tenant_id,
                    NewCall {
                        agent: Some(agent.clone()),
                        call_id: None,
                        from: None,
                        to: None,
                        user: caller.user.clone(),
                    },
                    parent,
                )
                .await
                .map_err(call_error)?;
                tracing::info!(name: "mcp_call_started", call_id = %started.call_id, agent = %agent, "mcp_call_started");
                let live = self
                    .state
                    .calls
                    .get(&caller.tenant_id, &started.call_id)
                    .ok_or_else(|| McpError::internal_error("the new call is gone", None))?;
                (live, true)
            }
        };
        *slot = Some(SessionCall {
            tenant_id: caller.tenant_id.clone(),
            call_id: live.session.call_id().to_owned(),
            owned,
        });
        Ok(live)
    }

    /// The session's live call, if it has one yet.
    async fn current_call(&self) -> Option<Arc<LiveCall>> {
        let slot = self.call.lock().await;
        let c = slot.as_ref()?;
        self.state.calls.get(&c.tenant_id, &c.call_id)
    }
}

/// A door error for an MCP client: the API's message, as a JSON-RPC error.
fn call_error(e: ApiError) -> McpError {
    let data = Some(json!({"code": e.code, "status": e.status.as_u16()}));
    if e.status.is_client_error() {
        McpError::invalid_request(e.message, data)
    } else {
        McpError::internal_error(e.message, data)
    }
}

fn caller(context: &RequestContext<RoleServer>) -> Result<McpCaller, McpError> {
    context
        .extensions
        .get::<axum::http::request::Parts>()
        .and_then(|p| p.extensions.get::<McpCaller>())
        .cloned()
        .ok_or_else(|| McpError::internal_error("the request was not authenticated", None))
}

/// Renders functions in the toolset's `mcp` format and reads them back as rmcp tools.
fn mcp_tools(toolset: &Toolset) -> Vec<Tool> {
    let rendered = toolset.render(Format::Mcp);
    rendered
        .get("tools")
        .and_then(Value::as_array)
        .map(|tools| {
            tools
                .iter()
                .filter_map(|t| serde_json::from_value(t.clone()).ok())
                .collect()
        })
        .unwrap_or_default()
}

/// The tools of one agent of a live call, as pinned when it started.
fn pinned_tools(config: &CallConfig, agent: &str) -> Vec<Tool> {
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
        .map(|t| mcp_tools(&t))
        .unwrap_or_default()
}

fn random_id() -> String {
    std::iter::repeat_with(fastrand::alphanumeric)
        .take(24)
        .collect()
}

impl ServerHandler for AgentServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        )
        .with_server_info(Implementation::new("switchboard", env!("CARGO_PKG_VERSION")))
        .with_instructions(
            "The agent's tools. Calls of one session share one Switchboard call (its context and record); results' _meta names it.",
        )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let caller = caller(&context)?;
        self.check_owner(&caller)?;
        let call = match (self.current_call().await, &caller.call_id) {
            (Some(live), _) => Some(live),
            (None, Some(id)) => Some(
                live(&self.state, &caller.tenant_id, id)
                    .await
                    .map_err(call_error)?,
            ),
            (None, None) => None,
        };
        if let Some(live) = call {
            let snapshot = live.session.snapshot().await.ok_or_else(|| {
                McpError::invalid_request(
                    format!("call `{}` has ended", live.session.call_id()),
                    None,
                )
            })?;
            let config = live.session.config();
            // A handoff changes the list at any moment: clients list again every time.
            return Ok(ListToolsResult::with_all_items(pinned_tools(
                &config,
                snapshot.context.active_agent(),
            ))
            .with_ttl_ms(0)
            .with_cache_scope(CacheScope::Private));
        }
        let agent = caller
            .agent
            .as_deref()
            .ok_or_else(|| McpError::internal_error("a call's endpoint without its call", None))?;
        let toolset = agent_toolset(&self.state, &caller.tenant_id, agent, false, None)
            .await
            .map_err(call_error)?;
        Ok(ListToolsResult::with_all_items(mcp_tools(&toolset))
            .with_ttl_ms(AGENT_LIST_TTL_MS)
            .with_cache_scope(CacheScope::Private))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let caller = caller(&context)?;
        // The request's `_meta`: rmcp hands it to the handler in the context (moved out of
        // the params), so both are read.
        let meta = context
            .meta
            .0
            .0
            .iter()
            .chain(request.meta.iter().flat_map(|m| m.0.0.iter()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect::<serde_json::Map<String, Value>>();
        // The caller's span: its HTTP headers', else its `_meta`'s (as the MCP SDKs send it).
        let parent = context
            .extensions
            .get::<axum::http::request::Parts>()
            .and_then(|p| crate::traces::parent_of(&p.headers))
            .or_else(|| crate::traces::parent_of_meta(&meta));
        let live = self.call_for(&caller, parent.clone()).await?;
        let function_call_id = meta
            .get(META_FUNCTION_CALL_ID)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty() && s.len() <= 200)
            .map(str::to_owned)
            .unwrap_or_else(|| format!("mcp_{}", random_id()));
        let arguments = request
            .arguments
            .map(Value::Object)
            .unwrap_or_else(|| Value::Object(Map::new()));
        let call_id = live.session.call_id().to_owned();
        let invocation = Invocation {
            call_id: call_id.clone(),
            function_call_id: function_call_id.clone(),
            name: request.name.to_string(),
            arguments_json: arguments.to_string(),
            // Its own response: a client's `notifications/cancelled` interrupts just this call.
            response_id: Some(function_call_id.clone()),
            item_id: None,
        };
        // A request is asked for whole when it arrives: no model response is still being
        // spoken that a transfer or hang-up it asks for must wait for (a phone call's session
        // holds those until their response is done).
        live.session.response_done(&function_call_id);
        let answer = tokio::select! {
            answer = submit_and_wait(&self.state, &live, invocation, Via::Mcp, std::time::Instant::now(), parent) => answer.map_err(call_error)?,
            () = context.ct.cancelled() => {
                live.session.cancel_response(&function_call_id);
                return Err(McpError::internal_error("cancelled by the client", None));
            }
        };
        if answer.error.as_deref() == Some("tool_not_found") {
            let available = answer.result.get("details").cloned();
            return Err(McpError::invalid_params(
                format!(
                    "the active agent of call `{call_id}` has no tool `{}`; call one that tools/list shows",
                    request.name
                ),
                available,
            ));
        }
        if answer.handoff.is_some() {
            // The active agent changed, and with it the tools.
            let _ = context.peer.notify_tool_list_changed().await;
        }
        let mut meta = Map::new();
        meta.insert("switchboard/call_id".into(), json!(call_id));
        meta.insert(META_FUNCTION_CALL_ID.into(), json!(answer.function_call_id));
        if !answer.actions.is_empty() {
            meta.insert("switchboard/actions".into(), json!(answer.actions));
        }
        if let Some(h) = &answer.handoff {
            meta.insert("switchboard/handoff".into(), h.clone());
        }
        let content = vec![ContentBlock::text(answer.output)];
        let mut result = if answer.ok {
            CallToolResult::success(content)
        } else {
            CallToolResult::error(content)
        };
        result.meta = Some(MetaObject(meta));
        Ok(CallToolResponse::Complete(result))
    }
}

impl Drop for AgentServer {
    fn drop(&mut self) {
        // The session closed (or, stateless, the request was answered): end the call it started.
        let Some(call) = self.call.get_mut().take().filter(|c| c.owned) else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let state = self.state.clone();
        runtime.spawn(async move {
            if let Some(live) = state.calls.remove(&call.tenant_id, &call.call_id) {
                let _ = live.session.end().await;
                tracing::info!(name: "mcp_call_ended", call_id = %call.call_id, "mcp_call_ended");
            }
        });
    }
}
