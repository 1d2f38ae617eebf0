//! Each tool's observed latency as every node reports it, so that the adaptive policy of a
//! node that just started (or has seen few runs of a tool) knows what the cluster knows.
//!
//! A node stores its own figure per tool (its p95 over its newest runs, and how many runs that
//! covers) at a low rate; each node reads back the figures of the last day, combined per tool
//! as a mean of the nodes' p95s weighted by their runs. Stamps are the database's clock (epoch
//! ms), which all nodes share.

use crate::ownership::now_ms;
use crate::{Store, StoreError, WritePool, with_pool};

/// Figures a node stores in one write; more wait for the next.
pub const MAX_FIGURES_PER_WRITE: usize = 500;
/// Tools' figures read back at most.
pub const MAX_FIGURES_READ: i64 = 10_000;
/// Figures older than this are not read back and are dropped.
pub const FIGURE_MAX_AGE_MS: i64 = 24 * 60 * 60 * 1000;

/// One tool's latency figure: tenant, tool, p95 in ms, runs it covers.
pub type LatencyFigure = (String, String, u32, u32);

impl Store {
    /// Stores this node's figures (the first [`MAX_FIGURES_PER_WRITE`]); a tenant deleted since
    /// is skipped.
    pub async fn note_tool_latencies(
        &self,
        node: &str,
        figures: &[LatencyFigure],
    ) -> Result<(), StoreError> {
        if figures.is_empty() {
            return Ok(());
        }
        let figures = &figures[..figures.len().min(MAX_FIGURES_PER_WRITE)];
        with_pool!(self, |pool| {
            let mut tx = self.begin_write(pool).await?;
            let sql = format!(
                "INSERT INTO tool_latency (tenant_id, tool, node_id, p95_ms, samples, updated_at) \
                 SELECT $1, $2, $3, $4, $5, {} WHERE EXISTS (SELECT 1 FROM tenants WHERE id = $1) \
                 ON CONFLICT (tenant_id, tool, node_id) DO UPDATE SET \
                 p95_ms = excluded.p95_ms, samples = excluded.samples, updated_at = excluded.updated_at",
                now_ms(pool.kind())
            );
            for (tenant, tool, p95_ms, samples) in figures {
                sqlx::query(sqlx::AssertSqlSafe(sql.as_str()))
                    .bind(tenant)
                    .bind(tool)
                    .bind(node)
                    .bind(i64::from(*p95_ms))
                    .bind(i64::from(*samples))
                    .execute(&mut *tx)
                    .await?;
            }
            let drop_old = format!(
                "DELETE FROM tool_latency WHERE updated_at < {} - $1",
                now_ms(pool.kind())
            );
            sqlx::query(sqlx::AssertSqlSafe(drop_old))
                .bind(FIGURE_MAX_AGE_MS)
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
        });
        Ok(())
    }

    /// Every tool's figure across the nodes that reported it in the last day: the nodes' p95s
    /// weighted by their runs, and the runs they cover together.
    pub async fn tool_latencies(&self) -> Result<Vec<LatencyFigure>, StoreError> {
        let rows: Vec<(String, String, i64, i64)> = with_pool!(self, |pool| {
            let sql = format!(
                "SELECT tenant_id, tool, \
                 CAST(SUM(p95_ms * samples) / SUM(samples) AS BIGINT), CAST(SUM(samples) AS BIGINT) \
                 FROM tool_latency WHERE updated_at >= {} - $1 AND samples > 0 \
                 GROUP BY tenant_id, tool ORDER BY tenant_id, tool LIMIT $2",
                now_ms(pool.kind())
            );
            sqlx::query_as(sqlx::AssertSqlSafe(sql))
                .bind(FIGURE_MAX_AGE_MS)
                .bind(MAX_FIGURES_READ)
                .fetch_all(pool)
                .await?
        });
        Ok(rows
            .into_iter()
            .map(|(tenant, tool, p95, samples)| {
                (
                    tenant,
                    tool,
                    u32::try_from(p95).unwrap_or(u32::MAX),
                    u32::try_from(samples).unwrap_or(u32::MAX),
                )
            })
            .collect())
    }
}
