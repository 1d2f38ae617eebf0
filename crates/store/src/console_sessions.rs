//! Console sessions: a random token in the operator's cookie, stored here only as its hash with
//! the key that signed in. Every console request looks its session up, so a sign-out, a
//! revoked key or a deleted tenant ends the session on every node sharing the database.
//!
//! Times are epoch milliseconds passed in by the caller, so tests choose the clock.

use sha2::{Digest, Sha256};

use crate::error::is_fk_violation;
use crate::keys::random_token;
use crate::{Principal, Store, StoreError, with_pool};

/// Sessions one key may have open; signing in past it ends that key's oldest sessions.
pub const MAX_CONSOLE_SESSIONS_PER_KEY: i64 = 20;
/// Longer than any token this store makes; longer input is refused without a lookup.
const MAX_TOKEN_LEN: usize = 128;

fn token_hash(token: &str) -> String {
    Sha256::digest(format!("console-session\u{0}{token}").as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

impl Store {
    /// Opens a session for `key_id` until `expires_at_ms` and returns its token (for the
    /// cookie; stored only as its hash). Expired sessions of every key are removed, and the
    /// key keeps at most [`MAX_CONSOLE_SESSIONS_PER_KEY`]: the oldest others end.
    pub async fn open_console_session(
        &self,
        key_id: &str,
        now_ms: i64,
        expires_at_ms: i64,
    ) -> Result<String, StoreError> {
        let token = random_token::<32>()?;
        let hash = token_hash(&token);
        let opened = with_pool!(self, |pool| {
            let mut tx = self.begin_write(pool).await?;
            sqlx::query("DELETE FROM console_sessions WHERE expires_at <= $1")
                .bind(now_ms)
                .execute(&mut *tx)
                .await?;
            let inserted = sqlx::query(
                "INSERT INTO console_sessions (token_hash, key_id, created_at, expires_at) \
                 VALUES ($1, $2, $3, $4)",
            )
            .bind(&hash)
            .bind(key_id)
            .bind(now_ms)
            .bind(expires_at_ms)
            .execute(&mut *tx)
            .await;
            match inserted {
                Err(e) if is_fk_violation(&e) => Err(StoreError::NotFound(format!(
                    "API key `{}`",
                    crate::truncate(key_id, 80)
                ))),
                Err(e) => Err(e.into()),
                Ok(_) => {
                    // The newest others are kept, the new session besides them.
                    sqlx::query(
                        "DELETE FROM console_sessions WHERE key_id = $1 AND token_hash <> $2 \
                         AND token_hash NOT IN (SELECT token_hash FROM console_sessions \
                         WHERE key_id = $1 AND token_hash <> $2 \
                         ORDER BY created_at DESC, token_hash DESC LIMIT $3)",
                    )
                    .bind(key_id)
                    .bind(&hash)
                    .bind(MAX_CONSOLE_SESSIONS_PER_KEY - 1)
                    .execute(&mut *tx)
                    .await?;
                    tx.commit().await?;
                    Ok(())
                }
            }
        });
        opened.map(|()| token)
    }

    /// Who the session of `token` acts as: `None` once it was ended, has expired, or its key
    /// was revoked or deleted.
    pub async fn console_session(
        &self,
        token: &str,
        now_ms: i64,
    ) -> Result<Option<Principal>, StoreError> {
        if token.is_empty() || token.len() > MAX_TOKEN_LEN {
            return Ok(None);
        }
        let hash = token_hash(token);
        let row: Option<(String, Option<String>)> = with_pool!(self, |pool| {
            sqlx::query_as(
                "SELECT k.id, k.tenant_id FROM console_sessions s JOIN api_keys k ON k.id = s.key_id \
                 WHERE s.token_hash = $1 AND s.expires_at > $2 AND k.revoked_at IS NULL",
            )
            .bind(&hash)
            .bind(now_ms)
            .fetch_optional(pool)
            .await?
        });
        Ok(row.map(|(key_id, tenant_id)| Principal { key_id, tenant_id }))
    }

    /// Ends the session of `token` (a sign-out); `false` if there was none.
    pub async fn end_console_session(&self, token: &str) -> Result<bool, StoreError> {
        if token.is_empty() || token.len() > MAX_TOKEN_LEN {
            return Ok(false);
        }
        let hash = token_hash(token);
        let n = with_pool!(self, |pool| {
            sqlx::query("DELETE FROM console_sessions WHERE token_hash = $1")
                .bind(&hash)
                .execute(pool)
                .await?
                .rows_affected()
        });
        Ok(n > 0)
    }
}
