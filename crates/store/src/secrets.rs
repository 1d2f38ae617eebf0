//! Tenant secrets (an OpenAI API key, a webhook secret, a signing secret): sealed at rest,
//! write-only through the API, opened only for the runtime.

use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Serialize};

use crate::crypto::{open_with, seal_with};
use crate::error::is_fk_violation;
use crate::{Store, StoreError, now, truncate, with_pool};

/// A secret as listed: its name and when it last changed, never its value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SecretInfo {
    /// The secret's name.
    pub name: String,
    /// RFC 3339.
    pub updated_at: String,
}

/// Binds a sealed secret to its tenant and name: copied to another row, it does not open.
fn aad(tenant_id: &str, name: &str) -> Vec<u8> {
    format!("secret\u{0}{tenant_id}\u{0}{name}").into_bytes()
}

fn check_secret_name(name: &str) -> Result<(), StoreError> {
    if name.is_empty()
        || name.len() > 64
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
    {
        return Err(StoreError::Invalid(format!(
            "secret name `{}` must be 1-64 letters, digits, `_`, `-` or `.`",
            truncate(name, 80)
        )));
    }
    Ok(())
}

impl Store {
    /// Creates or replaces a tenant's secret.
    pub async fn put_secret(
        &self,
        tenant_id: &str,
        name: &str,
        value: &SecretString,
    ) -> Result<(), StoreError> {
        check_secret_name(name)?;
        let sealed = seal_with(
            self.master_key(),
            value.expose_secret().as_bytes(),
            &aad(tenant_id, name),
        )?;
        let at = now();
        let written = with_pool!(self, |pool| {
            sqlx::query(
                "INSERT INTO secrets (tenant_id, name, value, created_at, updated_at) VALUES ($1, $2, $3, $4, $4) \
                 ON CONFLICT (tenant_id, name) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
            )
            .bind(tenant_id)
            .bind(name)
            .bind(&sealed)
            .bind(&at)
            .execute(pool)
            .await
            .map(|r| r.rows_affected())
        });
        match written {
            Ok(_) => {
                tracing::info!(name: "secret_written", tenant_id = %tenant_id, secret_name = %name, "secret_written");
                Ok(())
            }
            Err(e) if is_fk_violation(&e) => {
                Err(StoreError::NotFound(format!("tenant `{tenant_id}`")))
            }
            Err(e) => Err(e.into()),
        }
    }

    /// The names of a tenant's secrets, in name order.
    pub async fn secret_names(&self, tenant_id: &str) -> Result<Vec<SecretInfo>, StoreError> {
        let rows: Vec<(String, String)> = with_pool!(self, |pool| {
            sqlx::query_as(
                "SELECT name, updated_at FROM secrets WHERE tenant_id = $1 ORDER BY name",
            )
            .bind(tenant_id)
            .fetch_all(pool)
            .await?
        });
        Ok(rows
            .into_iter()
            .map(|(name, updated_at)| SecretInfo { name, updated_at })
            .collect())
    }

    /// A secret's value, for the runtime only; `None` if the tenant has no such secret.
    pub async fn get_secret(
        &self,
        tenant_id: &str,
        name: &str,
    ) -> Result<Option<SecretString>, StoreError> {
        let sealed: Option<Vec<u8>> = with_pool!(self, |pool| {
            sqlx::query_scalar("SELECT value FROM secrets WHERE tenant_id = $1 AND name = $2")
                .bind(tenant_id)
                .bind(name)
                .fetch_optional(pool)
                .await?
        });
        let Some(sealed) = sealed else {
            return Ok(None);
        };
        let plain = open_with(self.master_key(), &sealed, &aad(tenant_id, name))?;
        let text = String::from_utf8(plain)
            .map_err(|_| StoreError::Corrupt(format!("secret `{name}` is not UTF-8")))?;
        Ok(Some(SecretString::from(text)))
    }

    /// Deletes a secret; `false` if there was none.
    pub async fn delete_secret(&self, tenant_id: &str, name: &str) -> Result<bool, StoreError> {
        let n = with_pool!(self, |pool| {
            sqlx::query("DELETE FROM secrets WHERE tenant_id = $1 AND name = $2")
                .bind(tenant_id)
                .bind(name)
                .execute(pool)
                .await?
                .rows_affected()
        });
        Ok(n > 0)
    }
}
