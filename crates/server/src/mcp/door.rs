//! The MCP door: an agent's tools over MCP streamable HTTP at `/v1/agents/{name}/mcp`.
//!
//! - **Auth**: the tenant API key as `Authorization: Bearer`, checked like the REST API's (401
//!   without a valid key); the agent must be the key's tenant's (404 otherwise).
//! - **`tools/list`**: the agent's enabled tools as the model sees them (the toolset's `mcp`
//!   format), the transfer tool included when the tenant has transfer on. Once the session has a
//!   call, the call's pinned tools of its active agent (a handoff changes them, and the session
//!   is sent `notifications/tools/list_changed`).
//! - **`tools/call`**: one call per MCP session, started by the session's first `tools/call`
//!   (a store row and a `CallSession`, shown by `GET /v1/calls/{id}`) and ended when the
//!   session closes (DELETE, idle timeout) or the server shuts down. `X-Switchboard-Call-Id`
//!   attaches the session to an existing call instead (which it then does not end). With
//!   `--mcp-stateless` there are no sessions: each request without that header runs in a call
//!   of its own, ended when the request is answered. Every result's `_meta` names the call
//!   (`switchboard/call_id`) so a client can pass it back.
//! - **User context**: `X-Switchboard-User`, a JSON object, becomes the call's `user` scope when
//!   the call starts.
//! - **Errors**: a tool that fails answers `isError: true` with our error JSON as its text (the
//!   `output` the model would get), invalid arguments included (so a model can correct them);
//!   a tool the agent does not have is a JSON-RPC error `-32602` (invalid params), as the MCP
//!   specification lists unknown tools among protocol errors.

use std::sync::Arc;

use axum::extract::{FromRequestParts, Request, State};
use axum::http::HeaderMap;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, MetaObject, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
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
use crate::error::ApiError;
use crate::mcp::sessions::{OwnedSessions, Owner, current_opener, opened_by};
use crate::routes::calls::{NewCall, live, start_call, submit_and_wait};
use crate::state::AppState;
use crate::toolset::agent_toolset;

/// Names an existing call for the MCP session (or, when stateless, for the request).
pub const CALL_HEADER: &str = "x-switchboard-call-id";
/// The call's `user` scope, as a JSON object.
pub const USER_HEADER: &str = "x-switchboard-user";
/// The header naming an MCP session (streamable HTTP).
const SESSION_HEADER: &str = "mcp-session-id";
/// `_meta` key of a `tools/call` that sets its function call id (repeats get the first answer).
pub const META_FUNCTION_CALL_ID: &str = "switchboard/function_call_id";

/// Who is calling the MCP endpoint, put in the request's extensions by [`authenticate`].
#[derive(Debug, Clone)]
pub struct McpCaller {
    pub tenant_id: String,
    pub agent: String,
    pub call_id: Option<String>,
    pub user: Option<Value>,
}

/// The tower service for `/v1/agents/{name}/mcp`, authenticated by [`authenticate`].
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

/// The agent named by an MCP endpoint path.
fn agent_of(path: &str) -> Option<&str> {
    path.strip_prefix("/v1/agents/")?
        .strip_suffix("/mcp")
        .filter(|a| !a.is_empty() && !a.contains('/'))
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

/// Checks the tenant key, the agent and, when the request names an MCP session, that the session
/// is this tenant's and this agent's; then hands the request to the MCP service with an
/// [`McpCaller`] in its extensions, as the session's [`Owner`] should it open one.
pub async fn authenticate(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let (mut parts, body) = request.into_parts();
    let tenant = match Tenant::from_request_parts(&mut parts, &state).await {
        Ok(t) => t,
        Err(e) => return e.into_response(),
    };
    let Some(agent) = agent_of(parts.uri.path()).map(str::to_owned) else {
        return ApiError::not_found("this path").into_response();
    };
    match state.store.get_agent(&tenant.id, &agent).await {
        Ok(Some(_)) => {}
        Ok(None) => return ApiError::not_found(format!("agent `{agent}`")).into_response(),
        Err(e) => return ApiError::from(e).into_response(),
    }
    let (call_id, user) = match caller_headers(&parts.headers) {
        Ok(h) => h,
        Err(e) => return e.into_response(),
    };
    let owner = Owner {
        tenant_id: tenant.id,
        agent,
    };
    if !state.config.mcp.stateless
        && let Some(session) = parts.headers.get(SESSION_HEADER)
        && !session
            .to_str()
            .is_ok_and(|id| state.mcp.sessions.owns(id, &owner))
    {
        // Another tenant's or another agent's session is not found, exactly like one that
        // never existed: nothing about it is told and nothing of it changes.
        return ApiError::not_found(format!(
            "MCP session (of agent `{}` for this key)",
            owner.agent
        ))
        .into_response();
    }
    if let Err(e) = session_room(&state, &parts, &owner) {
        return e.into_response();
    }
    parts.extensions.insert(McpCaller {
        tenant_id: owner.tenant_id.clone(),
        agent: owner.agent.clone(),
        call_id,
        user,
    });
    opened_by(owner, next.run(Request::from_parts(parts, body))).await
}

/// Refuses a request that would open a session (a POST naming none) when the tenant has as many
/// open as it may.
fn session_room(
    state: &AppState,
    parts: &axum::http::request::Parts,
    owner: &Owner,
) -> Result<(), ApiError> {
    let max = state.config.mcp.max_sessions_per_tenant;
    if state.config.mcp.stateless
        || parts.method != axum::http::Method::POST
        || parts.headers.contains_key(SESSION_HEADER)
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
            Some(o) if o.tenant_id == caller.tenant_id && o.agent == caller.agent => Ok(()),
            _ => Err(McpError::invalid_request(
                "this MCP session was opened for another agent or key; open a session of your own",
                None,
            )),
        }
    }

    /// The session's call: the one it has, the one the request names, or a new one.
    async fn call_for(&self, caller: &McpCaller) -> Result<Arc<LiveCall>, McpError> {
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
                let started = start_call(
                    &self.state,
                    &caller.tenant_id,
                    NewCall {
                        agent: Some(caller.agent.clone()),
                        call_id: None,
                        from: None,
                        to: None,
                        user: caller.user.clone(),
                    },
                )
                .await
                .map_err(call_error)?;
                tracing::info!(name: "mcp_call_started", call_id = %started.call_id, agent = %caller.agent, "mcp_call_started");
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
        if let Some(live) = self.current_call().await
            && let Some(snapshot) = live.session.snapshot().await
        {
            let config = live.session.config();
            return Ok(ListToolsResult::with_all_items(pinned_tools(
                &config,
                snapshot.context.active_agent(),
            )));
        }
        let toolset = agent_toolset(&self.state, &caller.tenant_id, &caller.agent, false, None)
            .await
            .map_err(call_error)?;
        Ok(ListToolsResult::with_all_items(mcp_tools(&toolset)))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let caller = caller(&context)?;
        let live = self.call_for(&caller).await?;
        let function_call_id = request
            .meta
            .as_ref()
            .and_then(|m| m.0.0.get(META_FUNCTION_CALL_ID))
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
        let answer = tokio::select! {
            answer = submit_and_wait(&self.state, &live, invocation) => answer.map_err(call_error)?,
            () = context.ct.cancelled() => {
                live.session.cancel_response(&function_call_id);
                return Err(McpError::internal_error("cancelled by the client", None));
            }
        };
        if answer.error.as_deref() == Some("tool_not_found") {
            let available = answer.result.get("details").cloned();
            return Err(McpError::invalid_params(
                format!(
                    "agent `{}` has no tool `{}`; call one that tools/list shows",
                    caller.agent, request.name
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_agent_comes_from_the_path() {
        assert_eq!(agent_of("/v1/agents/assistant/mcp"), Some("assistant"));
        assert_eq!(agent_of("/v1/agents//mcp"), None);
        assert_eq!(agent_of("/v1/agents/a/b/mcp"), None);
        assert_eq!(agent_of("/v1/tools/x"), None);
    }
}
