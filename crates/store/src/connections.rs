//! OAuth2 connections of toolkits (Google Calendar): the connect flows under way (single-use
//! `state`s with their PKCE verifier, each bound to the browser that started it) and each
//! agent's tokens, sealed, with the lease that lets one node at a time refresh them.
//!
//! Times are epoch milliseconds passed in by the caller, so tests choose the clock. A token
//! never leaves this module but in an [`OAuthTokens`] of `SecretString`s.

use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::crypto::{open_with, seal_with};
use crate::error::is_fk_violation;
use crate::keys::random_token;
use crate::{Store, StoreError, now, with_pool};

/// Connect flows a tenant may have under way at once; older ones expire.
pub const MAX_PENDING_STATES: i64 = 100;

/// A connection's tokens, opened for the one handler that uses them.
#[derive(Debug, Clone)]
pub struct OAuthTokens {
    /// The bearer token for the provider's API.
    pub access_token: SecretString,
    /// The token that gets a new access token; providers may rotate it.
    pub refresh_token: Option<SecretString>,
    /// When the access token expires (epoch ms).
    pub expires_at_ms: i64,
}

/// What the sealed column holds.
#[derive(Serialize, Deserialize)]
struct SealedTokens {
    access_token: String,
    refresh_token: Option<String>,
    expires_at_ms: i64,
}

/// A connection as listed: never its tokens.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConnectionInfo {
    /// The agent it serves.
    pub agent: String,
    /// The toolkit it authorizes (`google_calendar`).
    pub toolkit: String,
    /// `connected`, or `broken` (the provider refused the refresh: connect again).
    pub status: String,
    /// Why it broke, for the operator.
    pub error: Option<String>,
    /// RFC 3339.
    pub created_at: String,
    /// RFC 3339.
    pub updated_at: String,
}

/// A connection with its opened tokens and the version a refresh must compare.
#[derive(Debug, Clone)]
pub struct Connection {
    /// `connected` or `broken`.
    pub status: String,
    /// The tokens as stored now.
    pub tokens: OAuthTokens,
    /// Grows on each change of the tokens.
    pub version: i64,
    /// Until when (epoch ms) another node holds the refresh lease, if one does.
    pub refresh_until_ms: Option<i64>,
}

/// A connect flow just started: what goes to the provider and to the browser that started it.
#[derive(Debug, Clone)]
pub struct OAuthFlow {
    /// The single-use `state` for the authorize URL (stored only as its hash).
    pub state: String,
    /// The PKCE code verifier (stored sealed).
    pub verifier: SecretString,
    /// The value of the cookie that binds the flow to the browser that started it (stored only
    /// as its hash): the callback completes only with it.
    pub binding: SecretString,
}

/// What the callback's `state` and the browser's binding cookie found.
#[derive(Debug, Clone)]
pub enum OAuthTake {
    /// The flow, taken (it cannot be taken again).
    Taken(PendingConnect),
    /// The flow exists but this browser did not start it (no or another binding cookie): it
    /// stays as it was, for the browser that did.
    OtherBrowser,
    /// No such flow: unknown, used already or expired.
    Unknown,
}

/// A connect flow taken back by its `state`.
#[derive(Debug, Clone)]
pub struct PendingConnect {
    /// The tenant that started it.
    pub tenant_id: String,
    /// The agent to connect.
    pub agent: String,
    /// The toolkit to connect.
    pub toolkit: String,
    /// The PKCE code verifier.
    pub verifier: SecretString,
}

fn tokens_aad(tenant_id: &str, agent: &str, toolkit: &str) -> Vec<u8> {
    format!("oauth-tokens\u{0}{tenant_id}\u{0}{agent}\u{0}{toolkit}").into_bytes()
}

fn state_hash(state: &str) -> String {
    Sha256::digest(state.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

impl Store {
    fn seal_tokens(
        &self,
        tenant_id: &str,
        agent: &str,
        toolkit: &str,
        tokens: &OAuthTokens,
    ) -> Result<Vec<u8>, StoreError> {
        let plain = SealedTokens {
            access_token: tokens.access_token.expose_secret().to_owned(),
            refresh_token: tokens
                .refresh_token
                .as_ref()
                .map(|t| t.expose_secret().to_owned()),
            expires_at_ms: tokens.expires_at_ms,
        };
        let bytes = serde_json::to_vec(&plain)
            .map_err(|_| StoreError::Corrupt("connection tokens".into()))?;
        seal_with(
            self.master_key(),
            &bytes,
            &tokens_aad(tenant_id, agent, toolkit),
        )
    }

    /// Starts a connect flow: a fresh `state`, PKCE verifier and browser binding (the verifier
    /// is stored sealed, the state and the binding only as their hashes), valid until
    /// `expires_at_ms`.
    pub async fn begin_oauth(
        &self,
        tenant_id: &str,
        agent: &str,
        toolkit: &str,
        now_ms: i64,
        expires_at_ms: i64,
    ) -> Result<OAuthFlow, StoreError> {
        let state = random_token::<24>()?;
        // 48 bytes make a 64-character verifier (RFC 7636 asks for 43 to 128).
        let verifier = random_token::<48>()?;
        let binding = random_token::<32>()?;
        let hash = state_hash(&state);
        let binding_hash = state_hash(&binding);
        let sealed = seal_with(self.master_key(), verifier.as_bytes(), hash.as_bytes())?;
        with_pool!(self, |pool| {
            sqlx::query("DELETE FROM oauth_states WHERE expires_at < $1")
                .bind(now_ms)
                .execute(pool)
                .await?;
            let pending: i64 =
                sqlx::query_scalar("SELECT COUNT(*) FROM oauth_states WHERE tenant_id = $1")
                    .bind(tenant_id)
                    .fetch_one(pool)
                    .await?;
            if pending >= MAX_PENDING_STATES {
                return Err(StoreError::Conflict(format!(
                    "{pending} connect flows are under way for this tenant; finish or let them expire (10 minutes) before starting more"
                )));
            }
            let inserted = sqlx::query(
                "INSERT INTO oauth_states (state_hash, tenant_id, agent, toolkit, verifier, expires_at, binding_hash) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7)",
            )
            .bind(&hash)
            .bind(tenant_id)
            .bind(agent)
            .bind(toolkit)
            .bind(&sealed)
            .bind(expires_at_ms)
            .bind(&binding_hash)
            .execute(pool)
            .await;
            match inserted {
                Err(e) if is_fk_violation(&e) => {
                    return Err(StoreError::NotFound(format!("tenant `{tenant_id}`")));
                }
                other => {
                    other?;
                }
            }
        });
        Ok(OAuthFlow {
            state,
            verifier: SecretString::from(verifier),
            binding: SecretString::from(binding),
        })
    }

    /// Takes a connect flow back by its `state`, once, for the browser holding its `binding`:
    /// a second take, an unknown or an expired state is [`OAuthTake::Unknown`]; a flow this
    /// browser did not start is [`OAuthTake::OtherBrowser`] and is left as it was.
    pub async fn take_oauth_state(
        &self,
        state: &str,
        binding: Option<&str>,
        now_ms: i64,
    ) -> Result<OAuthTake, StoreError> {
        if state.is_empty() || state.len() > 128 {
            return Ok(OAuthTake::Unknown);
        }
        let hash = state_hash(state);
        // No binding never matches: a hash is 64 hex digits.
        let binding_hash = binding
            .filter(|b| !b.is_empty() && b.len() <= 128)
            .map_or_else(String::new, state_hash);
        let row: Option<(String, String, String, Vec<u8>, i64)> = with_pool!(self, |pool| {
            sqlx::query_as(
                "DELETE FROM oauth_states WHERE state_hash = $1 AND binding_hash = $2 \
                 RETURNING tenant_id, agent, toolkit, verifier, expires_at",
            )
            .bind(&hash)
            .bind(&binding_hash)
            .fetch_optional(pool)
            .await?
        });
        let Some((tenant_id, agent, toolkit, sealed, expires_at)) = row else {
            let pending: Option<i64> = with_pool!(self, |pool| {
                sqlx::query_scalar("SELECT expires_at FROM oauth_states WHERE state_hash = $1")
                    .bind(&hash)
                    .fetch_optional(pool)
                    .await?
            });
            return Ok(match pending {
                Some(expires_at) if expires_at >= now_ms => OAuthTake::OtherBrowser,
                _ => OAuthTake::Unknown,
            });
        };
        if expires_at < now_ms {
            return Ok(OAuthTake::Unknown);
        }
        let verifier = open_with(self.master_key(), &sealed, hash.as_bytes())?;
        let verifier = String::from_utf8(verifier)
            .map_err(|_| StoreError::Corrupt("a connect flow's verifier".into()))?;
        Ok(OAuthTake::Taken(PendingConnect {
            tenant_id,
            agent,
            toolkit,
            verifier: SecretString::from(verifier),
        }))
    }

    /// Stores the tokens of a completed connect flow: the connection is `connected`, whatever
    /// it was before.
    pub async fn put_connection(
        &self,
        tenant_id: &str,
        agent: &str,
        toolkit: &str,
        tokens: &OAuthTokens,
    ) -> Result<(), StoreError> {
        let sealed = self.seal_tokens(tenant_id, agent, toolkit, tokens)?;
        let at = now();
        let written = with_pool!(self, |pool| {
            sqlx::query(
                "INSERT INTO oauth_connections (tenant_id, agent, toolkit, status, error, tokens, version, created_at, updated_at) \
                 VALUES ($1, $2, $3, 'connected', NULL, $4, 1, $5, $5) \
                 ON CONFLICT (tenant_id, agent, toolkit) DO UPDATE SET status = 'connected', error = NULL, \
                 tokens = excluded.tokens, version = oauth_connections.version + 1, refresh_until = NULL, \
                 refresh_holder = NULL, updated_at = excluded.updated_at",
            )
            .bind(tenant_id)
            .bind(agent)
            .bind(toolkit)
            .bind(&sealed)
            .bind(&at)
            .execute(pool)
            .await
            .map(|_| ())
        });
        match written {
            Ok(()) => Ok(()),
            Err(e) if is_fk_violation(&e) => Err(StoreError::NotFound(format!("agent `{agent}`"))),
            Err(e) => Err(e.into()),
        }
    }

    /// A tenant's connections, by agent and toolkit; never their tokens.
    pub async fn list_connections(
        &self,
        tenant_id: &str,
    ) -> Result<Vec<ConnectionInfo>, StoreError> {
        type Row = (String, String, String, Option<String>, String, String);
        let rows: Vec<Row> = with_pool!(self, |pool| {
            sqlx::query_as(
                "SELECT agent, toolkit, status, error, created_at, updated_at FROM oauth_connections \
                 WHERE tenant_id = $1 ORDER BY agent, toolkit LIMIT 10000",
            )
            .bind(tenant_id)
            .fetch_all(pool)
            .await?
        });
        Ok(rows
            .into_iter()
            .map(
                |(agent, toolkit, status, error, created_at, updated_at)| ConnectionInfo {
                    agent,
                    toolkit,
                    status,
                    error,
                    created_at,
                    updated_at,
                },
            )
            .collect())
    }

    /// Removes a connection (its tokens with it); `false` if there was none.
    pub async fn delete_connection(
        &self,
        tenant_id: &str,
        agent: &str,
        toolkit: &str,
    ) -> Result<bool, StoreError> {
        let n = with_pool!(self, |pool| {
            sqlx::query(
                "DELETE FROM oauth_connections WHERE tenant_id = $1 AND agent = $2 AND toolkit = $3",
            )
            .bind(tenant_id)
            .bind(agent)
            .bind(toolkit)
            .execute(pool)
            .await?
            .rows_affected()
        });
        Ok(n > 0)
    }

    /// A connection with its tokens opened, for the handler that calls the provider.
    pub async fn connection(
        &self,
        tenant_id: &str,
        agent: &str,
        toolkit: &str,
    ) -> Result<Option<Connection>, StoreError> {
        let row: Option<(String, Vec<u8>, i64, Option<i64>)> = with_pool!(self, |pool| {
            sqlx::query_as(
                "SELECT status, tokens, version, refresh_until FROM oauth_connections \
                 WHERE tenant_id = $1 AND agent = $2 AND toolkit = $3",
            )
            .bind(tenant_id)
            .bind(agent)
            .bind(toolkit)
            .fetch_optional(pool)
            .await?
        });
        let Some((status, sealed, version, refresh_until_ms)) = row else {
            return Ok(None);
        };
        let plain = open_with(
            self.master_key(),
            &sealed,
            &tokens_aad(tenant_id, agent, toolkit),
        )?;
        let t: SealedTokens = serde_json::from_slice(&plain).map_err(|_| {
            StoreError::Corrupt(format!(
                "the tokens of agent `{agent}`'s {toolkit} connection"
            ))
        })?;
        Ok(Some(Connection {
            status,
            tokens: OAuthTokens {
                access_token: SecretString::from(t.access_token),
                refresh_token: t.refresh_token.map(SecretString::from),
                expires_at_ms: t.expires_at_ms,
            },
            version,
            refresh_until_ms,
        }))
    }

    /// Takes the refresh lease of a connection still at `version` until `until_ms`, unless
    /// another holder's lease runs past `now_ms`: `true` means this holder refreshes, once
    /// across every node sharing the database.
    #[allow(clippy::too_many_arguments)]
    pub async fn lock_connection_refresh(
        &self,
        tenant_id: &str,
        agent: &str,
        toolkit: &str,
        version: i64,
        holder: &str,
        now_ms: i64,
        until_ms: i64,
    ) -> Result<bool, StoreError> {
        let n = with_pool!(self, |pool| {
            sqlx::query(
                "UPDATE oauth_connections SET refresh_until = $1, refresh_holder = $2 \
                 WHERE tenant_id = $3 AND agent = $4 AND toolkit = $5 AND version = $6 \
                 AND status = 'connected' AND (refresh_until IS NULL OR refresh_until < $7)",
            )
            .bind(until_ms)
            .bind(holder)
            .bind(tenant_id)
            .bind(agent)
            .bind(toolkit)
            .bind(version)
            .bind(now_ms)
            .execute(pool)
            .await?
            .rows_affected()
        });
        Ok(n == 1)
    }

    /// Stores refreshed tokens if `holder` still holds the lease on `version`; the lease ends.
    pub async fn finish_connection_refresh(
        &self,
        tenant_id: &str,
        agent: &str,
        toolkit: &str,
        version: i64,
        holder: &str,
        tokens: &OAuthTokens,
    ) -> Result<bool, StoreError> {
        let sealed = self.seal_tokens(tenant_id, agent, toolkit, tokens)?;
        let at = now();
        let n = with_pool!(self, |pool| {
            sqlx::query(
                "UPDATE oauth_connections SET tokens = $1, version = version + 1, refresh_until = NULL, \
                 refresh_holder = NULL, updated_at = $2 \
                 WHERE tenant_id = $3 AND agent = $4 AND toolkit = $5 AND version = $6 AND refresh_holder = $7",
            )
            .bind(&sealed)
            .bind(&at)
            .bind(tenant_id)
            .bind(agent)
            .bind(toolkit)
            .bind(version)
            .bind(holder)
            .execute(pool)
            .await?
            .rows_affected()
        });
        Ok(n == 1)
    }

    /// Marks a connection at `version` broken (the provider refused its refresh token), with
    /// the reason the operator sees; the lease ends.
    pub async fn break_connection(
        &self,
        tenant_id: &str,
        agent: &str,
        toolkit: &str,
        version: i64,
        reason: &str,
    ) -> Result<(), StoreError> {
        let at = now();
        with_pool!(self, |pool| {
            sqlx::query(
                "UPDATE oauth_connections SET status = 'broken', error = $1, version = version + 1, \
                 refresh_until = NULL, refresh_holder = NULL, updated_at = $2 \
                 WHERE tenant_id = $3 AND agent = $4 AND toolkit = $5 AND version = $6",
            )
            .bind(crate::truncate(reason, 300))
            .bind(&at)
            .bind(tenant_id)
            .bind(agent)
            .bind(toolkit)
            .bind(version)
            .execute(pool)
            .await?;
        });
        Ok(())
    }

    /// Ends `holder`'s refresh lease without changing the tokens (the provider could not be
    /// reached), so another try need not wait for it to run out.
    pub async fn release_connection_refresh(
        &self,
        tenant_id: &str,
        agent: &str,
        toolkit: &str,
        holder: &str,
    ) -> Result<(), StoreError> {
        with_pool!(self, |pool| {
            sqlx::query(
                "UPDATE oauth_connections SET refresh_until = NULL, refresh_holder = NULL \
                 WHERE tenant_id = $1 AND agent = $2 AND toolkit = $3 AND refresh_holder = $4",
            )
            .bind(tenant_id)
            .bind(agent)
            .bind(toolkit)
            .bind(holder)
            .execute(pool)
            .await?;
        });
        Ok(())
    }
}
