//! Tenants: the customers that own everything else. Deleting one deletes all it owns.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::is_unique_violation;
use crate::page::{encode_cursor, paginate};
use crate::{
    Backend, Page, Paged, Store, StoreError, WritePool, now, parse_json, to_json, truncate,
    with_pool,
};

/// A customer: owns agents, tools, secrets, API keys and feature configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tenant {
    /// Matches `^[a-z0-9][a-z0-9-]{0,62}$`.
    pub id: String,
    /// A display name.
    pub name: String,
    /// Feature configuration (e.g. `refer` for call transfer); always a JSON object.
    pub features: Value,
    /// RFC 3339.
    pub created_at: String,
    /// RFC 3339.
    pub updated_at: String,
}

type TenantRow = (String, String, String, String, String);

fn tenant_from_row(
    (id, name, features, created_at, updated_at): TenantRow,
) -> Result<Tenant, StoreError> {
    Ok(Tenant {
        features: parse_json("tenant features", &features)?,
        id,
        name,
        created_at,
        updated_at,
    })
}

/// Checks a tenant id: lowercase letters, digits and `-`, starting with a letter or digit, 1-63 long.
pub fn check_tenant_id(id: &str) -> Result<(), StoreError> {
    let mut chars = id.chars();
    let ok = matches!(chars.next(), Some(c) if c.is_ascii_lowercase() || c.is_ascii_digit())
        && id.len() <= 63
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if ok {
        Ok(())
    } else {
        Err(StoreError::Invalid(format!(
            "tenant id `{}` must be 1-63 lowercase letters, digits or `-`, starting with a letter or digit",
            truncate(id, 80)
        )))
    }
}

pub(crate) fn check_features(features: &Value) -> Result<(), StoreError> {
    if features.is_object() {
        Ok(())
    } else {
        Err(StoreError::Invalid(
            "tenant features must be a JSON object, e.g. {} or {\"refer\": {...}}".to_owned(),
        ))
    }
}

impl Store {
    /// Creates a tenant; an existing id is a [`StoreError::Conflict`].
    pub async fn create_tenant(
        &self,
        id: &str,
        name: &str,
        features: &Value,
    ) -> Result<Tenant, StoreError> {
        check_tenant_id(id)?;
        check_features(features)?;
        let features_text = to_json(features)?;
        let at = now();
        let inserted = with_pool!(self, |pool| {
            sqlx::query(
                "INSERT INTO tenants (id, name, features, created_at, updated_at) VALUES ($1, $2, $3, $4, $4)",
            )
            .bind(id)
            .bind(name)
            .bind(&features_text)
            .bind(&at)
            .execute(pool)
            .await
            .map(|r| r.rows_affected())
        });
        match inserted {
            Ok(_) => Ok(Tenant {
                id: id.to_owned(),
                name: name.to_owned(),
                features: features.clone(),
                created_at: at.clone(),
                updated_at: at,
            }),
            Err(e) if is_unique_violation(&e) => Err(StoreError::Conflict(format!(
                "tenant `{id}` already exists; choose another id or update it"
            ))),
            Err(e) => Err(e.into()),
        }
    }

    /// The tenant `id`, if it exists.
    pub async fn get_tenant(&self, id: &str) -> Result<Option<Tenant>, StoreError> {
        let row: Option<TenantRow> = with_pool!(self, |pool| {
            sqlx::query_as(
                "SELECT id, name, features, created_at, updated_at FROM tenants WHERE id = $1",
            )
            .bind(id)
            .fetch_optional(pool)
            .await?
        });
        row.map(tenant_from_row).transpose()
    }

    /// Tenants in id order.
    pub async fn list_tenants(&self, page: Page) -> Result<Paged<Tenant>, StoreError> {
        let limit = page.fetch_limit()?;
        let after = page.cursor(1)?.and_then(|mut k| k.pop());
        let rows: Vec<TenantRow> = with_pool!(self, |pool| {
            sqlx::query_as(
                "SELECT id, name, features, created_at, updated_at FROM tenants \
                 WHERE ($1 IS NULL OR id > $1) ORDER BY id LIMIT $2",
            )
            .bind(after.as_deref())
            .bind(limit)
            .fetch_all(pool)
            .await?
        });
        let items = rows
            .into_iter()
            .map(tenant_from_row)
            .collect::<Result<Vec<_>, _>>()?;
        Ok(paginate(items, &page, |t| encode_cursor(&[&t.id])))
    }

    /// Replaces a tenant's feature configuration.
    pub async fn set_features(&self, id: &str, features: &Value) -> Result<Tenant, StoreError> {
        check_features(features)?;
        let features_text = to_json(features)?;
        let at = now();
        let row: Option<TenantRow> = with_pool!(self, |pool| {
            sqlx::query_as(
                "UPDATE tenants SET features = $2, updated_at = $3 WHERE id = $1 \
                 RETURNING id, name, features, created_at, updated_at",
            )
            .bind(id)
            .bind(&features_text)
            .bind(&at)
            .fetch_optional(pool)
            .await?
        });
        match row {
            Some(row) => tenant_from_row(row),
            None => Err(StoreError::NotFound(format!("tenant `{id}`"))),
        }
    }

    /// Deletes a tenant and everything it owns; `false` if there was none.
    pub async fn delete_tenant(&self, id: &str) -> Result<bool, StoreError> {
        let deleted = with_pool!(self, |pool| {
            // The foreign keys cascade inside one statement, so it is all or nothing.
            let mut tx = self.begin_write(pool).await?;
            if pool.kind() == Backend::Postgres {
                // The tenant's calls first, then its row: a call's end holds its call and then
                // the tenant's row (the live-call trigger, migration 0015), and a delete that
                // took the row first and then waited for that call would deadlock with it.
                sqlx::query("SELECT id FROM calls WHERE tenant_id = $1 ORDER BY id FOR UPDATE")
                    .bind(id)
                    .execute(&mut *tx)
                    .await?;
            }
            let n = sqlx::query("DELETE FROM tenants WHERE id = $1")
                .bind(id)
                .execute(&mut *tx)
                .await?
                .rows_affected();
            tx.commit().await?;
            n
        });
        Ok(deleted > 0)
    }
}
