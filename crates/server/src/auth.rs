//! Who is calling: a tenant key (every tenant endpoint) or the admin key (tenant management).
//! Keys arrive as `Authorization: Bearer <key>`; the store keeps only their hashes.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{StatusCode, header};

use crate::error::ApiError;
use crate::state::AppState;

/// A request made with a tenant's key; every query it makes is scoped to this tenant.
#[derive(Debug, Clone)]
pub struct Tenant {
    pub id: String,
    pub key_id: String,
}

/// A request made with the admin key.
#[derive(Debug, Clone)]
pub struct Admin {
    pub key_id: String,
}

fn bearer(parts: &Parts) -> Result<&str, ApiError> {
    let value = parts
        .headers
        .get(header::AUTHORIZATION)
        .ok_or_else(|| ApiError::unauthorized("no API key: send `Authorization: Bearer <key>`"))?;
    let value = value
        .to_str()
        .map_err(|_| ApiError::unauthorized("the Authorization header is not text"))?;
    value
        .strip_prefix("Bearer ")
        .map(str::trim)
        .filter(|k| !k.is_empty())
        .ok_or_else(|| ApiError::unauthorized("the Authorization header must be `Bearer <key>`"))
}

/// The principal behind the request's key (found once per request: a middleware that needed
/// it first leaves it in the request's extensions).
pub(crate) async fn principal(
    parts: &Parts,
    state: &AppState,
) -> Result<switchboard_store::Principal, ApiError> {
    if let Some(known) = parts.extensions.get::<switchboard_store::Principal>() {
        return Ok(known.clone());
    }
    let key = bearer(parts)?;
    state
        .store
        .authenticate(key)
        .await?
        .ok_or_else(|| ApiError::unauthorized("this API key is not valid (unknown or revoked)"))
}

impl FromRequestParts<AppState> for Tenant {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        let principal = principal(parts, state).await?;
        let Some(tenant_id) = principal.tenant_id else {
            return Err(ApiError::forbidden(
                "the admin key manages tenants; use one of the tenant's keys for this endpoint",
            ));
        };
        if let Err(retry_after) = state.limits.check_rate(&tenant_id) {
            return Err(ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                "rate_limited",
                format!("too many requests for this tenant; retry in {retry_after} s"),
            )
            .with_details(serde_json::json!({"retry_after_s": retry_after})));
        }
        Ok(Tenant {
            id: tenant_id,
            key_id: principal.key_id,
        })
    }
}

impl FromRequestParts<AppState> for Admin {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        let principal = principal(parts, state).await?;
        match principal.tenant_id {
            None => Ok(Admin {
                key_id: principal.key_id,
            }),
            Some(_) => Err(ApiError::forbidden("this endpoint needs the admin key")),
        }
    }
}
