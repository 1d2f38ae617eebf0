//! OAuth2 for toolkits (RFC 6749 authorization code grant with PKCE S256, RFC 7636): the
//! provider's authorize URL, the code exchange, and access tokens kept fresh.
//!
//! [`OAuthTokens`](Tokens) hands a handler a usable access token for one agent's connection:
//! it refreshes a token close to expiry (or one the provider just refused with 401) under the
//! connection's refresh lease in the database, so of several nodes only one refreshes; the
//! others wait for its result. A rotated refresh token replaces the old one; `invalid_grant`
//! marks the connection broken, and the model is told the calendar is not connected.
//!
//! Tokens live in `SecretString`s and the store's sealed column only: errors name the
//! provider's `scheme://host:port` and the OAuth error code, never a token or the provider's
//! free-text description.

use std::sync::Arc;
use std::time::Duration as StdDuration;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use reqwest::Url;
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;
use sha2::{Digest, Sha256};
use switchboard_store::{OAuthTokens, Store};

use crate::caldav::host_label;

/// Refresh an access token this long before it expires.
const REFRESH_SKEW_MS: i64 = 60_000;
/// How long one node's refresh lease lasts (longer than a token request may take).
const REFRESH_LEASE_MS: i64 = 15_000;
/// How long a node waits for another node's refresh before giving up.
const WAIT_FOR_REFRESH: StdDuration = StdDuration::from_secs(12);
/// Largest token endpoint answer read.
const MAX_TOKEN_BODY: usize = 64 * 1024;

/// A deployment's OAuth2 client at one provider: from `serve`'s flags, never from tenants.
#[derive(Debug, Clone)]
pub struct OAuthProvider {
    pub client_id: String,
    pub client_secret: SecretString,
    /// The provider's authorization endpoint (the consent page).
    pub auth_url: Url,
    /// The provider's token endpoint.
    pub token_url: Url,
    /// This deployment's callback, `…/v1/oauth/callback`, registered with the provider.
    pub redirect_url: Url,
    pub scopes: Vec<String>,
}

/// The PKCE S256 challenge of a verifier: base64url(SHA-256(verifier)), unpadded.
pub fn pkce_challenge(verifier: &SecretString) -> String {
    URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.expose_secret().as_bytes()))
}

impl OAuthProvider {
    /// The URL the operator's browser opens to consent: code flow, offline access (a refresh
    /// token), PKCE S256 and the single-use `state`.
    pub fn authorize_url(&self, state: &str, verifier: &SecretString) -> Url {
        let mut url = self.auth_url.clone();
        url.query_pairs_mut()
            .append_pair("response_type", "code")
            .append_pair("client_id", &self.client_id)
            .append_pair("redirect_uri", self.redirect_url.as_str())
            .append_pair("scope", &self.scopes.join(" "))
            .append_pair("state", state)
            .append_pair("code_challenge", &pkce_challenge(verifier))
            .append_pair("code_challenge_method", "S256")
            .append_pair("access_type", "offline")
            .append_pair("prompt", "consent");
        url
    }
}

/// What a token request got.
#[derive(Debug)]
pub struct Grant {
    pub access_token: SecretString,
    /// Present when the provider issues (or rotates) one.
    pub refresh_token: Option<SecretString>,
    pub expires_in_s: i64,
}

/// Why a token request failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GrantError {
    /// The provider refused the code or refresh token for good (`invalid_grant`): the user
    /// must connect again.
    Refused(String),
    /// The provider could not be reached or answered badly; trying later may work.
    Unavailable(String),
}

impl std::fmt::Display for GrantError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GrantError::Refused(m) | GrantError::Unavailable(m) => f.write_str(m),
        }
    }
}

#[derive(Deserialize)]
struct TokenAnswer {
    access_token: String,
    #[serde(default)]
    refresh_token: Option<String>,
    #[serde(default)]
    expires_in: Option<i64>,
}

#[derive(Deserialize)]
struct TokenRefusal {
    error: String,
}

/// The token endpoint's client.
#[derive(Debug)]
pub struct OAuthClient {
    pub provider: OAuthProvider,
    http: reqwest::Client,
}

impl OAuthClient {
    /// `http`: a client with the outbound guard (see [`crate::google::client`]).
    pub fn new(provider: OAuthProvider, http: reqwest::Client) -> Self {
        OAuthClient { provider, http }
    }

    /// Exchanges an authorization code (with its PKCE verifier) for tokens.
    pub async fn exchange_code(
        &self,
        code: &str,
        verifier: &SecretString,
    ) -> Result<Grant, GrantError> {
        self.token_request(&[
            ("grant_type", "authorization_code"),
            ("code", code),
            ("code_verifier", verifier.expose_secret()),
            ("redirect_uri", self.provider.redirect_url.as_str()),
        ])
        .await
    }

    /// Gets a new access token (and perhaps a rotated refresh token).
    pub async fn refresh(&self, refresh_token: &SecretString) -> Result<Grant, GrantError> {
        self.token_request(&[
            ("grant_type", "refresh_token"),
            ("refresh_token", refresh_token.expose_secret()),
        ])
        .await
    }

    async fn token_request(&self, fields: &[(&str, &str)]) -> Result<Grant, GrantError> {
        let p = &self.provider;
        let host = host_label(&p.token_url);
        // The form body, encoded by the URL crate's form serializer.
        let mut form = Url::parse("http://form.invalid/")
            .map_err(|_| GrantError::Unavailable("cannot encode a token request".into()))?;
        {
            let mut pairs = form.query_pairs_mut();
            for (k, v) in fields {
                pairs.append_pair(k, v);
            }
            pairs
                .append_pair("client_id", &p.client_id)
                .append_pair("client_secret", p.client_secret.expose_secret());
        }
        let body = form.query().unwrap_or_default().to_owned();
        let resp = self
            .http
            .post(p.token_url.clone())
            .header("Content-Type", "application/x-www-form-urlencoded")
            .header("Accept", "application/json")
            .body(body)
            .send()
            .await
            .map_err(|e| {
                GrantError::Unavailable(format!(
                    "the OAuth provider at {host} {}",
                    if e.is_timeout() {
                        "did not answer in time"
                    } else {
                        "could not be reached"
                    }
                ))
            })?;
        let status = resp.status();
        let text = match crate::caldav::read_capped(resp).await {
            Ok(t) if t.len() <= MAX_TOKEN_BODY => t,
            _ => {
                return Err(GrantError::Unavailable(format!(
                    "the OAuth provider at {host} sent an unreadable answer ({status})"
                )));
            }
        };
        if status.is_success() {
            let a: TokenAnswer = serde_json::from_str(&text).map_err(|_| {
                GrantError::Unavailable(format!(
                    "the OAuth provider at {host} answered without an access token"
                ))
            })?;
            return Ok(Grant {
                access_token: SecretString::from(a.access_token),
                refresh_token: a.refresh_token.map(SecretString::from),
                expires_in_s: a.expires_in.unwrap_or(3600).clamp(0, 366 * 86_400),
            });
        }
        // Only the error code is kept: descriptions are free text from outside.
        let code = serde_json::from_str::<TokenRefusal>(&text)
            .map(|r| r.error)
            .unwrap_or_default();
        let code: String = code
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
            .take(40)
            .collect();
        match code.as_str() {
            "invalid_grant" => Err(GrantError::Refused(format!(
                "the OAuth provider at {host} refused the grant (invalid_grant: revoked, expired or already used)"
            ))),
            "invalid_client" | "unauthorized_client" => Err(GrantError::Unavailable(format!(
                "the OAuth provider at {host} refused this server's client credentials ({code}); the deployment's client id and secret must be fixed"
            ))),
            _ => Err(GrantError::Unavailable(format!(
                "the OAuth provider at {host} refused the token request ({status}{}{code})",
                if code.is_empty() { "" } else { ", " }
            ))),
        }
    }
}

/// Why no access token could be had.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenError {
    /// No connection, or a broken one: the operator must connect the calendar (again).
    NotConnected(String),
    /// The provider or the database failed; a later try may work.
    Unavailable(String),
}

/// Access tokens of agents' connections, refreshed once across nodes.
#[derive(Debug, Clone)]
pub struct Tokens {
    store: Store,
    client: Arc<OAuthClient>,
    /// This process's name in refresh leases.
    holder: String,
}

/// Now, in epoch milliseconds.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// Epoch milliseconds as RFC 3339 (UTC).
pub fn rfc3339_ms(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
        .unwrap_or_default()
}

impl Tokens {
    pub fn new(store: Store, client: Arc<OAuthClient>) -> Self {
        let holder: String = std::iter::repeat_with(fastrand::alphanumeric)
            .take(16)
            .collect();
        Tokens {
            store,
            client,
            holder,
        }
    }

    /// The OAuth client (for the connect flow's code exchange).
    pub fn client(&self) -> &OAuthClient {
        &self.client
    }

    /// A usable access token for the agent's `toolkit` connection. `refused`: the token the
    /// provider just answered 401 to, which must be replaced even if not yet expired.
    pub async fn access_token(
        &self,
        tenant: &str,
        agent: &str,
        toolkit: &str,
        refused: Option<&SecretString>,
    ) -> Result<SecretString, TokenError> {
        let waited_until = tokio::time::Instant::now() + WAIT_FOR_REFRESH;
        loop {
            let db = |e: switchboard_store::StoreError| {
                tracing::warn!(name: "oauth_store_failed", error = %e, "oauth_store_failed");
                TokenError::Unavailable(
                    "the calendar's connection could not be read; try again in a moment".into(),
                )
            };
            let conn = self
                .store
                .connection(tenant, agent, toolkit)
                .await
                .map_err(db)?
                .ok_or_else(|| {
                    TokenError::NotConnected(format!("agent `{agent}` has no {toolkit} connection"))
                })?;
            if conn.status != "connected" {
                return Err(TokenError::NotConnected(format!(
                    "agent `{agent}`'s {toolkit} connection is broken"
                )));
            }
            let now = now_ms();
            let stale = refused
                .is_some_and(|r| r.expose_secret() == conn.tokens.access_token.expose_secret());
            if !stale && conn.tokens.expires_at_ms - REFRESH_SKEW_MS > now {
                return Ok(conn.tokens.access_token);
            }
            let Some(refresh_token) = conn.tokens.refresh_token.clone() else {
                return Err(TokenError::NotConnected(format!(
                    "agent `{agent}`'s {toolkit} connection has expired and holds no refresh token"
                )));
            };
            let locked = self
                .store
                .lock_connection_refresh(
                    tenant,
                    agent,
                    toolkit,
                    conn.version,
                    &self.holder,
                    now,
                    now + REFRESH_LEASE_MS,
                )
                .await
                .map_err(db)?;
            if locked {
                return self
                    .refresh(tenant, agent, toolkit, conn.version, &refresh_token)
                    .await;
            }
            // Another node refreshes (or the version moved): read again shortly.
            if tokio::time::Instant::now() >= waited_until {
                return Err(TokenError::Unavailable(
                    "the calendar's access is being renewed and that did not finish in time; try again in a moment".into(),
                ));
            }
            tokio::time::sleep(StdDuration::from_millis(50 + fastrand::u64(0..50))).await;
        }
    }

    async fn refresh(
        &self,
        tenant: &str,
        agent: &str,
        toolkit: &str,
        version: i64,
        refresh_token: &SecretString,
    ) -> Result<SecretString, TokenError> {
        tracing::info!(name: "oauth_refresh_started", tenant_id = %tenant, agent = %agent, toolkit = %toolkit, "oauth_refresh_started");
        let store_failed = |e: switchboard_store::StoreError| {
            tracing::warn!(name: "oauth_store_failed", error = %e, "oauth_store_failed");
            TokenError::Unavailable(
                "the calendar's renewed access could not be saved; try again in a moment".into(),
            )
        };
        match self.client.refresh(refresh_token).await {
            Ok(grant) => {
                let tokens = OAuthTokens {
                    access_token: grant.access_token.clone(),
                    // Rotation: a new refresh token replaces the old one, else the old stays.
                    refresh_token: Some(
                        grant.refresh_token.unwrap_or_else(|| refresh_token.clone()),
                    ),
                    expires_at_ms: now_ms() + grant.expires_in_s * 1000,
                };
                let saved = self
                    .store
                    .finish_connection_refresh(
                        tenant,
                        agent,
                        toolkit,
                        version,
                        &self.holder,
                        &tokens,
                    )
                    .await
                    .map_err(store_failed)?;
                if !saved {
                    // The lease ran out and the connection moved on (re-connected or
                    // refreshed by another node): what it holds now is the truth.
                    tracing::warn!(name: "oauth_refresh_superseded", tenant_id = %tenant, agent = %agent, "oauth_refresh_superseded");
                }
                tracing::info!(name: "oauth_refreshed", tenant_id = %tenant, agent = %agent, toolkit = %toolkit, "oauth_refreshed");
                Ok(grant.access_token)
            }
            Err(GrantError::Refused(why)) => {
                tracing::warn!(name: "oauth_connection_broken", tenant_id = %tenant, agent = %agent, toolkit = %toolkit, reason = %why, "oauth_connection_broken");
                self.store
                    .break_connection(
                        tenant,
                        agent,
                        toolkit,
                        version,
                        &format!("{why}; connect it again"),
                    )
                    .await
                    .map_err(store_failed)?;
                Err(TokenError::NotConnected(format!(
                    "agent `{agent}`'s {toolkit} access was revoked"
                )))
            }
            Err(GrantError::Unavailable(why)) => {
                tracing::warn!(name: "oauth_refresh_failed", tenant_id = %tenant, agent = %agent, reason = %why, "oauth_refresh_failed");
                let _ = self
                    .store
                    .release_connection_refresh(tenant, agent, toolkit, &self.holder)
                    .await;
                Err(TokenError::Unavailable(why))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pkce_challenge_is_unpadded_base64url_of_sha256() {
        // Computed apart: base64.urlsafe_b64encode(hashlib.sha256(v).digest()).rstrip(b"=").
        let v = SecretString::from("dBjftJeZ4CVP-mJ92K27uhbUJU1p1r_wW1gFWFOEjXk");
        assert_eq!(
            pkce_challenge(&v),
            "ngF5GsXcbwljx6u133FFr3Xht9xooA_DuaX_3QwODtc"
        );
    }
}
