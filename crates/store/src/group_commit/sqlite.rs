//! SQLite's batches: every job of a batch a statement or two in one `BEGIN IMMEDIATE`
//! transaction, under the store's write gate, so the store's other writers queue with it. The
//! writer's connection never checkpoints; a connection of its own does, beside it.

use std::sync::Arc;
use std::time::Duration;

use sqlx::sqlite::{SqliteConnectOptions, SqliteConnection};
use sqlx::{ConnectOptions, Connection};
use tokio::sync::Mutex;

use super::{Batches, Done, Job, Request};

/// How often the log is copied back into the database file (`checkpoint_now_and_then`).
const CHECKPOINT_EVERY: Duration = Duration::from_millis(250);

/// A claim: `SQLITE_CLAIM` (the call there, not ended, the writer's; no claim or record yet).
const CLAIM: &str = crate::journal::SQLITE_CLAIM;

/// A finish, first half: the record, where the call is the writer's. Its trigger (migration
/// 0010) settles the claim and the checkpoint.
const FINISH_RECORD: &str = "INSERT INTO call_invocations (tenant_id, call_id, function_call_id, record, created_at) \
     SELECT $1, $2, $3, $4, $5 WHERE EXISTS \
     (SELECT 1 FROM calls WHERE tenant_id = $1 AND id = $2 AND ($6 IS NULL OR fence = $6)) \
     ON CONFLICT (tenant_id, call_id, function_call_id) DO NOTHING";
/// A finish, second half, once the record went in: the call's context and handoffs.
const FINISH_CONTEXT: &str = "UPDATE calls SET context = $3, agent = $4, handoffs = $5, version = version + 1 \
     WHERE tenant_id = $1 AND id = $2";
const FINISH_HANDOFFS: &str = "UPDATE calls SET handoffs = $3 WHERE tenant_id = $1 AND id = $2";

/// The writer of a SQLite file.
pub(crate) struct SqliteBatches {
    /// The file, as the store's pool opens it.
    pub(crate) options: SqliteConnectOptions,
    /// The store's write gate, held for each batch.
    pub(crate) turn: Arc<Mutex<()>>,
}

impl Batches for SqliteBatches {
    type Conn = SqliteConnection;

    async fn connect(&self) -> Result<SqliteConnection, sqlx::Error> {
        self.options
            .clone()
            .pragma("wal_autocheckpoint", "0")
            .connect()
            .await
    }

    async fn write(
        &self,
        conn: &mut SqliteConnection,
        batch: &[Request],
    ) -> Result<Vec<Done>, sqlx::Error> {
        let _turn = self.turn.lock().await;
        write_batch(conn, batch).await
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
async fn write_batch(
    conn: &mut SqliteConnection,
    batch: &[Request],
) -> Result<Vec<Done>, sqlx::Error> {
    let mut tx = conn.begin_with("BEGIN IMMEDIATE").await?;
    let mut done = Vec::with_capacity(batch.len());
    for request in batch {
        done.push(write_job(&mut tx, &request.job).await?);
    }
    tx.commit().await?;
    Ok(done)
}

async fn write_job(conn: &mut SqliteConnection, job: &Job) -> Result<Done, sqlx::Error> {
    match job {
        Job::Claim {
            tenant_id,
            call_id,
            function_call_id,
            sealed,
            fence,
            at,
        } => {
            let claimed = sqlx::query(CLAIM)
                .bind(tenant_id)
                .bind(call_id)
                .bind(function_call_id)
                .bind(sealed)
                .bind(fence)
                .bind(at)
                .execute(&mut *conn)
                .await?
                .rows_affected();
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
            at,
        } => {
            let recorded = sqlx::query(FINISH_RECORD)
                .bind(tenant_id)
                .bind(call_id)
                .bind(function_call_id)
                .bind(record)
                .bind(at)
                .bind(fence)
                .execute(&mut *conn)
                .await?
                .rows_affected();
            if recorded != 1 {
                return Ok(Done::Undecided);
            }
            let updated = match context {
                Some((sealed, agent)) => {
                    sqlx::query(FINISH_CONTEXT)
                        .bind(tenant_id)
                        .bind(call_id)
                        .bind(sealed)
                        .bind(agent)
                        .bind(handoffs)
                        .execute(&mut *conn)
                        .await?
                }
                None => {
                    sqlx::query(FINISH_HANDOFFS)
                        .bind(tenant_id)
                        .bind(call_id)
                        .bind(handoffs)
                        .execute(&mut *conn)
                        .await?
                }
            };
            if updated.rows_affected() == 1 {
                Ok(Done::Written)
            } else {
                // The call's row went between the two statements of one transaction: the
                // record must not stand alone, so the whole batch goes back.
                Err(sqlx::Error::Protocol(format!(
                    "call `{call_id}` changed under its finish"
                )))
            }
        }
    }
}
