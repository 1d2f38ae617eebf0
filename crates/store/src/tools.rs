//! Tools: immutable versions 1, 2, 3… per (tenant, name), and a "current" pointer.
//!
//! Deleting a tool clears the pointer only: calls pinned to a version at their start keep
//! reading it. Putting it again continues the numbering.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::is_fk_violation;
use crate::page::{encode_cursor, paginate};
use crate::{Page, Paged, Store, StoreError, check_name, now, parse_json, to_json, with_pool};

/// One version of a tool's definition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolVersion {
    /// The tool's name (`definition.name`).
    pub name: String,
    /// 1 for the first version, then one more for each change.
    pub version: i64,
    /// The definition as put (seed 000 format).
    pub definition: Value,
    /// RFC 3339, when this version was put.
    pub created_at: String,
    /// Why it was published, as the publisher wrote it.
    pub note: Option<String>,
    /// Who published it: `key <api key id>` or `console (key <api key id>)`.
    pub published_by: Option<String>,
}

/// The longest change note a version keeps, in characters.
pub const MAX_NOTE_CHARS: usize = 500;

/// Who publishes a version, and why.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Publish {
    /// The change note (at most [`MAX_NOTE_CHARS`] characters).
    pub note: Option<String>,
    /// The publisher.
    pub by: Option<String>,
}

type VersionRow = (String, i64, String, String, Option<String>, Option<String>);

fn version_from_row(
    (name, version, definition, created_at, note, published_by): VersionRow,
) -> Result<ToolVersion, StoreError> {
    Ok(ToolVersion {
        definition: parse_json("tool definition", &definition)?,
        name,
        version,
        created_at,
        note,
        published_by,
    })
}

/// The columns of a version row, `v` the version.
macro_rules! version_columns {
    () => {
        "v.name, v.version, v.definition, v.created_at, v.note, v.published_by"
    };
}

/// A query over each tool's current version, `t` the tool and `v` the version.
macro_rules! current_sql {
    ($rest:literal) => {
        concat!(
            "SELECT ", version_columns!(), " \
             FROM tools t JOIN tool_versions v \
             ON v.tenant_id = t.tenant_id AND v.name = t.name AND v.version = t.current_version ",
            $rest
        )
    };
}

/// What a put did.
enum Put {
    /// The definition equals the current version's: nothing was written.
    Unchanged(VersionRow),
    /// A new version.
    Created(ToolVersion),
}

impl Store {
    /// Stores `definition` as the tool's new current version and returns it. The name comes
    /// from `definition.name`; the caller has validated the definition (`Tool::parse`).
    /// Putting the same definition as the current version again changes nothing and returns
    /// that version, so retried requests do not make new versions.
    pub async fn put_tool(
        &self,
        tenant_id: &str,
        definition: &Value,
        publish: &Publish,
    ) -> Result<ToolVersion, StoreError> {
        if let Some(note) = &publish.note
            && note.chars().count() > MAX_NOTE_CHARS
        {
            return Err(StoreError::Invalid(format!(
                "the change note has {} characters, over the limit of {MAX_NOTE_CHARS}; shorten it",
                note.chars().count()
            )));
        }
        let note = publish
            .note
            .as_deref()
            .map(str::trim)
            .filter(|n| !n.is_empty());
        let Some(name) = definition.get("name").and_then(Value::as_str) else {
            return Err(StoreError::Invalid(
                "a tool definition needs a `name` string".to_owned(),
            ));
        };
        check_name("tool", name)?;
        let text = to_json(definition)?;
        let at = now();
        let result: Result<Put, sqlx::Error> = with_pool!(self, |pool| {
            async {
                let mut tx = self.begin_write(pool).await?;
                let current: Option<VersionRow> =
                    sqlx::query_as(current_sql!("WHERE t.tenant_id = $1 AND t.name = $2"))
                .bind(tenant_id)
                .bind(name)
                .fetch_optional(&mut *tx)
                .await?;
                if let Some(row) = current
                    && serde_json::from_str::<Value>(&row.2).ok().as_ref() == Some(definition)
                {
                    tx.rollback().await?;
                    return Ok(Put::Unchanged(row));
                }
                // The upsert locks the tool's row, so concurrent puts get distinct versions.
                let version: i64 = sqlx::query_scalar(
                    "INSERT INTO tools (tenant_id, name, current_version, latest_version, created_at, updated_at) \
                     VALUES ($1, $2, 1, 1, $3, $3) \
                     ON CONFLICT (tenant_id, name) DO UPDATE SET \
                     current_version = tools.latest_version + 1, \
                     latest_version = tools.latest_version + 1, \
                     updated_at = excluded.updated_at \
                     RETURNING latest_version",
                )
                .bind(tenant_id)
                .bind(name)
                .bind(&at)
                .fetch_one(&mut *tx)
                .await?;
                sqlx::query(
                    "INSERT INTO tool_versions (tenant_id, name, version, definition, created_at, note, published_by) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7)",
                )
                .bind(tenant_id)
                .bind(name)
                .bind(version)
                .bind(&text)
                .bind(&at)
                .bind(note)
                .bind(publish.by.as_deref())
                .execute(&mut *tx)
                .await?;
                tx.commit().await?;
                Ok(Put::Created(ToolVersion {
                    name: name.to_owned(),
                    version,
                    definition: definition.clone(),
                    created_at: at.clone(),
                    note: note.map(str::to_owned),
                    published_by: publish.by.clone(),
                }))
            }
            .await
        });
        match result {
            Ok(Put::Unchanged(unchanged)) => version_from_row(unchanged),
            Ok(Put::Created(created)) => {
                tracing::info!(name: "tool_version_created", tenant_id = %tenant_id, tool_name = %created.name, version = created.version, "tool_version_created");
                Ok(created)
            }
            Err(e) if is_fk_violation(&e) => {
                Err(StoreError::NotFound(format!("tenant `{tenant_id}`")))
            }
            Err(e) => Err(e.into()),
        }
    }

    /// The current version of a tool; `None` if it does not exist or was deleted.
    pub async fn get_tool(
        &self,
        tenant_id: &str,
        name: &str,
    ) -> Result<Option<ToolVersion>, StoreError> {
        let row: Option<VersionRow> = with_pool!(self, |pool| {
            sqlx::query_as(current_sql!("WHERE t.tenant_id = $1 AND t.name = $2"))
                .bind(tenant_id)
                .bind(name)
                .fetch_optional(pool)
                .await?
        });
        row.map(version_from_row).transpose()
    }

    /// One version of a tool, also after the tool was deleted (calls may be pinned to it).
    pub async fn get_tool_version(
        &self,
        tenant_id: &str,
        name: &str,
        version: i64,
    ) -> Result<Option<ToolVersion>, StoreError> {
        let row: Option<VersionRow> = with_pool!(self, |pool| {
            sqlx::query_as(concat!(
                "SELECT ",
                version_columns!(),
                " FROM tool_versions v \
                 WHERE v.tenant_id = $1 AND v.name = $2 AND v.version = $3"
            ))
            .bind(tenant_id)
            .bind(name)
            .bind(version)
            .fetch_optional(pool)
            .await?
        });
        row.map(version_from_row).transpose()
    }

    /// The current version of each tool that is not deleted, in name order.
    pub async fn list_tools(
        &self,
        tenant_id: &str,
        page: Page,
    ) -> Result<Paged<ToolVersion>, StoreError> {
        let limit = page.fetch_limit()?;
        let after = page.cursor(1)?.and_then(|mut k| k.pop());
        let rows: Vec<VersionRow> = with_pool!(self, |pool| {
            sqlx::query_as(current_sql!(
                "WHERE t.tenant_id = $1 AND ($2 IS NULL OR t.name > $2) ORDER BY t.name LIMIT $3"
            ))
            .bind(tenant_id)
            .bind(after.as_deref())
            .bind(limit)
            .fetch_all(pool)
            .await?
        });
        let items = rows
            .into_iter()
            .map(version_from_row)
            .collect::<Result<Vec<_>, _>>()?;
        Ok(paginate(items, &page, |t| encode_cursor(&[&t.name])))
    }

    /// Every current tool of a tenant in name order, unpaged: what a call's toolset is built from.
    pub async fn current_tools(&self, tenant_id: &str) -> Result<Vec<ToolVersion>, StoreError> {
        let rows: Vec<VersionRow> = with_pool!(self, |pool| {
            sqlx::query_as(current_sql!("WHERE t.tenant_id = $1 ORDER BY t.name"))
                .bind(tenant_id)
                .fetch_all(pool)
                .await?
        });
        rows.into_iter().map(version_from_row).collect()
    }

    /// Every version of a tool, oldest first (empty if it never existed).
    pub async fn list_tool_versions(
        &self,
        tenant_id: &str,
        name: &str,
    ) -> Result<Vec<ToolVersion>, StoreError> {
        let rows: Vec<VersionRow> = with_pool!(self, |pool| {
            sqlx::query_as(concat!(
                "SELECT ",
                version_columns!(),
                " FROM tool_versions v \
                 WHERE v.tenant_id = $1 AND v.name = $2 ORDER BY v.version"
            ))
            .bind(tenant_id)
            .bind(name)
            .fetch_all(pool)
            .await?
        });
        rows.into_iter().map(version_from_row).collect()
    }

    /// Deletes a tool softly: it is no longer current, its versions stay. `false` if there was
    /// no current tool of that name.
    pub async fn delete_tool(&self, tenant_id: &str, name: &str) -> Result<bool, StoreError> {
        let at = now();
        let n = with_pool!(self, |pool| {
            sqlx::query(
                "UPDATE tools SET current_version = NULL, updated_at = $3 \
                 WHERE tenant_id = $1 AND name = $2 AND current_version IS NOT NULL",
            )
            .bind(tenant_id)
            .bind(name)
            .bind(&at)
            .execute(pool)
            .await?
            .rows_affected()
        });
        Ok(n > 0)
    }
}
