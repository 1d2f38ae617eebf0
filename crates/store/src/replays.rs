//! Reading back recorded invocations of one tool, for replaying them against a draft.
//!
//! Records are stored as JSON text without a tool column, so these queries narrow the rows
//! with a `LIKE` on the record's `"tool":"<name>"` (written the same way by both backends'
//! serialisation) and then check the parsed record's tool; each reads a bounded number of rows.

use switchboard_runtime::InvocationRecord;

use crate::{Store, StoreError, parse_json, with_pool};

/// How many of a tenant's newest invocations [`Store::recent_invocations_of_tool`] looks
/// through: a tool used rarely among many others may have older records it does not reach.
pub const REPLAY_SCAN_ROWS: i64 = 20_000;

/// One recorded invocation and the call it belongs to.
#[derive(Debug, Clone, PartialEq)]
pub struct CallRecord {
    /// The call's id.
    pub call_id: String,
    /// The invocation's record.
    pub record: InvocationRecord,
}

/// The `LIKE` pattern matching a record of `tool` (`\` escapes).
fn tool_pattern(tool: &str) -> String {
    let quoted = serde_json::to_string(tool).unwrap_or_default();
    let mut out = String::from("%\"tool\":");
    for c in quoted.chars() {
        if matches!(c, '%' | '_' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('%');
    out
}

fn parse_rows(tool: &str, rows: Vec<(String, String)>) -> Result<Vec<CallRecord>, StoreError> {
    let mut out = Vec::with_capacity(rows.len());
    for (call_id, text) in rows {
        let record: InvocationRecord = parse_json("invocation record", &text)?;
        if record.tool == tool {
            out.push(CallRecord { call_id, record });
        }
    }
    Ok(out)
}

impl Store {
    /// The newest `limit` recorded invocations of `tool` across the tenant's calls, newest
    /// first, among the tenant's newest [`REPLAY_SCAN_ROWS`] invocations.
    pub async fn recent_invocations_of_tool(
        &self,
        tenant_id: &str,
        tool: &str,
        limit: usize,
    ) -> Result<Vec<CallRecord>, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let pattern = tool_pattern(tool);
        let rows: Vec<(String, String)> = with_pool!(self, |pool| {
            sqlx::query_as(
                "SELECT call_id, record FROM (SELECT call_id, record, seq FROM call_invocations \
                 WHERE tenant_id = $1 ORDER BY seq DESC LIMIT $2) recent \
                 WHERE record LIKE $3 ESCAPE '\\' ORDER BY seq DESC LIMIT $4",
            )
            .bind(tenant_id)
            .bind(REPLAY_SCAN_ROWS)
            .bind(&pattern)
            .bind(limit)
            .fetch_all(pool)
            .await?
        });
        parse_rows(tool, rows)
    }

    /// The ids of the newest `limit` calls with a recorded invocation of `tool`, newest first
    /// (by their latest such invocation), among the tenant's newest [`REPLAY_SCAN_ROWS`]
    /// invocations.
    pub async fn recent_calls_of_tool(
        &self,
        tenant_id: &str,
        tool: &str,
        limit: usize,
    ) -> Result<Vec<String>, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let pattern = tool_pattern(tool);
        let rows: Vec<(String, i64)> = with_pool!(self, |pool| {
            sqlx::query_as(
                "SELECT call_id, MAX(seq) AS last_seq FROM (SELECT call_id, record, seq FROM call_invocations \
                 WHERE tenant_id = $1 ORDER BY seq DESC LIMIT $2) recent \
                 WHERE record LIKE $3 ESCAPE '\\' GROUP BY call_id ORDER BY last_seq DESC LIMIT $4",
            )
            .bind(tenant_id)
            .bind(REPLAY_SCAN_ROWS)
            .bind(&pattern)
            .bind(limit)
            .fetch_all(pool)
            .await?
        });
        Ok(rows.into_iter().map(|(call_id, _)| call_id).collect())
    }

    /// The tenant's newest `limit` recorded invocations of any tool, newest first (the
    /// console's health page).
    pub async fn recent_invocations_of_tenant(
        &self,
        tenant_id: &str,
        limit: usize,
    ) -> Result<Vec<CallRecord>, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows: Vec<(String, String)> = with_pool!(self, |pool| {
            sqlx::query_as(
                "SELECT call_id, record FROM call_invocations WHERE tenant_id = $1 \
                 ORDER BY seq DESC LIMIT $2",
            )
            .bind(tenant_id)
            .bind(limit)
            .fetch_all(pool)
            .await?
        });
        rows.into_iter()
            .map(|(call_id, text)| {
                Ok(CallRecord {
                    call_id,
                    record: parse_json("invocation record", &text)?,
                })
            })
            .collect()
    }

    /// The recorded invocations of `tool` in one of the tenant's calls, in the order they
    /// finished, at most `limit` (the newest). Empty for another tenant's call or none.
    pub async fn call_invocations_of_tool(
        &self,
        tenant_id: &str,
        call_id: &str,
        tool: &str,
        limit: usize,
    ) -> Result<Vec<CallRecord>, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let pattern = tool_pattern(tool);
        let rows: Vec<(String, String)> = with_pool!(self, |pool| {
            sqlx::query_as(
                "SELECT call_id, record FROM (SELECT call_id, record, seq FROM call_invocations \
                 WHERE tenant_id = $1 AND call_id = $2 AND record LIKE $3 ESCAPE '\\' \
                 ORDER BY seq DESC LIMIT $4) recent ORDER BY seq",
            )
            .bind(tenant_id)
            .bind(call_id)
            .bind(&pattern)
            .bind(limit)
            .fetch_all(pool)
            .await?
        });
        parse_rows(tool, rows)
    }
}

#[cfg(test)]
mod tests {
    use super::tool_pattern;

    #[test]
    fn the_pattern_escapes_like_wildcards() {
        assert_eq!(tool_pattern("save_meal"), r#"%"tool":"save\_meal"%"#);
        assert_eq!(tool_pattern("a%b"), r#"%"tool":"a\%b"%"#);
    }
}
