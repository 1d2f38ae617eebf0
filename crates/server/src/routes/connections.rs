//! OAuth2 connections of toolkits (`auth_type: oauth2`, Google Calendar): start a connect flow
//! for an agent, the provider's callback, list a tenant's connections, disconnect.
//!
//! The `state` sent to the provider is random, stored only as its hash, bound to the tenant,
//! agent and toolkit that started the flow, single use and valid for ten minutes; the PKCE
//! verifier is stored sealed beside it. The callback is the one route without an API key: the
//! operator's browser arrives from the provider, and the state alone says whose flow it is.
//! No token appears in any answer or log line.

use axum::Json;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use switchboard_core::toolkits::find;
use switchboard_store::{ConnectionInfo, OAuthTokens};
use switchboard_toolkits::oauth::{GrantError, Tokens, now_ms, rfc3339_ms};
use utoipa::{IntoParams, ToSchema};

use crate::auth::Tenant;
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::extract::{Path, Query};
use crate::state::AppState;

/// How long a started connect flow may take.
const STATE_TTL_MS: i64 = 10 * 60 * 1000;

/// A started connect flow.
#[derive(Debug, Serialize, ToSchema)]
pub struct ConnectStart {
    /// Open this in a browser, sign in and consent; the provider then returns to
    /// `/v1/oauth/callback`, which stores the connection.
    pub authorize_url: String,
    /// RFC 3339; after it, start again.
    pub expires_at: String,
}

/// One connection; never its tokens.
#[derive(Debug, Serialize, ToSchema)]
pub struct ConnectionView {
    pub agent: String,
    pub toolkit: String,
    /// `connected`, or `broken`: the provider refused to renew the access (revoked or
    /// expired); connect again. A broken connection answers the model "calendar not connected".
    pub status: String,
    /// Why it broke.
    pub error: Option<String>,
    pub created_at: String,
    pub updated_at: String,
}

impl From<ConnectionInfo> for ConnectionView {
    fn from(c: ConnectionInfo) -> Self {
        ConnectionView {
            agent: c.agent,
            toolkit: c.toolkit,
            status: c.status,
            error: c.error,
            created_at: c.created_at,
            updated_at: c.updated_at,
        }
    }
}

/// A tenant's connections.
#[derive(Debug, Serialize, ToSchema)]
pub struct ConnectionList {
    pub items: Vec<ConnectionView>,
}

/// What the provider passes back to the callback.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct CallbackQuery {
    /// The flow's `state`.
    pub state: Option<String>,
    /// The authorization code.
    pub code: Option<String>,
    /// Set instead of `code` when the user declined (`access_denied`) or the request was wrong.
    pub error: Option<String>,
}

/// The OAuth client serving `toolkit`, or why there is none.
fn tokens_for<'a>(state: &'a AppState, toolkit: &str) -> ApiResult<&'a Tokens> {
    let kit = find(toolkit).ok_or_else(|| ApiError::not_found(format!("toolkit `{toolkit}`")))?;
    if kit.auth_type != Some("oauth2") {
        return Err(ApiError::bad_request(format!(
            "toolkit `{toolkit}` does not connect with OAuth2 (its auth_type is {}); give its credentials in the agent tool's sensitive_config",
            kit.auth_type.unwrap_or("none")
        )));
    }
    state.google_tokens.as_ref().ok_or_else(|| {
        ApiError::bad_request(format!(
            "this server has no OAuth client for `{toolkit}`; the operator must start `switchboard serve` with --google-client-id, --google-client-secret and --public-url"
        ))
    })
}

#[utoipa::path(post, path = "/v1/agents/{name}/connections/{toolkit}", tag = "toolkits", security(("bearer" = [])),
    responses((status = 201, body = ConnectStart, description = "Open `authorize_url` to consent"),
        (status = 400, body = ErrorBody, description = "The toolkit does not use OAuth2, or this server has no client for it"),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody, description = "Too many connect flows under way")))]
pub async fn start_connection(
    State(state): State<AppState>,
    tenant: Tenant,
    Path((agent, toolkit)): Path<(String, String)>,
) -> ApiResult<(StatusCode, Json<ConnectStart>)> {
    let tokens = tokens_for(&state, &toolkit)?;
    if state.store.get_agent(&tenant.id, &agent).await?.is_none() {
        return Err(ApiError::not_found(format!("agent `{agent}`")));
    }
    let now = now_ms();
    let expires = now + STATE_TTL_MS;
    let (flow_state, verifier) = state
        .store
        .begin_oauth(&tenant.id, &agent, &toolkit, now, expires)
        .await?;
    let url = tokens
        .client()
        .provider
        .authorize_url(&flow_state, &verifier);
    tracing::info!(name: "oauth_connect_started", tenant_id = %tenant.id, agent = %agent, toolkit = %toolkit, "oauth_connect_started");
    Ok((
        StatusCode::CREATED,
        Json(ConnectStart {
            authorize_url: url.to_string(),
            expires_at: rfc3339_ms(expires),
        }),
    ))
}

#[utoipa::path(get, path = "/v1/oauth/callback", tag = "toolkits", params(CallbackQuery),
    responses((status = 200, description = "Connected", content_type = "text/plain", body = String),
        (status = 400, body = ErrorBody, description = "Unknown, used or expired state; consent declined"),
        (status = 502, body = ErrorBody, description = "The provider refused or did not answer the code exchange")))]
pub async fn oauth_callback(
    State(state): State<AppState>,
    Query(q): Query<CallbackQuery>,
) -> ApiResult<Response> {
    let flow_state = q.state.unwrap_or_default();
    let pending = state
        .store
        .take_oauth_state(&flow_state, now_ms())
        .await?
        .ok_or_else(|| {
            ApiError::bad_request(
                "this connect link is unknown, used already or expired; start the connection again (POST /v1/agents/{name}/connections/{toolkit})",
            )
        })?;
    if let Some(err) = q.error {
        let code: String = err
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
            .take(40)
            .collect();
        return Err(ApiError::bad_request(format!(
            "the provider did not grant access ({code}); start the connection again and consent to the calendar scopes"
        )));
    }
    let code = q
        .code
        .filter(|c| !c.is_empty() && c.len() <= 2048)
        .ok_or_else(|| {
            ApiError::bad_request("the provider's answer has no `code`; start the connection again")
        })?;
    let tokens = tokens_for(&state, &pending.toolkit)?;
    let grant = tokens
        .client()
        .exchange_code(&code, &pending.verifier)
        .await
        .map_err(|e| {
            let why = match &e {
                GrantError::Refused(m) | GrantError::Unavailable(m) => m.clone(),
            };
            ApiError::new(
                StatusCode::BAD_GATEWAY,
                "upstream_unavailable",
                format!("{why}; start the connection again"),
            )
        })?;
    let stored = OAuthTokens {
        access_token: grant.access_token,
        refresh_token: grant.refresh_token,
        expires_at_ms: now_ms() + grant.expires_in_s * 1000,
    };
    state
        .store
        .put_connection(
            &pending.tenant_id,
            &pending.agent,
            &pending.toolkit,
            &stored,
        )
        .await?;
    tracing::info!(name: "oauth_connected", tenant_id = %pending.tenant_id, agent = %pending.agent, toolkit = %pending.toolkit, "oauth_connected");
    Ok((
        StatusCode::OK,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        format!(
            "Connected: agent `{}` can now use {}. You can close this page.\n",
            pending.agent, pending.toolkit
        ),
    )
        .into_response())
}

#[utoipa::path(get, path = "/v1/connections", tag = "toolkits", security(("bearer" = [])),
    responses((status = 200, body = ConnectionList)))]
pub async fn list_connections(
    State(state): State<AppState>,
    tenant: Tenant,
) -> ApiResult<Json<ConnectionList>> {
    let items = state.store.list_connections(&tenant.id).await?;
    Ok(Json(ConnectionList {
        items: items.into_iter().map(ConnectionView::from).collect(),
    }))
}

#[utoipa::path(delete, path = "/v1/agents/{name}/connections/{toolkit}", tag = "toolkits", security(("bearer" = [])),
    responses((status = 204, description = "Disconnected; the tokens are deleted"), (status = 404, body = ErrorBody)))]
pub async fn delete_connection(
    State(state): State<AppState>,
    tenant: Tenant,
    Path((agent, toolkit)): Path<(String, String)>,
) -> ApiResult<StatusCode> {
    if state
        .store
        .delete_connection(&tenant.id, &agent, &toolkit)
        .await?
    {
        tracing::info!(name: "oauth_disconnected", tenant_id = %tenant.id, agent = %agent, toolkit = %toolkit, "oauth_disconnected");
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::not_found(format!(
            "agent `{agent}`'s {toolkit} connection"
        )))
    }
}
