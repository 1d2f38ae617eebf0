//! MCP servers as tool sources: a tenant registers them (URL and headers sealed, never shown
//! back) and lists their tools; agents attach a tool as `"<label>/<tool>"`.

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use switchboard_runtime::mcp::check_url;
use switchboard_store::{McpServer, McpServerConfig};
use utoipa::{IntoParams, ToSchema};

use super::{PageOf, PageQuery};
use crate::auth::Tenant;
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::extract::{Body, Path, Query};
use crate::mcp::sources::server_tools;
use crate::state::AppState;

/// An MCP server to register: `url` (streamable HTTP) or `command` (stdio, where the operator
/// allows it).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct McpServerBody {
    /// The streamable HTTP endpoint, e.g. `https://mcp.example.com/mcp`. Sealed at rest.
    pub url: Option<String>,
    /// Headers sent with every request (e.g. `Authorization`). Sealed; only names are shown.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// A program speaking MCP over stdio (needs `serve --allow-mcp-stdio`).
    pub command: Option<String>,
    #[serde(default)]
    pub args: Vec<String>,
    /// Environment variables of the stdio program. Sealed; only names are shown.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
}

/// A registered MCP server: never its URL path, headers' values or environment values.
#[derive(Debug, Serialize, ToSchema)]
pub struct McpServerView {
    pub label: String,
    /// `http` or `stdio`.
    pub transport: String,
    /// Scheme, host and port (http), or the program (stdio).
    pub endpoint: String,
    /// The names of its headers (http) or environment variables (stdio).
    pub header_names: Vec<String>,
    /// The names of its tools as last listed; attach one to an agent as `"<label>/<name>"`.
    pub tools: Option<Vec<String>>,
    pub tools_listed_at: Option<String>,
    /// Why listing its tools failed just now (on PUT), if it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tools_error: Option<String>,
    pub revision: i64,
    pub created_at: String,
    pub updated_at: String,
}

impl From<McpServer> for McpServerView {
    fn from(s: McpServer) -> Self {
        let tools = s.tools.as_ref().and_then(Value::as_array).map(|list| {
            list.iter()
                .filter_map(|t| t.get("name").and_then(Value::as_str).map(str::to_owned))
                .collect()
        });
        McpServerView {
            label: s.label,
            transport: s.transport,
            endpoint: s.endpoint,
            header_names: s.header_names,
            tools,
            tools_listed_at: s.tools_listed_at,
            tools_error: None,
            revision: s.revision,
            created_at: s.created_at,
            updated_at: s.updated_at,
        }
    }
}

/// One tool of an MCP server.
#[derive(Debug, Serialize, ToSchema)]
pub struct McpToolView {
    pub name: String,
    pub title: Option<String>,
    pub description: Option<String>,
    /// Its arguments (JSON Schema), as the model will see them.
    #[schema(value_type = Object)]
    pub input_schema: Value,
    /// The server says the tool changes nothing (`readOnlyHint`): it is a `read` tool.
    pub read_only: bool,
    /// What to write in an agent's `tools` to attach it.
    pub attach_as: String,
}

/// The tools of an MCP server.
#[derive(Debug, Serialize, ToSchema)]
pub struct McpToolList {
    pub server: String,
    pub tools: Vec<McpToolView>,
}

/// `?refresh=` of the tool list.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ToolsQuery {
    /// Ask the server now instead of using the list kept since it last announced a change.
    pub refresh: Option<bool>,
}

/// Headers the MCP client sets itself (the transport refuses custom ones).
const RESERVED_HEADERS: &[&str] = &[
    "accept",
    "content-type",
    "mcp-session-id",
    "mcp-protocol-version",
    "last-event-id",
];

fn config(state: &AppState, body: McpServerBody) -> ApiResult<McpServerConfig> {
    match (body.url, body.command) {
        (Some(url), None) => {
            if !body.args.is_empty() || !body.env.is_empty() {
                return Err(ApiError::bad_request(
                    "`args` and `env` belong to stdio servers (`command`); an http server takes `url` and `headers`",
                ));
            }
            check_url(&url, state.mcp.clients.options().allow_private_networks)
                .map_err(|e| ApiError::bad_request(format!("`url`: {e}")))?;
            for (name, value) in &body.headers {
                if RESERVED_HEADERS
                    .iter()
                    .any(|r| name.eq_ignore_ascii_case(r))
                {
                    return Err(ApiError::bad_request(format!(
                        "header `{name}` is set by the MCP protocol itself; remove it from `headers`"
                    )));
                }
                if axum::http::HeaderName::try_from(name.as_str()).is_err() {
                    return Err(ApiError::bad_request(format!(
                        "header name `{name}` is not a valid HTTP header name; use letters, digits and `-`"
                    )));
                }
                if axum::http::HeaderValue::from_str(value).is_err() {
                    return Err(ApiError::bad_request(format!(
                        "the value of header `{name}` has characters HTTP headers cannot carry (line breaks, control characters)"
                    )));
                }
            }
            Ok(McpServerConfig::Http {
                url,
                headers: body.headers,
            })
        }
        (None, Some(command)) => {
            if !state.config.mcp.allow_stdio {
                return Err(ApiError::bad_request(
                    "stdio MCP servers (`command`) are turned off on this server: register a streamable HTTP server (`url`), or ask the operator to start it with --allow-mcp-stdio",
                ));
            }
            if !body.headers.is_empty() {
                return Err(ApiError::bad_request(
                    "`headers` belong to http servers (`url`); give a stdio server `env` instead",
                ));
            }
            if command.trim().is_empty() {
                return Err(ApiError::bad_request(
                    "`command` is empty; name the program to run",
                ));
            }
            Ok(McpServerConfig::Stdio {
                command,
                args: body.args,
                env: body.env,
            })
        }
        (Some(_), Some(_)) => Err(ApiError::bad_request(
            "give `url` (streamable HTTP) or `command` (stdio), not both",
        )),
        (None, None) => Err(ApiError::bad_request(
            "give the server's `url` (streamable HTTP, e.g. https://mcp.example.com/mcp) or a stdio `command`",
        )),
    }
}

#[utoipa::path(put, path = "/v1/mcp-servers/{label}", tag = "mcp", security(("bearer" = [])), request_body = McpServerBody,
    responses((status = 200, body = McpServerView, description = "Registered; its tools were listed if it answered (`tools_error` says why not)"), (status = 400, body = ErrorBody)))]
pub async fn put_mcp_server(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(label): Path<String>,
    Body(body): Body<McpServerBody>,
) -> ApiResult<Json<McpServerView>> {
    let config = config(&state, body)?;
    state
        .store
        .put_mcp_server(&tenant.id, &label, &config)
        .await?;
    state.mcp.clients.forget(&tenant.id, &label);
    let listed = server_tools(&state, &tenant.id, &label, true).await;
    let row = state
        .store
        .get_mcp_server(&tenant.id, &label)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("MCP server `{label}`")))?;
    let mut view = McpServerView::from(row);
    view.tools_error = listed.err().map(|e| e.message);
    Ok(Json(view))
}

#[utoipa::path(get, path = "/v1/mcp-servers", tag = "mcp", security(("bearer" = [])), params(PageQuery),
    responses((status = 200, body = PageOf<McpServerView>)))]
pub async fn list_mcp_servers(
    State(state): State<AppState>,
    tenant: Tenant,
    Query(q): Query<PageQuery>,
) -> ApiResult<Json<PageOf<McpServerView>>> {
    Ok(Json(
        state
            .store
            .list_mcp_servers(&tenant.id, q.page()?)
            .await?
            .into(),
    ))
}

#[utoipa::path(get, path = "/v1/mcp-servers/{label}", tag = "mcp", security(("bearer" = [])),
    responses((status = 200, body = McpServerView), (status = 404, body = ErrorBody)))]
pub async fn get_mcp_server(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(label): Path<String>,
) -> ApiResult<Json<McpServerView>> {
    let row = state
        .store
        .get_mcp_server(&tenant.id, &label)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("MCP server `{label}`")))?;
    Ok(Json(row.into()))
}

#[utoipa::path(delete, path = "/v1/mcp-servers/{label}", tag = "mcp", security(("bearer" = [])),
    responses((status = 204, description = "Removed; agents that attached its tools no longer offer them"), (status = 404, body = ErrorBody)))]
pub async fn delete_mcp_server(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(label): Path<String>,
) -> ApiResult<StatusCode> {
    if state.store.delete_mcp_server(&tenant.id, &label).await? {
        state.mcp.clients.forget(&tenant.id, &label);
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::not_found(format!("MCP server `{label}`")))
    }
}

#[utoipa::path(get, path = "/v1/mcp-servers/{label}/tools", tag = "mcp", security(("bearer" = [])), params(ToolsQuery),
    responses((status = 200, body = McpToolList), (status = 404, body = ErrorBody), (status = 502, body = ErrorBody, description = "The server could not be reached and no earlier list is kept")))]
pub async fn list_mcp_server_tools(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(label): Path<String>,
    Query(q): Query<ToolsQuery>,
) -> ApiResult<Json<McpToolList>> {
    let tools = server_tools(&state, &tenant.id, &label, q.refresh.unwrap_or(false)).await?;
    Ok(Json(McpToolList {
        tools: tools
            .iter()
            .map(|t| McpToolView {
                name: t.name.clone(),
                title: t.title.clone(),
                description: t.description.clone(),
                input_schema: t.input_schema.clone(),
                read_only: t.read_only,
                attach_as: format!("{label}/{}", t.name),
            })
            .collect(),
        server: label,
    }))
}
