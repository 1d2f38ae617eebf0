//! MCP servers a tenant registered as tool sources: how to reach them (sealed: URLs and headers
//! carry tokens), what may be shown back, and the last tool list each one gave.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::crypto::{open_with, seal_with};
use crate::error::is_fk_violation;
use crate::page::{encode_cursor, paginate};
use crate::{Page, Paged, Store, StoreError, check_name, now, parse_json, to_json, with_pool};

/// How to reach an MCP server; sealed at rest, never returned by the API.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "transport", rename_all = "snake_case")]
pub enum McpServerConfig {
    /// Streamable HTTP.
    Http {
        /// The MCP endpoint, e.g. `https://mcp.example.com/mcp`.
        url: String,
        /// Sent with every request (e.g. `Authorization`).
        #[serde(default)]
        headers: BTreeMap<String, String>,
    },
    /// A local process speaking MCP over stdio.
    Stdio {
        /// The program to run.
        command: String,
        /// Its arguments.
        #[serde(default)]
        args: Vec<String>,
        /// Extra environment variables.
        #[serde(default)]
        env: BTreeMap<String, String>,
    },
}

impl fmt::Debug for McpServerConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("McpServerConfig")
            .field("transport", &self.transport())
            .field("endpoint", &self.endpoint())
            .finish_non_exhaustive()
    }
}

impl McpServerConfig {
    /// `http` or `stdio`.
    pub fn transport(&self) -> &'static str {
        match self {
            McpServerConfig::Http { .. } => "http",
            McpServerConfig::Stdio { .. } => "stdio",
        }
    }

    /// What may be shown of where the server is: scheme, host and port of a URL (no path,
    /// query or credentials); the program of a stdio server.
    pub fn endpoint(&self) -> String {
        match self {
            McpServerConfig::Http { url, .. } => match url.split_once("://") {
                Some((scheme, rest)) => {
                    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
                    let host = authority.rsplit('@').next().unwrap_or_default();
                    format!("{scheme}://{host}")
                }
                None => String::new(),
            },
            McpServerConfig::Stdio { command, .. } => command.clone(),
        }
    }

    /// The names of the headers (HTTP) or environment variables (stdio), in order.
    pub fn secret_names(&self) -> Vec<String> {
        match self {
            McpServerConfig::Http { headers, .. } => headers.keys().cloned().collect(),
            McpServerConfig::Stdio { env, .. } => env.keys().cloned().collect(),
        }
    }
}

/// A registered MCP server as listed: nothing secret.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct McpServer {
    /// The tenant's name for it; agents attach its tools as `<label>/<tool>`.
    pub label: String,
    /// `http` or `stdio`.
    pub transport: String,
    /// Scheme, host and port (HTTP), or the program (stdio).
    pub endpoint: String,
    /// Header names (HTTP) or environment variable names (stdio); never their values.
    pub header_names: Vec<String>,
    /// Grows with every change of the registration.
    pub revision: i64,
    /// The last `tools/list` answer, when one was kept.
    pub tools: Option<Value>,
    /// When `tools` was listed (RFC 3339).
    pub tools_listed_at: Option<String>,
    /// RFC 3339.
    pub created_at: String,
    /// RFC 3339.
    pub updated_at: String,
}

type Row = (
    String,
    String,
    String,
    String,
    i64,
    Option<String>,
    Option<String>,
    String,
    String,
);

const COLUMNS: &str = "label, transport, endpoint, header_names, revision, tools, tools_listed_at, created_at, updated_at";

fn from_row(r: Row) -> Result<McpServer, StoreError> {
    let (label, transport, endpoint, names, revision, tools, listed, created_at, updated_at) = r;
    Ok(McpServer {
        header_names: parse_json("mcp server header names", &names)?,
        tools: tools
            .map(|t| parse_json("mcp server tools", &t))
            .transpose()?,
        label,
        transport,
        endpoint,
        revision,
        tools_listed_at: listed,
        created_at,
        updated_at,
    })
}

/// Binds a sealed config to its tenant and label: copied to another row, it does not open.
fn aad(tenant_id: &str, label: &str) -> Vec<u8> {
    format!("mcp_server\u{0}{tenant_id}\u{0}{label}").into_bytes()
}

impl Store {
    /// Registers or replaces a tenant's MCP server; a replaced one forgets its tool list.
    pub async fn put_mcp_server(
        &self,
        tenant_id: &str,
        label: &str,
        config: &McpServerConfig,
    ) -> Result<McpServer, StoreError> {
        check_name("MCP server label", label)?;
        let plain = serde_json::to_vec(config)
            .map_err(|e| StoreError::Invalid(format!("cannot serialise as JSON: {e}")))?;
        let sealed = seal_with(self.master_key(), &plain, &aad(tenant_id, label))?;
        let names = to_json(&config.secret_names())?;
        let at = now();
        let written = with_pool!(self, |pool| {
            sqlx::query(
                "INSERT INTO mcp_servers (tenant_id, label, transport, endpoint, header_names, config, revision, tools, tools_listed_at, created_at, updated_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, 1, NULL, NULL, $7, $7) \
                 ON CONFLICT (tenant_id, label) DO UPDATE SET transport = excluded.transport, endpoint = excluded.endpoint, \
                 header_names = excluded.header_names, config = excluded.config, revision = mcp_servers.revision + 1, \
                 tools = NULL, tools_listed_at = NULL, updated_at = excluded.updated_at",
            )
            .bind(tenant_id)
            .bind(label)
            .bind(config.transport())
            .bind(config.endpoint())
            .bind(&names)
            .bind(&sealed)
            .bind(&at)
            .execute(pool)
            .await
            .map(|r| r.rows_affected())
        });
        match written {
            Ok(_) => {}
            Err(e) if is_fk_violation(&e) => {
                return Err(StoreError::NotFound(format!("tenant `{tenant_id}`")));
            }
            Err(e) => return Err(e.into()),
        }
        tracing::info!(name: "mcp_server_written", tenant_id = %tenant_id, label = %label, "mcp_server_written");
        self.get_mcp_server(tenant_id, label)
            .await?
            .ok_or_else(|| StoreError::NotFound(format!("MCP server `{label}`")))
    }

    /// A registered server as shown; `None` if there is none.
    pub async fn get_mcp_server(
        &self,
        tenant_id: &str,
        label: &str,
    ) -> Result<Option<McpServer>, StoreError> {
        let sql = format!("SELECT {COLUMNS} FROM mcp_servers WHERE tenant_id = $1 AND label = $2");
        let row: Option<Row> = with_pool!(self, |pool| {
            sqlx::query_as(sqlx::AssertSqlSafe(sql.as_str()))
                .bind(tenant_id)
                .bind(label)
                .fetch_optional(pool)
                .await?
        });
        row.map(from_row).transpose()
    }

    /// A tenant's servers in label order.
    pub async fn list_mcp_servers(
        &self,
        tenant_id: &str,
        page: Page,
    ) -> Result<Paged<McpServer>, StoreError> {
        let limit = page.fetch_limit()?;
        let after = page.cursor(1)?.and_then(|mut k| k.pop());
        let sql = format!(
            "SELECT {COLUMNS} FROM mcp_servers WHERE tenant_id = $1 AND ($2 IS NULL OR label > $2) ORDER BY label LIMIT $3"
        );
        let rows: Vec<Row> = with_pool!(self, |pool| {
            sqlx::query_as(sqlx::AssertSqlSafe(sql.as_str()))
                .bind(tenant_id)
                .bind(after.as_deref())
                .bind(limit)
                .fetch_all(pool)
                .await?
        });
        let items = rows
            .into_iter()
            .map(from_row)
            .collect::<Result<Vec<_>, _>>()?;
        Ok(paginate(items, &page, |s| encode_cursor(&[&s.label])))
    }

    /// How to reach a server (opened from its seal) and its revision, for the runtime only.
    pub async fn mcp_server_config(
        &self,
        tenant_id: &str,
        label: &str,
    ) -> Result<Option<(McpServerConfig, i64)>, StoreError> {
        let row: Option<(Vec<u8>, i64)> = with_pool!(self, |pool| {
            sqlx::query_as(
                "SELECT config, revision FROM mcp_servers WHERE tenant_id = $1 AND label = $2",
            )
            .bind(tenant_id)
            .bind(label)
            .fetch_optional(pool)
            .await?
        });
        let Some((sealed, revision)) = row else {
            return Ok(None);
        };
        let plain = open_with(self.master_key(), &sealed, &aad(tenant_id, label))?;
        let config = serde_json::from_slice(&plain)
            .map_err(|_| StoreError::Corrupt(format!("sealed config of MCP server `{label}`")))?;
        Ok(Some((config, revision)))
    }

    /// Keeps the tool list a server gave, unless the registration changed since (`revision`).
    pub async fn set_mcp_server_tools(
        &self,
        tenant_id: &str,
        label: &str,
        revision: i64,
        tools: &Value,
    ) -> Result<(), StoreError> {
        let text = to_json(tools)?;
        let at = now();
        with_pool!(self, |pool| {
            sqlx::query(
                "UPDATE mcp_servers SET tools = $1, tools_listed_at = $2 WHERE tenant_id = $3 AND label = $4 AND revision = $5",
            )
            .bind(&text)
            .bind(&at)
            .bind(tenant_id)
            .bind(label)
            .bind(revision)
            .execute(pool)
            .await?
            .rows_affected()
        });
        Ok(())
    }

    /// Removes a server; `false` if there was none.
    pub async fn delete_mcp_server(
        &self,
        tenant_id: &str,
        label: &str,
    ) -> Result<bool, StoreError> {
        let n = with_pool!(self, |pool| {
            sqlx::query("DELETE FROM mcp_servers WHERE tenant_id = $1 AND label = $2")
                .bind(tenant_id)
                .bind(label)
                .execute(pool)
                .await?
                .rows_affected()
        });
        Ok(n > 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_endpoint_shows_no_path_query_or_credentials() {
        let http = |url: &str| McpServerConfig::Http {
            url: url.to_owned(),
            headers: BTreeMap::new(),
        };
        assert_eq!(
            http("https://user:pw@mcp.example.com:8443/mcp?token=t").endpoint(),
            "https://mcp.example.com:8443"
        );
        assert_eq!(
            http("http://127.0.0.1:9/mcp").endpoint(),
            "http://127.0.0.1:9"
        );
        assert_eq!(http("nonsense").endpoint(), "");
    }
}
