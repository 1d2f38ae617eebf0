//! One owner per call: nodes, their liveness, and the lease each live call has on one node.
//!
//! Each `serve` process is a *node* with a fresh id. It renews its row's `expires_at` on a
//! heartbeat — one write per node, however many calls it serves — and a node whose
//! `expires_at` has passed is dead. Time is the database's clock, so nodes' clocks do not need
//! to agree.
//!
//! A live call names its owner node and a *fencing token* (`fence`). Only the owner runs the
//! call's tools and writes its journal; every journal write compares the token
//! ([`crate::TenantJournal::fenced`]). Another node takes a call over only when its owner is
//! dead ([`Store::take_over_call`]): a compare-and-set that raises the token, so of several
//! nodes trying at once exactly one wins, and the old owner, should it wake up, is refused on
//! its next write.

use std::time::Duration;

use crate::calls::CallStatus;
use crate::{Backend, Store, StoreError, WritePool, now, with_pool};

/// The fencing token of a call's first owner (the node that started it).
pub const FIRST_FENCE: i64 = 1;

/// How a call reaches its model: a new owner of a Realtime or GPT-Live call re-attaches its
/// WebSocket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Door {
    /// Function calls arrive as requests (the HTTP and MCP doors).
    Http,
    /// Function calls arrive on the call's Realtime WebSocket.
    Realtime,
    /// Function calls arrive on the GPT-Live session's sideband WebSocket.
    Live,
}

impl Door {
    /// As stored.
    pub fn as_str(self) -> &'static str {
        match self {
            Door::Http => "http",
            Door::Realtime => "realtime",
            Door::Live => "live",
        }
    }

    fn parse(s: &str) -> Result<Door, StoreError> {
        match s {
            "http" => Ok(Door::Http),
            "realtime" => Ok(Door::Realtime),
            "live" => Ok(Door::Live),
            other => Err(StoreError::Corrupt(format!("unknown call door `{other}`"))),
        }
    }
}

/// A node as another node sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeInfo {
    /// The node's id (fresh for each process).
    pub id: String,
    /// The base URL to forward a call's requests to (`http://10.0.0.7:8080`).
    pub address: Option<String>,
    /// Its lease has not expired.
    pub alive: bool,
}

/// Who owns a call now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallOwner {
    /// The owner node; `None` for a call no node has owned (made before ownership existed).
    pub node: Option<NodeInfo>,
    /// The fencing token: one more each time the call changed owner.
    pub fence: i64,
    /// Live or ended.
    pub status: CallStatus,
    /// How the call reaches its model.
    pub door: Door,
}

impl CallOwner {
    /// Whether another node may take the call over: it is live and its owner is dead.
    pub fn orphaned(&self) -> bool {
        self.status == CallStatus::Active && !self.node.as_ref().is_some_and(|n| n.alive)
    }
}

/// The database's clock in milliseconds since the Unix epoch, as SQL.
pub(crate) fn now_ms(kind: Backend) -> &'static str {
    match kind {
        Backend::Sqlite => "CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)",
        Backend::Postgres => "CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)",
    }
}

/// The database's clock as a record's text stamp (`2026-11-27T10:00:00.000Z`, as
/// `switchboard_runtime::now_rfc3339` writes), as SQL.
pub(crate) fn now_stamp(kind: Backend) -> &'static str {
    match kind {
        Backend::Sqlite => "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')",
        Backend::Postgres => {
            "to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')"
        }
    }
}

/// A text stamp `column` in milliseconds since the Unix epoch, as SQL.
pub(crate) fn stamp_ms(kind: Backend, column: &str) -> String {
    match kind {
        Backend::Sqlite => {
            format!("CAST((julianday({column}) - 2440587.5) * 86400000.0 AS INTEGER)")
        }
        Backend::Postgres => {
            format!("CAST(EXTRACT(EPOCH FROM CAST({column} AS TIMESTAMPTZ)) * 1000 AS BIGINT)")
        }
    }
}

fn lease_ms(lease: Duration) -> i64 {
    i64::try_from(lease.as_millis()).unwrap_or(i64::MAX)
}

type OwnerRow = (i64, String, String, Option<String>, Option<String>, i64);

/// How many nodes [`Store::live_calls_by_node`] answers at most (the busiest).
pub const MAX_NODES_LISTED: u32 = 100;

/// A tenant's live calls on one node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeCalls {
    /// The owner node's id; `None` for calls without one.
    pub node: Option<String>,
    /// Its lease has not expired (a dead node's calls wait for a takeover).
    pub alive: bool,
    /// The tenant's live calls it owns.
    pub calls: i64,
}

impl Store {
    /// Registers this node with a lease of `lease`. Nodes registered earlier at the same
    /// `address` are marked dead: this process holds the address now, so they are gone (a
    /// restart), and their calls can be taken over at once.
    pub async fn register_node(
        &self,
        id: &str,
        address: Option<&str>,
        lease: Duration,
    ) -> Result<(), StoreError> {
        let at = now();
        let ms = lease_ms(lease);
        with_pool!(self, |pool| {
            async {
                let now = now_ms(pool.kind());
                let mut tx = self.begin_write(pool).await?;
                if let Some(address) = address {
                    sqlx::query("UPDATE nodes SET expires_at = 0 WHERE address = $1 AND id <> $2")
                        .bind(address)
                        .bind(id)
                        .execute(&mut *tx)
                        .await?;
                }
                sqlx::query(sqlx::AssertSqlSafe(format!(
                    "INSERT INTO nodes (id, address, started_at, expires_at) VALUES ($1, $2, $3, {now} + $4) \
                     ON CONFLICT (id) DO UPDATE SET address = excluded.address, expires_at = excluded.expires_at"
                )))
                .bind(id)
                .bind(address)
                .bind(&at)
                .bind(ms)
                .execute(&mut *tx)
                .await?;
                tx.commit().await?;
                Ok(())
            }
            .await
        })
    }

    /// Renews this node's lease; `false` when its row is gone (register again).
    pub async fn renew_node(&self, id: &str, lease: Duration) -> Result<bool, StoreError> {
        let ms = lease_ms(lease);
        let renewed = with_pool!(self, |pool| {
            sqlx::query(sqlx::AssertSqlSafe(format!(
                "UPDATE nodes SET expires_at = {} + $2 WHERE id = $1",
                now_ms(pool.kind())
            )))
            .bind(id)
            .bind(ms)
            .execute(pool)
            .await?
            .rows_affected()
        });
        Ok(renewed == 1)
    }

    /// Marks this node dead at once (a clean shutdown), so its calls need not wait for the
    /// lease to run out.
    pub async fn retire_node(&self, id: &str) -> Result<(), StoreError> {
        with_pool!(self, |pool| {
            sqlx::query("UPDATE nodes SET expires_at = 0 WHERE id = $1")
                .bind(id)
                .execute(pool)
                .await?
                .rows_affected()
        });
        Ok(())
    }

    /// Who owns a tenant's call now; `None` for an unknown call.
    pub async fn call_owner(
        &self,
        tenant_id: &str,
        call_id: &str,
    ) -> Result<Option<CallOwner>, StoreError> {
        let row: Option<OwnerRow> = with_pool!(self, |pool| {
            sqlx::query_as(sqlx::AssertSqlSafe(format!(
                "SELECT c.fence, c.status, c.door, c.owner_node, n.address, \
                 CAST(CASE WHEN n.expires_at > {} THEN 1 ELSE 0 END AS BIGINT) \
                 FROM calls c LEFT JOIN nodes n ON n.id = c.owner_node \
                 WHERE c.tenant_id = $1 AND c.id = $2",
                now_ms(pool.kind())
            )))
            .bind(tenant_id)
            .bind(call_id)
            .fetch_optional(pool)
            .await?
        });
        row.map(owner_from_row).transpose()
    }

    /// Makes `node` the owner of a live call whose fencing token is still `seen` (the owner
    /// the caller saw is dead): the token grows by one and is returned. `None` when the call
    /// changed meanwhile (another node took it, or it ended): read the owner again.
    pub async fn take_over_call(
        &self,
        tenant_id: &str,
        call_id: &str,
        node: &str,
        seen: i64,
    ) -> Result<Option<i64>, StoreError> {
        let fence: Option<i64> = with_pool!(self, |pool| {
            sqlx::query_scalar(
                "UPDATE calls SET owner_node = $3, fence = fence + 1 \
                 WHERE tenant_id = $1 AND id = $2 AND fence = $4 AND status = 'active' RETURNING fence",
            )
            .bind(tenant_id)
            .bind(call_id)
            .bind(node)
            .bind(seen)
            .fetch_optional(pool)
            .await?
        });
        Ok(fence)
    }

    /// A tenant's live calls counted per owner node, busiest first, at most
    /// [`MAX_NODES_LISTED`] nodes.
    pub async fn live_calls_by_node(&self, tenant_id: &str) -> Result<Vec<NodeCalls>, StoreError> {
        let rows: Vec<(Option<String>, i64, i64)> = with_pool!(self, |pool| {
            sqlx::query_as(sqlx::AssertSqlSafe(format!(
                "SELECT c.owner_node, CAST(CASE WHEN MAX(n.expires_at) > {} THEN 1 ELSE 0 END AS BIGINT), \
                 CAST(COUNT(*) AS BIGINT) \
                 FROM calls c LEFT JOIN nodes n ON n.id = c.owner_node \
                 WHERE c.tenant_id = $1 AND c.status = 'active' \
                 GROUP BY c.owner_node ORDER BY 3 DESC, 1 LIMIT $2",
                now_ms(pool.kind())
            )))
            .bind(tenant_id)
            .bind(i64::from(MAX_NODES_LISTED))
            .fetch_all(pool)
            .await?
        });
        Ok(rows
            .into_iter()
            .map(|(node, alive, calls)| NodeCalls {
                node,
                alive: alive == 1,
                calls,
            })
            .collect())
    }

    /// Live calls of `door` whose owner is dead (or that have none), in the order of tenant and
    /// call id, past the first `skip`, at most `limit`, as (tenant, call id, fencing token): what
    /// a node's sweep takes over. A sweep skips those it failed to take over, which come first.
    pub async fn orphaned_calls(
        &self,
        door: Door,
        limit: u32,
        skip: u64,
    ) -> Result<Vec<(String, String, i64)>, StoreError> {
        let rows = with_pool!(self, |pool| {
            sqlx::query_as(sqlx::AssertSqlSafe(format!(
                "SELECT c.tenant_id, c.id, c.fence FROM calls c LEFT JOIN nodes n ON n.id = c.owner_node \
                 WHERE c.status = 'active' AND c.door = $1 AND (n.id IS NULL OR n.expires_at <= {}) \
                 ORDER BY c.tenant_id, c.id LIMIT $2 OFFSET $3",
                now_ms(pool.kind())
            )))
            .bind(door.as_str())
            .bind(i64::from(limit))
            .bind(i64::try_from(skip).unwrap_or(i64::MAX))
            .fetch_all(pool)
            .await?
        });
        Ok(rows)
    }
}

impl Store {
    /// Live calls of `door` whose owner is dead (or that have none) and on which nothing
    /// happened for `idle` (the call started before and no invocation of it was recorded
    /// since), at most `limit`, in the order of tenant and call id: what a node's idle expiry
    /// ends after taking them over. How long ago is the database's clock's word: records are
    /// stamped by it (a call's start by the node that started it, within its clock's skew).
    pub async fn idle_orphaned_calls(
        &self,
        door: Door,
        idle: Duration,
        limit: u32,
    ) -> Result<Vec<(String, String)>, StoreError> {
        let rows = with_pool!(self, |pool| {
            let (now, started, recorded) = (
                now_ms(pool.kind()),
                stamp_ms(pool.kind(), "c.created_at"),
                stamp_ms(pool.kind(), "i.created_at"),
            );
            sqlx::query_as(sqlx::AssertSqlSafe(format!(
                "SELECT c.tenant_id, c.id FROM calls c LEFT JOIN nodes n ON n.id = c.owner_node \
                 WHERE c.status = 'active' AND c.door = $1 AND (n.id IS NULL OR n.expires_at <= {now}) \
                 AND {started} < {now} - $2 AND NOT EXISTS (SELECT 1 FROM call_invocations i \
                 WHERE i.tenant_id = c.tenant_id AND i.call_id = c.id AND {recorded} >= {now} - $2) \
                 ORDER BY c.tenant_id, c.id LIMIT $3"
            )))
            .bind(door.as_str())
            .bind(lease_ms(idle))
            .bind(i64::from(limit))
            .fetch_all(pool)
            .await?
        });
        Ok(rows)
    }
}

fn owner_from_row(row: OwnerRow) -> Result<CallOwner, StoreError> {
    let (fence, status, door, owner, address, alive) = row;
    Ok(CallOwner {
        node: owner.map(|id| NodeInfo {
            id,
            address,
            alive: alive == 1,
        }),
        fence,
        status: CallStatus::parse(&status)?,
        door: Door::parse(&door)?,
    })
}
