//! A tenant's own settings: API keys, feature configuration, secrets (write-only).

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use switchboard_core::transfer::ReferConfig;
use utoipa::ToSchema;

use crate::auth::Tenant;
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::extract::{Body, Path};
use crate::state::AppState;

/// A key to create.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewKey {
    /// What the key is for.
    pub label: Option<String>,
}

/// An API key as listed: never the key itself.
#[derive(Debug, Serialize, ToSchema)]
pub struct KeyView {
    pub id: String,
    pub label: String,
    /// The key's first characters, to tell keys apart.
    pub prefix: String,
    pub created_at: String,
    pub revoked_at: Option<String>,
}

impl From<switchboard_store::ApiKey> for KeyView {
    fn from(k: switchboard_store::ApiKey) -> Self {
        KeyView {
            id: k.id,
            label: k.label,
            prefix: k.prefix,
            created_at: k.created_at,
            revoked_at: k.revoked_at,
        }
    }
}

/// A new key: `key` is shown this once and never again.
#[derive(Debug, Serialize, ToSchema)]
pub struct CreatedKey {
    #[serde(flatten)]
    pub info: KeyView,
    pub key: String,
}

impl CreatedKey {
    pub fn new(k: switchboard_store::ApiKey, secret: &SecretString) -> Self {
        CreatedKey {
            info: k.into(),
            key: secret.expose_secret().to_owned(),
        }
    }
}

#[utoipa::path(post, path = "/v1/api-keys", tag = "settings", security(("bearer" = [])), request_body = NewKey,
    responses((status = 201, body = CreatedKey, description = "The key is shown once")))]
pub async fn create_key(
    State(state): State<AppState>,
    tenant: Tenant,
    Body(new): Body<NewKey>,
) -> ApiResult<(StatusCode, Json<CreatedKey>)> {
    let (key, secret) = state
        .store
        .create_api_key(Some(&tenant.id), new.label.as_deref().unwrap_or("default"))
        .await?;
    Ok((StatusCode::CREATED, Json(CreatedKey::new(key, &secret))))
}

#[utoipa::path(get, path = "/v1/api-keys", tag = "settings", security(("bearer" = [])), responses((status = 200, body = Vec<KeyView>)))]
pub async fn list_keys(
    State(state): State<AppState>,
    tenant: Tenant,
) -> ApiResult<Json<Vec<KeyView>>> {
    Ok(Json(
        state
            .store
            .list_api_keys(Some(&tenant.id))
            .await?
            .into_iter()
            .map(KeyView::from)
            .collect(),
    ))
}

#[utoipa::path(delete, path = "/v1/api-keys/{key_id}", tag = "settings", security(("bearer" = [])),
    responses((status = 204, description = "Revoked"), (status = 404, body = ErrorBody)))]
pub async fn revoke_key(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(key_id): Path<String>,
) -> ApiResult<StatusCode> {
    if state
        .store
        .revoke_api_key(Some(&tenant.id), &key_id)
        .await?
    {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::not_found(format!("API key `{key_id}`")))
    }
}

/// Checks a tenant's feature configuration: known features only, each valid.
pub fn check_features(features: &Value) -> ApiResult<()> {
    let Value::Object(map) = features else {
        return Err(ApiError::bad_request(
            "features must be a JSON object, e.g. {\"refer\": {...}}",
        ));
    };
    for (name, value) in map {
        match name.as_str() {
            "refer" => {
                if let Err(problems) = ReferConfig::parse(value) {
                    let details: Vec<Value> = problems.iter().map(|p| json!({"pointer": format!("/refer{}", p.pointer), "message": p.message, "fix": p.fix})).collect();
                    return Err(ApiError::bad_request(format!(
                        "features.refer has {} problem(s)",
                        problems.len()
                    ))
                    .with_details(json!(details)));
                }
            }
            "realtime" => {
                crate::phone::RealtimeFeature::parse(value).map_err(ApiError::bad_request)?;
            }
            other => {
                return Err(ApiError::bad_request(format!(
                    "unknown feature `{other}`; known features: refer, realtime"
                )));
            }
        }
    }
    Ok(())
}

#[utoipa::path(get, path = "/v1/features", tag = "settings", security(("bearer" = [])), responses((status = 200, body = Object)))]
pub async fn get_features(State(state): State<AppState>, tenant: Tenant) -> ApiResult<Json<Value>> {
    let t = state
        .store
        .get_tenant(&tenant.id)
        .await?
        .ok_or_else(|| ApiError::not_found("this tenant"))?;
    Ok(Json(t.features))
}

#[utoipa::path(put, path = "/v1/features", tag = "settings", security(("bearer" = [])), request_body = Object,
    responses((status = 200, body = Object), (status = 400, body = ErrorBody)))]
pub async fn put_features(
    State(state): State<AppState>,
    tenant: Tenant,
    Body(features): Body<Value>,
) -> ApiResult<Json<Value>> {
    check_features(&features)?;
    let t = state.store.set_features(&tenant.id, &features).await?;
    Ok(Json(t.features))
}

/// A secret's name and when it was set; never its value.
#[derive(Debug, Serialize, ToSchema)]
pub struct SecretView {
    pub name: String,
    pub updated_at: String,
}

/// A secret value to set.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SecretValue {
    #[schema(min_length = 1)]
    pub value: String,
}

#[utoipa::path(get, path = "/v1/secrets", tag = "settings", security(("bearer" = [])), responses((status = 200, body = Vec<SecretView>)))]
pub async fn list_secrets(
    State(state): State<AppState>,
    tenant: Tenant,
) -> ApiResult<Json<Vec<SecretView>>> {
    let names = state.store.secret_names(&tenant.id).await?;
    Ok(Json(
        names
            .into_iter()
            .map(|s| SecretView {
                name: s.name,
                updated_at: s.updated_at,
            })
            .collect(),
    ))
}

#[utoipa::path(put, path = "/v1/secrets/{name}", tag = "settings", security(("bearer" = [])), request_body = SecretValue,
    responses((status = 204, description = "Stored, sealed; it cannot be read back"), (status = 400, body = ErrorBody)))]
pub async fn put_secret(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(name): Path<String>,
    Body(v): Body<SecretValue>,
) -> ApiResult<StatusCode> {
    if v.value.is_empty() {
        return Err(ApiError::bad_request(
            "the secret's value is empty; to remove it, DELETE it",
        ));
    }
    state
        .store
        .put_secret(&tenant.id, &name, &SecretString::from(v.value))
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(delete, path = "/v1/secrets/{name}", tag = "settings", security(("bearer" = [])),
    responses((status = 204, description = "Deleted"), (status = 404, body = ErrorBody)))]
pub async fn delete_secret(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(name): Path<String>,
) -> ApiResult<StatusCode> {
    if state.store.delete_secret(&tenant.id, &name).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::not_found(format!("secret `{name}`")))
    }
}
