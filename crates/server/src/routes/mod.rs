//! The REST API under `/v1`: one module per resource, each handler documented for OpenAPI.

use serde::Deserialize;
use switchboard_store::{Page, Paged};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{IntoParams, Modify, OpenApi, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

pub mod agents;
pub mod alerts;
pub mod calls;
pub mod connections;
pub mod health;
pub mod items;
pub mod mcp_servers;
pub mod memory;
pub mod replay;
pub mod responses;
pub mod rollback;
pub mod settings;
pub mod tenants;
pub mod tool_methods;
pub mod toolkits;
pub mod tools;

#[derive(OpenApi)]
#[openapi(
    info(title = "Switchboard", description = "A tool runtime for voice AI agents: tools as data, function definitions for models, and the calls models make during live phone calls."),
    paths(tools::test_tool, replay::replay_tool, rollback::rollback_tool),
    modifiers(&BearerAuth),
    tags(
        (name = "tenants", description = "Tenants and their API keys (admin key)"),
        (name = "tools", description = "Tools as data, versioned"),
        (name = "agents", description = "Agents, their tools, and the toolset a model sees"),
        (name = "settings", description = "Tenant features, secrets and API keys"),
        (name = "calls", description = "Calls over HTTP: start, invoke tools, cancel, end"),
        (name = "toolkits", description = "Built-in toolkits (calendar, email, memory): their config schemas and actions; enable one on an agent as `toolkit:<name>`; connect an agent to an OAuth2 toolkit (Google Calendar)"),
        (name = "memory", description = "What the `memory` toolkit remembers about each caller: list it, delete it"),
        (name = "mcp", description = "MCP servers as tool sources: register them, list their tools, attach them to agents as `<label>/<tool>`"),
        (name = "alerts", description = "Alert rules when tools break (failure rate, p95 latency, a breaker opening, a broken connection, the live-call cap) and their history; notified as signed webhooks"),
        (name = "operations", description = "Health, readiness, metrics"),
    )
)]
struct ApiDoc;

struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .bearer_format("API key")
                    .build(),
            ),
        );
    }
}

/// Declares every `{name}` of a path template as a required string path parameter (on the path
/// item, so for all its operations; when one operation declares it itself, on each of the
/// others): without them the document names no path parameters, and clients and schema-driven
/// tools cannot fill them in.
pub fn declare_path_parameters(doc: &mut utoipa::openapi::OpenApi) {
    use utoipa::openapi::path::{Parameter, ParameterBuilder, ParameterIn};
    use utoipa::openapi::schema::{ObjectBuilder, Type};
    use utoipa::openapi::{RefOr, Required};

    let declares = |params: &Option<Vec<RefOr<Parameter>>>, name: &str| {
        params.iter().flatten().any(
            |p| matches!(p, RefOr::T(p) if p.name == name && p.parameter_in == ParameterIn::Path),
        )
    };
    for (path, item) in doc.paths.paths.iter_mut() {
        let names = path
            .split('{')
            .skip(1)
            .filter_map(|s| s.split_once('}').map(|(name, _)| name.to_owned()));
        for name in names.collect::<Vec<_>>() {
            if declares(&item.parameters, &name) {
                continue;
            }
            let param = ParameterBuilder::new()
                .name(name.clone())
                .parameter_in(ParameterIn::Path)
                .required(Required::True)
                .schema(Some(ObjectBuilder::new().schema_type(Type::String)))
                .build();
            let mut operations = [
                &mut item.get,
                &mut item.put,
                &mut item.post,
                &mut item.delete,
                &mut item.patch,
            ];
            let declared_by_one = operations.iter().any(|op| {
                op.as_ref()
                    .is_some_and(|op| declares(&op.parameters, &name))
            });
            if !declared_by_one {
                item.parameters
                    .get_or_insert_with(Vec::new)
                    .push(RefOr::T(param));
                continue;
            }
            // One operation describes it itself: each of the others gets it too.
            for op in operations.iter_mut().filter_map(|op| op.as_mut()) {
                if !declares(&op.parameters, &name) {
                    op.parameters
                        .get_or_insert_with(Vec::new)
                        .push(RefOr::T(param.clone()));
                }
            }
        }
    }
}

/// Every route, with its OpenAPI document.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(ApiDoc::openapi())
        .routes(routes!(health::healthz))
        .routes(routes!(health::readyz))
        .routes(routes!(tenants::create_tenant, tenants::list_tenants))
        .routes(routes!(tenants::get_tenant, tenants::delete_tenant))
        .routes(routes!(tenants::create_tenant_key))
        .routes(routes!(settings::create_key, settings::list_keys))
        .routes(routes!(settings::revoke_key))
        .routes(routes!(settings::get_features, settings::put_features))
        .routes(routes!(crate::phone::put_number))
        .routes(routes!(settings::list_secrets))
        .routes(routes!(settings::put_secret, settings::delete_secret))
        .routes(routes!(tools::create_tool, tools::list_tools))
        .routes(routes!(tools::validate_tool))
        .routes(routes!(
            tools::get_tool,
            tools::put_tool,
            tools::delete_tool
        ))
        // `{name}:test` and `{name}:replay` are not paths axum can route (one parameter per
        // segment, nothing after it): the handler takes the whole segment and picks the
        // operation by its suffix; the document keeps the documented paths.
        .route(
            "/v1/tools/{name}",
            axum::routing::post(tools::tool_operation),
        )
        .routes(routes!(tools::list_versions))
        .routes(routes!(tools::get_version))
        .routes(routes!(agents::list_agents))
        .routes(routes!(
            agents::get_agent,
            agents::put_agent,
            agents::delete_agent
        ))
        .routes(routes!(agents::get_toolset))
        .routes(routes!(toolkits::list_toolkits))
        .routes(routes!(toolkits::get_toolkit))
        .routes(routes!(
            connections::start_connection,
            connections::delete_connection
        ))
        .routes(routes!(connections::list_connections))
        .routes(routes!(connections::oauth_callback))
        .routes(routes!(calls::create_call, calls::list_calls))
        .routes(routes!(calls::get_call, calls::end_call))
        .routes(routes!(calls::invoke, calls::list_invocations))
        .routes(routes!(calls::cancel_response))
        .routes(routes!(mcp_servers::list_mcp_servers))
        .routes(routes!(
            mcp_servers::get_mcp_server,
            mcp_servers::put_mcp_server,
            mcp_servers::delete_mcp_server
        ))
        .routes(routes!(mcp_servers::list_mcp_server_tools))
        .routes(routes!(
            memory::get_caller_memory,
            memory::delete_caller_memory
        ))
        .routes(routes!(alerts::create_rule, alerts::list_rules))
        .routes(routes!(alerts::get_rule, alerts::delete_rule))
        .routes(routes!(alerts::history))
        .routes(routes!(crate::realtime::webhook_route))
}

/// `?limit=&after=` on list endpoints.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct PageQuery {
    /// Items per page, 1 to 200 (default 50).
    #[param(minimum = 1, maximum = 200)]
    pub limit: Option<u32>,
    /// The `next` cursor of the previous page; absent or empty: from the start.
    pub after: Option<String>,
}

impl PageQuery {
    pub fn page(&self) -> ApiResult<Page> {
        let limit = self.limit.unwrap_or(Page::DEFAULT_LIMIT);
        if !(1..=Page::MAX_LIMIT).contains(&limit) {
            return Err(ApiError::bad_request(format!(
                "limit {limit} is out of range; ask for 1 to {}",
                Page::MAX_LIMIT
            )));
        }
        Ok(Page {
            limit,
            after: self.after.clone().filter(|a| !a.is_empty()),
        })
    }
}

/// A page of items and the cursor of the next page.
#[derive(Debug, serde::Serialize, ToSchema)]
pub struct PageOf<T> {
    pub items: Vec<T>,
    /// Pass as `after` for the next page; absent on the last.
    pub next: Option<String>,
}

impl<T, U: From<T>> From<Paged<T>> for PageOf<U> {
    fn from(p: Paged<T>) -> Self {
        PageOf {
            items: p.items.into_iter().map(U::from).collect(),
            next: p.next,
        }
    }
}
