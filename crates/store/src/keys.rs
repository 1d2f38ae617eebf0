//! API keys: `sb_<tenant or "admin">_<32 random url-safe characters>`, shown once at creation.
//!
//! Only the key's SHA-256 is stored (keys are 192-bit random, so a fast hash is enough: there
//! is nothing to brute-force), with the first 8 random characters for people to tell keys apart.

use std::fmt::Write as _;

use aes_gcm::aead::Generate;
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use secrecy::SecretString;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::is_fk_violation;
use crate::{Store, StoreError, now, truncate, with_pool};

/// An API key as listed: never the key itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiKey {
    /// `key_` and 16 random characters.
    pub id: String,
    /// The tenant the key acts for; `None` for an admin key.
    pub tenant_id: Option<String>,
    /// What the key is for, as its creator wrote.
    pub label: String,
    /// The first 8 random characters of the key, for display as `sb_<tenant>_<prefix>…`.
    pub prefix: String,
    /// RFC 3339.
    pub created_at: String,
    /// RFC 3339, when it was revoked; a revoked key never authenticates.
    pub revoked_at: Option<String>,
}

/// Who a request acts as, once its API key is known.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Principal {
    /// The key used.
    pub key_id: String,
    /// The tenant the key acts for; `None` for an admin key.
    pub tenant_id: Option<String>,
}

type KeyRow = (
    String,
    Option<String>,
    String,
    String,
    String,
    Option<String>,
);

fn key_from_row((id, tenant_id, label, prefix, created_at, revoked_at): KeyRow) -> ApiKey {
    ApiKey {
        id,
        tenant_id,
        label,
        prefix,
        created_at,
        revoked_at,
    }
}

/// The hex SHA-256 of a key, as stored.
fn key_hash(key: &str) -> String {
    Sha256::digest(key.as_bytes())
        .iter()
        .fold(String::with_capacity(64), |mut hex, b| {
            // Writing to a String cannot fail.
            let _ = write!(hex, "{b:02x}");
            hex
        })
}

/// `n` random bytes as URL-safe base64 without padding.
pub(crate) fn random_token<const N: usize>() -> Result<String, StoreError> {
    let bytes = <[u8; N] as Generate>::try_generate().map_err(|_| StoreError::Crypto)?;
    Ok(URL_SAFE_NO_PAD.encode(bytes))
}

const MAX_LABEL: usize = 200;
/// Longer than any key this store makes; longer input is refused without a lookup.
const MAX_KEY_LEN: usize = 128;

impl Store {
    /// Creates a key for `tenant_id` (`None`: an admin key) and returns it with its plaintext,
    /// which is not stored and cannot be shown again.
    pub async fn create_api_key(
        &self,
        tenant_id: Option<&str>,
        label: &str,
    ) -> Result<(ApiKey, SecretString), StoreError> {
        if label.chars().count() > MAX_LABEL {
            return Err(StoreError::Invalid(format!(
                "an API key label can be at most {MAX_LABEL} characters"
            )));
        }
        // 24 bytes make 32 URL-safe characters; 12 bytes make a 16-character id.
        let secret = random_token::<24>()?;
        let id = format!("key_{}", random_token::<12>()?);
        let plaintext = format!("sb_{}_{secret}", tenant_id.unwrap_or("admin"));
        let prefix: String = secret.chars().take(8).collect();
        let hash = key_hash(&plaintext);
        let at = now();
        let inserted = with_pool!(self, |pool| {
            sqlx::query(
                "INSERT INTO api_keys (id, tenant_id, label, prefix, key_hash, created_at) \
                 VALUES ($1, $2, $3, $4, $5, $6)",
            )
            .bind(&id)
            .bind(tenant_id)
            .bind(label)
            .bind(&prefix)
            .bind(&hash)
            .bind(&at)
            .execute(pool)
            .await
            .map(|r| r.rows_affected())
        });
        match inserted {
            Ok(_) => {}
            Err(e) if is_fk_violation(&e) => {
                return Err(StoreError::NotFound(format!(
                    "tenant `{}`",
                    truncate(tenant_id.unwrap_or_default(), 80)
                )));
            }
            Err(e) => return Err(e.into()),
        }
        tracing::info!(name: "api_key_created", key_id = %id, tenant_id = tenant_id.unwrap_or("admin"), "api_key_created");
        let key = ApiKey {
            id,
            tenant_id: tenant_id.map(str::to_owned),
            label: label.to_owned(),
            prefix,
            created_at: at,
            revoked_at: None,
        };
        Ok((key, SecretString::from(plaintext)))
    }

    /// Who `key` acts as; `None` for an unknown or revoked key. Looks the key up by its hash.
    pub async fn authenticate(&self, key: &str) -> Result<Option<Principal>, StoreError> {
        if !key.starts_with("sb_") || key.len() > MAX_KEY_LEN {
            return Ok(None);
        }
        let hash = key_hash(key);
        let row: Option<(String, Option<String>)> = with_pool!(self, |pool| {
            sqlx::query_as(
                "SELECT id, tenant_id FROM api_keys WHERE key_hash = $1 AND revoked_at IS NULL",
            )
            .bind(&hash)
            .fetch_optional(pool)
            .await?
        });
        Ok(row.map(|(key_id, tenant_id)| Principal { key_id, tenant_id }))
    }

    /// The keys of a tenant (`None`: the admin keys), oldest first, revoked ones included.
    pub async fn list_api_keys(&self, tenant_id: Option<&str>) -> Result<Vec<ApiKey>, StoreError> {
        let rows: Vec<KeyRow> = with_pool!(self, |pool| {
            sqlx::query_as(
                "SELECT id, tenant_id, label, prefix, created_at, revoked_at FROM api_keys \
                 WHERE (tenant_id = $1 OR ($1 IS NULL AND tenant_id IS NULL)) \
                 ORDER BY created_at, id",
            )
            .bind(tenant_id)
            .fetch_all(pool)
            .await?
        });
        Ok(rows.into_iter().map(key_from_row).collect())
    }

    /// Revokes a key of a tenant (`None`: an admin key); `false` if it has no such key.
    /// Revoking a revoked key keeps its first revocation time.
    pub async fn revoke_api_key(
        &self,
        tenant_id: Option<&str>,
        key_id: &str,
    ) -> Result<bool, StoreError> {
        let at = now();
        let n = with_pool!(self, |pool| {
            sqlx::query(
                "UPDATE api_keys SET revoked_at = COALESCE(revoked_at, $3) \
                 WHERE id = $2 AND (tenant_id = $1 OR ($1 IS NULL AND tenant_id IS NULL))",
            )
            .bind(tenant_id)
            .bind(key_id)
            .bind(&at)
            .execute(pool)
            .await?
            .rows_affected()
        });
        if n > 0 {
            tracing::info!(name: "api_key_revoked", key_id = %key_id, "api_key_revoked");
        }
        Ok(n > 0)
    }
}
