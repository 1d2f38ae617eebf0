//! Tenants (admin key): create, list, get, delete, and a tenant's first API key.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::ToSchema;

use super::{PageOf, PageQuery};
use crate::auth::Admin;
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::extract::{Body, Path, Query};
use crate::routes::settings::{CreatedKey, NewKey, check_features};
use crate::state::AppState;

/// A tenant to create.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewTenant {
    /// Lowercase letters, digits and `-` (e.g. `acme-corp`).
    pub id: String,
    pub name: Option<String>,
    /// Feature configuration, e.g. `{"refer": {...}}` for call transfer.
    #[schema(value_type = Option<Object>)]
    pub features: Option<Value>,
}

/// A tenant.
#[derive(Debug, Serialize, ToSchema)]
pub struct TenantView {
    pub id: String,
    pub name: String,
    #[schema(value_type = Object)]
    pub features: Value,
    pub created_at: String,
    pub updated_at: String,
}

impl From<switchboard_store::Tenant> for TenantView {
    fn from(t: switchboard_store::Tenant) -> Self {
        TenantView {
            id: t.id,
            name: t.name,
            features: t.features,
            created_at: t.created_at,
            updated_at: t.updated_at,
        }
    }
}

#[utoipa::path(post, path = "/v1/tenants", tag = "tenants", security(("bearer" = [])), request_body = NewTenant,
    responses((status = 201, body = TenantView), (status = 400, body = ErrorBody), (status = 409, body = ErrorBody)))]
pub async fn create_tenant(
    State(state): State<AppState>,
    _admin: Admin,
    Body(new): Body<NewTenant>,
) -> ApiResult<(StatusCode, Json<TenantView>)> {
    let features = new.features.unwrap_or_else(|| Value::Object(Map::new()));
    check_features(&features)?;
    let name = new.name.unwrap_or_else(|| new.id.clone());
    let t = state.store.create_tenant(&new.id, &name, &features).await?;
    Ok((StatusCode::CREATED, Json(t.into())))
}

#[utoipa::path(get, path = "/v1/tenants", tag = "tenants", security(("bearer" = [])), params(PageQuery),
    responses((status = 200, body = PageOf<TenantView>)))]
pub async fn list_tenants(
    State(state): State<AppState>,
    _admin: Admin,
    Query(q): Query<PageQuery>,
) -> ApiResult<Json<PageOf<TenantView>>> {
    Ok(Json(state.store.list_tenants(q.page()?).await?.into()))
}

#[utoipa::path(get, path = "/v1/tenants/{tenant_id}", tag = "tenants", security(("bearer" = [])),
    responses((status = 200, body = TenantView), (status = 404, body = ErrorBody)))]
pub async fn get_tenant(
    State(state): State<AppState>,
    _admin: Admin,
    Path(id): Path<String>,
) -> ApiResult<Json<TenantView>> {
    let t = state
        .store
        .get_tenant(&id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("tenant `{id}`")))?;
    Ok(Json(t.into()))
}

#[utoipa::path(delete, path = "/v1/tenants/{tenant_id}", tag = "tenants", security(("bearer" = [])),
    responses((status = 204, description = "Deleted with everything it owned"), (status = 404, body = ErrorBody)))]
pub async fn delete_tenant(
    State(state): State<AppState>,
    _admin: Admin,
    Path(id): Path<String>,
) -> ApiResult<StatusCode> {
    if state.store.delete_tenant(&id).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::not_found(format!("tenant `{id}`")))
    }
}

#[utoipa::path(post, path = "/v1/tenants/{tenant_id}/api-keys", tag = "tenants", security(("bearer" = [])), request_body = NewKey,
    responses((status = 201, body = CreatedKey, description = "The key is shown once"), (status = 404, body = ErrorBody)))]
pub async fn create_tenant_key(
    State(state): State<AppState>,
    _admin: Admin,
    Path(id): Path<String>,
    Body(new): Body<NewKey>,
) -> ApiResult<(StatusCode, Json<CreatedKey>)> {
    state
        .store
        .get_tenant(&id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("tenant `{id}`")))?;
    let (key, secret) = state
        .store
        .create_api_key(Some(&id), new.label.as_deref().unwrap_or("default"))
        .await?;
    Ok((StatusCode::CREATED, Json(CreatedKey::new(key, &secret))))
}
