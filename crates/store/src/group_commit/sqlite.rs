//! SQLite's batches: every job of a batch a statement or two in one `BEGIN IMMEDIATE`
//! transaction, under the store's write gate, so the store's other writers queue with it. The
//! writer's connection never checkpoints; a connection of its own does, beside it.
//!
//! The writer's connection is `rusqlite`'s, used on the writer's own thread. Through sqlx, each
//! statement went to that connection's worker thread and back: two thread switches per
//! statement, a batch's `BEGIN` and `COMMIT` included, which cost the server more than SQLite's
//! own work (see docs/benchmarks.md). Both crates link the one bundled SQLite.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use rusqlite::{OpenFlags, ToSql, TransactionBehavior};
use sqlx::ConnectOptions;
use sqlx::sqlite::{SqliteConnectOptions, SqliteConnection};
use tokio::sync::Mutex;

use super::{Batches, Done, Job, Request};

/// How often the log is copied back into the database file (`checkpoint_now_and_then`).
const CHECKPOINT_EVERY: Duration = Duration::from_millis(250);

/// A claim: `SQLITE_CLAIM` (the call there, not ended, the writer's; no claim or record yet).
const CLAIM: &str = crate::journal::SQLITE_CLAIM;

/// A finish, first half: the record, where the call is the writer's. Its trigger (migration
/// 0010) settles the claim and the checkpoint.
/// Stamped with the database's clock (see migration 0016 of PostgreSQL).
const FINISH_RECORD: &str = "INSERT INTO call_invocations (tenant_id, call_id, function_call_id, record, created_at) \
     SELECT $1, $2, $3, $4, strftime('%Y-%m-%dT%H:%M:%fZ', 'now') WHERE EXISTS \
     (SELECT 1 FROM calls WHERE tenant_id = $1 AND id = $2 AND ($5 IS NULL OR fence = $5)) \
     ON CONFLICT (tenant_id, call_id, function_call_id) DO NOTHING";
/// A finish, second half, once the record went in: the call's context and handoffs.
const FINISH_CONTEXT: &str = "UPDATE calls SET context = $3, agent = $4, handoffs = $5, version = version + 1 \
     WHERE tenant_id = $1 AND id = $2";
/// Only when they changed: a read tool's finish leaves the call's row as it is (rewriting it
/// put the row's page in the log again for every read).
const FINISH_HANDOFFS: &str =
    "UPDATE calls SET handoffs = $3 WHERE tenant_id = $1 AND id = $2 AND handoffs <> $3";

/// The writer of a SQLite file.
pub(crate) struct SqliteBatches {
    /// The file, as the store's pool opens it (the checkpoints' connection uses these).
    pub(crate) options: SqliteConnectOptions,
    /// The store's write gate, held for each batch.
    pub(crate) turn: Arc<Mutex<()>>,
    /// How long a statement waits for another process's lock on the file.
    pub(crate) busy_timeout: Duration,
}

/// Why a batch was rolled back.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BatchError {
    #[error(transparent)]
    Sqlite(#[from] rusqlite::Error),
    /// The call's row went between the two statements of its finish.
    #[error("call `{0}` changed under its finish")]
    Changed(String),
}

impl Batches for SqliteBatches {
    type Conn = rusqlite::Connection;
    type Error = BatchError;

    /// The pool's settings that matter to a writer: WAL (kept by the file), `synchronous =
    /// NORMAL`, foreign keys on, the busy timeout; and no checkpoints of its own.
    async fn connect(&self) -> Result<rusqlite::Connection, BatchError> {
        let path: PathBuf = self.options.get_filename().to_owned();
        let conn = rusqlite::Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        conn.busy_timeout(self.busy_timeout)?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        conn.pragma_update(None, "foreign_keys", "ON")?;
        conn.pragma_update(None, "wal_autocheckpoint", 0)?;
        Ok(conn)
    }

    /// Runs on the writer's thread, which has nothing else to do while the batch is written.
    async fn write(
        &self,
        conn: &mut rusqlite::Connection,
        batch: &[Request],
    ) -> Result<Vec<Done>, BatchError> {
        let _turn = self.turn.lock().await;
        write_batch(conn, batch)
    }

    async fn close(conn: rusqlite::Connection) {
        let _ = conn.close();
    }

    fn beside(&self) -> impl Future<Output = ()> + Send + 'static {
        checkpoint_now_and_then(self.options.clone())
    }
}

/// Copies the write-ahead log back into the database file every quarter second, on a
/// connection of its own. SQLite does it after a commit that grew the log past 1,000 pages, in
/// the committing connection: in the journal's writer that stalled every job waiting behind
/// it, several times a second at a thousand calls. A passive checkpoint waits for no writer.
async fn checkpoint_now_and_then(options: SqliteConnectOptions) {
    let mut conn: Option<SqliteConnection> = None;
    loop {
        tokio::time::sleep(CHECKPOINT_EVERY).await;
        if conn.is_none() {
            conn = options.connect().await.ok();
        }
        if let Some(c) = conn.as_mut()
            && let Err(e) = sqlx::query("PRAGMA wal_checkpoint(PASSIVE)")
                .execute(&mut *c)
                .await
        {
            tracing::warn!(name: "journal_checkpoint_failed", error = %e, "journal_checkpoint_failed");
            conn = None;
        }
    }
}

/// One transaction for `batch`; the outcome of each job, or the error that rolled all back.
fn write_batch(
    conn: &mut rusqlite::Connection,
    batch: &[Request],
) -> Result<Vec<Done>, BatchError> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let mut done = Vec::with_capacity(batch.len());
    for request in batch {
        done.push(write_job(&tx, &request.job)?);
    }
    tx.commit()?;
    Ok(done)
}

/// Runs `sql` with its `$n` parameters bound by name (`CLAIM`'s appear out of order).
fn run(
    conn: &rusqlite::Connection,
    sql: &str,
    params: &[&dyn ToSql],
) -> Result<usize, rusqlite::Error> {
    const NAMES: [&str; 6] = ["$1", "$2", "$3", "$4", "$5", "$6"];
    let mut statement = conn.prepare_cached(sql)?;
    let named: Vec<(&str, &dyn ToSql)> =
        NAMES.iter().copied().zip(params.iter().copied()).collect();
    statement.execute(named.as_slice())
}

fn write_job(conn: &rusqlite::Connection, job: &Job) -> Result<Done, BatchError> {
    match job {
        Job::Claim {
            tenant_id,
            call_id,
            function_call_id,
            sealed,
            fence,
            at,
        } => {
            let claimed = run(
                conn,
                CLAIM,
                &[tenant_id, call_id, function_call_id, sealed, fence, at],
            )?;
            Ok(if claimed == 1 {
                Done::Written
            } else {
                Done::Undecided
            })
        }
        Job::Finish {
            tenant_id,
            call_id,
            function_call_id,
            record,
            context,
            handoffs,
            fence,
        } => {
            let recorded = run(
                conn,
                FINISH_RECORD,
                &[tenant_id, call_id, function_call_id, record, fence],
            )?;
            if recorded != 1 {
                return Ok(Done::Undecided);
            }
            match context {
                Some((sealed, agent)) => {
                    let updated = run(
                        conn,
                        FINISH_CONTEXT,
                        &[tenant_id, call_id, sealed, agent, handoffs],
                    )?;
                    if updated != 1 {
                        // The record must not stand alone: the whole batch goes back.
                        return Err(BatchError::Changed(call_id.clone()));
                    }
                }
                None => {
                    // No row written when nothing changed; the record's statement found the
                    // row in this write transaction, which no other writer can enter.
                    run(conn, FINISH_HANDOFFS, &[tenant_id, call_id, handoffs])?;
                }
            }
            Ok(Done::Written)
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::time::Duration;

    use serde_json::json;
    use switchboard_core::{CallInfo, Context};
    use switchboard_runtime::InvocationRecord;

    use crate::calls::seal_context;
    use crate::group_commit::{Done, Job};
    use crate::{Door, MasterKey, Store};

    fn record(fc: &str) -> String {
        let record = InvocationRecord {
            function_call_id: fc.to_owned(),
            tool: "note".to_owned(),
            arguments: "{}".to_owned(),
            ok: true,
            error: None,
            output: r#"{"ok":true}"#.to_owned(),
            latency_ms: 1.0,
            started_at: "2026-11-25T10:00:00.000Z".to_owned(),
            finished_at: "2026-11-25T10:00:00.001Z".to_owned(),
            response_id: None,
            interrupted: false,
            duplicate_of: None,
            logs: Vec::new(),
            trace: None,
            trace_bytes: None,
            policy: None,
        };
        serde_json::to_string(&record).unwrap()
    }

    /// The writer's own connection writes what it can and leaves to the store's ordinary path
    /// (`Undecided`) what it must not: a repeated claim, a repeated finish, a fenced finish.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_writer_writes_on_its_own_connection_and_leaves_the_rest_undecided() {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let path =
            std::env::temp_dir().join(format!("sb-group-writer-{}-{nanos}.db", std::process::id()));
        let store = Store::connect(path.to_str().unwrap(), MasterKey::generate())
            .await
            .unwrap();
        store.migrate().await.unwrap();
        store
            .create_tenant("acme", "acme", &json!({}))
            .await
            .unwrap();
        store
            .register_node("n1", None, Duration::from_secs(60))
            .await
            .unwrap();
        let info = CallInfo {
            id: "c1".into(),
            tenant_id: "acme".into(),
            agent: "main".into(),
            from: None,
            to: None,
            started_at: "2026-11-25T10:00:00.000Z".into(),
        };
        let ctx = Context::new(&info, json!({}));
        store
            .create_call_within("acme", &info, &json!({}), &ctx, 10, ("n1", Door::Http))
            .await
            .unwrap()
            .unwrap();
        // A call's first owner holds fencing token 1.
        let fence = 1;
        let group = store
            .gate
            .group
            .as_ref()
            .expect("a file has a group writer");
        let claim = |fc: &str, fence: i64| Job::Claim {
            tenant_id: "acme".into(),
            call_id: "c1".into(),
            function_call_id: fc.into(),
            sealed: Vec::new(),
            fence: Some(fence),
            at: "2026-11-25T10:00:00.000Z".into(),
        };
        let mut next = ctx.clone();
        next.workflow = std::sync::Arc::new(json!({"noted": true}));
        let sealed = seal_context(store.master_key(), "acme", "c1", &next).unwrap();
        let finish = |fc: &str, fence: i64| Job::Finish {
            tenant_id: "acme".into(),
            call_id: "c1".into(),
            function_call_id: fc.into(),
            record: record(fc),
            context: Some((sealed.clone(), Some("main".into()))),
            handoffs: 0,
            fence: Some(fence),
        };
        assert_eq!(group.run(claim("fc_1", fence)).await, Done::Written);
        assert_eq!(group.run(claim("fc_1", fence)).await, Done::Undecided);
        assert_eq!(group.run(claim("fc_2", fence + 1)).await, Done::Undecided);
        assert_eq!(group.run(finish("fc_1", fence)).await, Done::Written);
        assert_eq!(group.run(finish("fc_1", fence)).await, Done::Undecided);
        assert_eq!(group.run(finish("fc_3", fence + 1)).await, Done::Undecided);
        // Unclaimed: a tool without effects is recorded by its finish alone.
        assert_eq!(group.run(finish("fc_4", fence)).await, Done::Written);
        let state = store.journal_load("acme", "c1").await.unwrap().unwrap();
        let recorded: Vec<&str> = state
            .records
            .iter()
            .map(|r| r.function_call_id.as_str())
            .collect();
        assert_eq!(recorded, ["fc_1", "fc_4"]);
        assert!(state.claimed.is_empty(), "{:?}", state.claimed);
        assert_eq!(state.context.unwrap().workflow["noted"], json!(true));
        drop(store);
        for suffix in ["", "-wal", "-shm"] {
            let mut p = path.clone().into_os_string();
            p.push(suffix);
            let _ = std::fs::remove_file(p);
        }
    }
}
