//! `POST /v1/tools/{name}:rollback`: a tool returns to an earlier version's definition as a new
//! version (versions are never rewritten), with a change note saying so.

use axum::Json;
use axum::extract::State;
use serde::Deserialize;
use switchboard_store::{Publish, ToolVersion};
use utoipa::ToSchema;

use super::tools::{ToolView, publish_by_key};
use crate::auth::Tenant;
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::extract::{Body, Path};
use crate::state::AppState;

/// The version to return to.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RollbackRun {
    /// An earlier version, as `GET /v1/tools/{name}/versions` lists them.
    pub version: i64,
    /// The new version's change note (at most 500 characters; default `rollback to vN`).
    pub note: Option<String>,
}

#[utoipa::path(post, path = "/v1/tools/{name}:rollback", tag = "tools", security(("bearer" = [])), request_body = RollbackRun,
    responses((status = 200, body = ToolView, description = "A new version with the earlier version's definition, now current; live calls keep theirs"),
        (status = 400, body = ErrorBody, description = "A note over 500 characters"),
        (status = 404, body = ErrorBody, description = "No such tool, or no such version of it"),
        (status = 409, body = ErrorBody, description = "The version asked for is what the current version already is")))]
pub async fn rollback_tool(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(segment): Path<String>,
    Body(run): Body<RollbackRun>,
) -> ApiResult<Json<ToolView>> {
    let name = segment
        .strip_suffix(":rollback")
        .unwrap_or(&segment)
        .to_owned();
    let publish = publish_by_key(&tenant.key_id, run.note);
    let v = rollback(&state, &tenant.id, &name, run.version, publish).await?;
    Ok(Json(v.into()))
}

/// Makes version `to` of tool `name` current again as a new version; `publish.note` defaults
/// to `rollback to v{to}`. A deleted tool comes back with that definition.
pub(crate) async fn rollback(
    state: &AppState,
    tenant: &str,
    name: &str,
    to: i64,
    mut publish: Publish,
) -> ApiResult<ToolVersion> {
    let versions = state.store.list_tool_versions(tenant, name).await?;
    let (Some(first), Some(last)) = (versions.first(), versions.last()) else {
        return Err(ApiError::not_found(format!("tool `{name}`")));
    };
    let Some(target) = versions.iter().find(|v| v.version == to) else {
        return Err(ApiError::not_found(format!(
            "version {to} of tool `{name}` (its versions are {} to {}; see GET /v1/tools/{name}/versions)",
            first.version, last.version
        )));
    };
    let current = state.store.get_tool(tenant, name).await?;
    if let Some(current) = &current
        && current.definition == target.definition
    {
        let same = if current.version == to {
            format!("version {to} is the current version of tool `{name}`")
        } else {
            format!(
                "version {to} of tool `{name}` has the same definition as the current version {}",
                current.version
            )
        };
        return Err(ApiError::conflict(format!(
            "{same}: nothing to roll back; name an earlier version that differs"
        )));
    }
    if publish.note.as_deref().is_none_or(|n| n.trim().is_empty()) {
        publish.note = Some(format!("rollback to v{to}"));
    }
    // Parse it again: the limits may have changed since it was stored.
    super::tools::parse(state, &target.definition)?;
    Ok(state
        .store
        .put_tool(tenant, &target.definition, &publish)
        .await?)
}
