//! The built-in toolkits' catalogue (seed 003's metadata): what an agent can enable as
//! `toolkit:<name>`, the config each needs, and the functions each action gives the model.

use axum::Json;
use serde::Serialize;
use serde_json::Value;
use switchboard_core::toolkits::{Toolkit, ToolkitAction, catalogue, find};
use utoipa::ToSchema;

use crate::auth::Tenant;
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::extract::Path;

/// One built-in toolkit.
#[derive(Debug, Serialize, ToSchema)]
pub struct ToolkitView {
    /// Enable it on an agent as `{"tool": "toolkit:<name>"}`.
    pub name: String,
    pub description: String,
    /// JSON Schema of the agent tool's `config`, checked when the agent is saved.
    #[schema(value_type = Object)]
    pub config_schema: Value,
    /// JSON Schema of the write-only `sensitive_config`.
    #[schema(value_type = Object)]
    pub sensitive_config_schema: Value,
    pub requires_auth: bool,
    /// `basic` or `oauth2`.
    pub auth_type: Option<String>,
    /// What the authentication needs (provider, scopes, endpoints); never a secret.
    #[schema(value_type = Option<Object>)]
    pub auth_config: Option<Value>,
    /// Each action is one function for the model, named after the action.
    pub actions: Vec<ToolkitActionView>,
}

/// One action of a toolkit.
#[derive(Debug, Serialize, ToSchema)]
pub struct ToolkitActionView {
    /// The function's name.
    pub name: String,
    pub description: String,
    /// Typed parameters: `name`, `type`, `description`, `required`, `default`, `enum`,
    /// `min_value`, `max_value`, `items`.
    #[schema(value_type = Vec<Object>)]
    pub parameters: Value,
    pub returns: String,
}

/// The catalogue.
#[derive(Debug, Serialize, ToSchema)]
pub struct ToolkitList {
    pub items: Vec<ToolkitView>,
}

fn view(t: &Toolkit) -> ToolkitView {
    ToolkitView {
        name: t.name.to_owned(),
        description: t.description.to_owned(),
        config_schema: t.config_schema.clone(),
        sensitive_config_schema: t.sensitive_config_schema.clone(),
        requires_auth: t.requires_auth,
        auth_type: t.auth_type.map(str::to_owned),
        auth_config: t.auth_config.clone(),
        actions: t.actions.iter().map(action_view).collect(),
    }
}

fn action_view(a: &ToolkitAction) -> ToolkitActionView {
    ToolkitActionView {
        name: a.name.to_owned(),
        description: a.description.to_owned(),
        parameters: a.parameters.clone(),
        returns: a.returns.to_owned(),
    }
}

#[utoipa::path(get, path = "/v1/toolkits", tag = "toolkits", security(("bearer" = [])),
    responses((status = 200, body = ToolkitList)))]
pub async fn list_toolkits(_tenant: Tenant) -> Json<ToolkitList> {
    Json(ToolkitList {
        items: catalogue().iter().map(view).collect(),
    })
}

#[utoipa::path(get, path = "/v1/toolkits/{name}", tag = "toolkits", security(("bearer" = [])),
    responses((status = 200, body = ToolkitView), (status = 404, body = ErrorBody)))]
pub async fn get_toolkit(
    _tenant: Tenant,
    Path(name): Path<String>,
) -> ApiResult<Json<ToolkitView>> {
    find(&name)
        .map(|t| Json(view(t)))
        .ok_or_else(|| ApiError::not_found(format!("toolkit `{name}`")))
}
