//! OAuth2 connections of toolkits (`auth_type: oauth2`, Google Calendar): the link to the
//! console page that connects an agent, the provider's callback, list a tenant's connections,
//! disconnect.
//!
//! A flow starts only in a browser signed in to the tenant's console (`console/connect.rs`),
//! which sets a cookie binding the flow to that browser (`SameSite=Lax`, so it rides the
//! provider's redirect back; scoped to the callback's path). The callback is the one `/v1`
//! route without an API key: it completes a flow only for the browser holding its cookie, so
//! an authorize link sent to someone else, or a callback URL pushed into another browser,
//! connects nothing. The `state` sent to the provider is random, stored only as its hash,
//! bound to the tenant, agent and toolkit, single use and valid for ten minutes; the PKCE
//! verifier is stored sealed beside it. No token appears in any answer or log line.

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use switchboard_core::toolkits::find;
use switchboard_store::{ConnectionInfo, OAuthTake, OAuthTokens};
use switchboard_toolkits::oauth::{GrantError, OAuthProvider, Tokens, now_ms};
use utoipa::{IntoParams, ToSchema};

use crate::auth::Tenant;
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::extract::{Path, Query};
use crate::state::AppState;

/// How long a started connect flow may take.
pub(crate) const STATE_TTL_MS: i64 = 10 * 60 * 1000;

/// Where to connect an agent's toolkit.
#[derive(Debug, Serialize, ToSchema)]
pub struct ConnectStart {
    /// The console page that connects this agent: open it in a browser, sign in with one of
    /// the tenant's keys, and continue to the provider's consent. The connection completes
    /// only in that browser.
    pub connect_url: String,
    /// What to do, in words.
    pub message: String,
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
pub(crate) fn tokens_for<'a>(state: &'a AppState, toolkit: &str) -> ApiResult<&'a Tokens> {
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
    responses((status = 200, body = ConnectStart, description = "Open `connect_url` in a browser signed in to the tenant's console"),
        (status = 400, body = ErrorBody, description = "The toolkit does not use OAuth2, or this server has no client for it"),
        (status = 404, body = ErrorBody)))]
pub async fn start_connection(
    State(state): State<AppState>,
    tenant: Tenant,
    Path((agent, toolkit)): Path<(String, String)>,
) -> ApiResult<Json<ConnectStart>> {
    let tokens = tokens_for(&state, &toolkit)?;
    if state.store.get_agent(&tenant.id, &agent).await?.is_none() {
        return Err(ApiError::not_found(format!("agent `{agent}`")));
    }
    let connect_url = console_url(&tokens.client().provider, &agent, &toolkit);
    Ok(Json(ConnectStart {
        message: format!(
            "Open connect_url in a browser, sign in to the console with one of tenant `{}`'s keys, and continue to the consent page; the connection completes in that browser only, within 10 minutes of continuing.",
            tenant.id
        ),
        connect_url,
    }))
}

/// The console page connecting `agent`'s `toolkit`, at the public address the provider
/// returns browsers to (the callback's, without its `/v1/oauth/callback`).
fn console_url(provider: &OAuthProvider, agent: &str, toolkit: &str) -> String {
    let mut url = provider.redirect_url.clone();
    url.set_query(None);
    url.set_fragment(None);
    let base: Vec<String> = url
        .path_segments()
        .map(|s| s.map(str::to_owned).collect())
        .unwrap_or_default();
    let keep = match base.as_slice() {
        [prefix @ .., a, b, c] if a == "v1" && b == "oauth" && c == "callback" => prefix.to_vec(),
        _ => Vec::new(),
    };
    if let Ok(mut path) = url.path_segments_mut() {
        path.clear()
            .extend(keep.iter().filter(|s| !s.is_empty()))
            .extend(["console", "agents", agent, "connections", toolkit]);
    }
    url.to_string()
}

/// The name of the cookie binding the flow of `state` to its browser: one per flow, so two
/// flows started in one browser do not overwrite each other's.
fn flow_cookie_name(flow_state: &str) -> String {
    let digest = Sha256::digest(format!("flow-cookie\u{0}{flow_state}").as_bytes());
    let id: String = digest.iter().take(8).map(|b| format!("{b:02x}")).collect();
    format!("sb_oauth_{id}")
}

/// The `Set-Cookie` value binding a flow to the browser that starts it: sent back only to the
/// callback, on the provider's top-level redirect (`SameSite=Lax`), for as long as the flow
/// may take; `Secure` when the deployment's public address is HTTPS.
pub(crate) fn flow_cookie(provider: &OAuthProvider, flow_state: &str, binding: &str) -> String {
    cookie(provider, flow_state, binding, STATE_TTL_MS / 1000)
}

fn cookie(provider: &OAuthProvider, flow_state: &str, value: &str, max_age_s: i64) -> String {
    let secure = if provider.redirect_url.scheme() == "https" {
        "; Secure"
    } else {
        ""
    };
    format!(
        "{}={value}; Path={}; HttpOnly; SameSite=Lax; Max-Age={max_age_s}{secure}",
        flow_cookie_name(flow_state),
        provider.redirect_url.path()
    )
}

#[utoipa::path(get, path = "/v1/oauth/callback", tag = "toolkits", params(CallbackQuery),
    responses((status = 200, description = "Connected: the page names the tenant, the agent and the toolkit", content_type = "text/plain", body = String),
        (status = 400, body = ErrorBody, description = "Unknown, used or expired state; consent declined"),
        (status = 403, body = ErrorBody, description = "This browser did not start the flow (no flow cookie): nothing is connected"),
        (status = 502, body = ErrorBody, description = "The provider refused or did not answer the code exchange")))]
pub async fn oauth_callback(
    State(state): State<AppState>,
    headers: HeaderMap,
    Query(q): Query<CallbackQuery>,
) -> ApiResult<Response> {
    let flow_state = q.state.unwrap_or_default();
    let binding = crate::console::cookie_named(&headers, &flow_cookie_name(&flow_state));
    let pending = match state
        .store
        .take_oauth_state(&flow_state, binding.as_deref(), now_ms())
        .await?
    {
        OAuthTake::Taken(pending) => pending,
        OAuthTake::OtherBrowser => {
            tracing::warn!(name: "oauth_callback_other_browser", "oauth_callback_other_browser");
            return Err(ApiError::forbidden(
                "this connect link was started in another browser, and a connection completes only in the browser that started it from the tenant's console; nothing was connected. If someone sent you this link, do not use it: it would connect your account to their agent. To connect an agent, open its page in the console (Agents → the agent → Connect) and continue from there",
            ));
        }
        OAuthTake::Unknown => {
            return Err(ApiError::bad_request(
                "this connect link is unknown, used already or expired; nothing was connected. Start the connection again from the agent's page in the console",
            ));
        }
    };
    let provider = tokens_for(&state, &pending.toolkit)?
        .client()
        .provider
        .clone();
    let cleared = cookie(&provider, &flow_state, "", 0);
    let with_cleared = |mut r: Response| {
        if let Ok(v) = HeaderValue::from_str(&cleared) {
            r.headers_mut().insert(header::SET_COOKIE, v);
        }
        r
    };
    match complete(&state, &pending, q.code, q.error).await {
        Ok(()) => {
            tracing::info!(name: "oauth_connected", tenant_id = %pending.tenant_id, agent = %pending.agent, toolkit = %pending.toolkit, "oauth_connected");
            Ok(with_cleared(
                (
                    StatusCode::OK,
                    [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
                    format!(
                        "Connected: tenant `{}`, agent `{}` can now use {}. You can close this page.\n",
                        pending.tenant_id, pending.agent, pending.toolkit
                    ),
                )
                    .into_response(),
            ))
        }
        Err(e) => Ok(with_cleared(e.into_response())),
    }
}

/// Exchanges the provider's code for tokens and stores them on the flow's agent.
async fn complete(
    state: &AppState,
    pending: &switchboard_store::PendingConnect,
    code: Option<String>,
    error: Option<String>,
) -> ApiResult<()> {
    if let Some(err) = error {
        let code: String = err
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
            .take(40)
            .collect();
        return Err(ApiError::bad_request(format!(
            "the provider did not grant access ({code}); start the connection again and consent to the calendar scopes"
        )));
    }
    let code = code
        .filter(|c| !c.is_empty() && c.len() <= 2048)
        .ok_or_else(|| {
            ApiError::bad_request("the provider's answer has no `code`; start the connection again")
        })?;
    let tokens = tokens_for(state, &pending.toolkit)?;
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
    Ok(())
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
