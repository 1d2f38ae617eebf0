//! Group commit of the journal's two writes per tool call on SQLite: a function call's claim
//! and its finish.
//!
//! Every tool call claims its function call before it runs and records it when it ends. Run as
//! transactions of their own from the server's runtime, each statement went to SQLite's
//! connection thread and back, and each return waited in the runtime's queue behind the
//! network traffic of a thousand calls: about a millisecond per tool call, most of it waiting,
//! while the store's write gate was held. Here one thread of its own, with its own connection,
//! takes every claim and finish waiting at that moment, writes them in one transaction and
//! answers each once that transaction has committed. An answer still follows its journal entry.
//!
//! A job either writes all its rows or none: the claim is one statement, and the finish inserts
//! its record only where the call is still the writer's, then updates the call's row. A job that
//! writes nothing (the call was fenced off, has ended, or the record exists) is answered
//! [`Done::Undecided`], and so is every job of a batch that failed: the caller then takes the
//! store's ordinary path, one transaction with the reasons spelled out. This is only the fast
//! path; no outcome depends on it.

use std::sync::Arc;
use std::time::Duration;

use sqlx::sqlite::{SqliteConnectOptions, SqliteConnection};
use sqlx::{ConnectOptions, Connection};
use tokio::sync::{Mutex, mpsc, oneshot};

/// Jobs written in one transaction at most.
const MAX_BATCH: usize = 128;
/// Jobs waiting for the writer at most; a caller beyond waits to hand its job over.
const QUEUE: usize = 4096;
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

/// One write of the journal, with everything it binds.
#[derive(Debug)]
pub(crate) enum Job {
    Claim {
        tenant_id: String,
        call_id: String,
        function_call_id: String,
        sealed: Vec<u8>,
        fence: Option<i64>,
        at: String,
    },
    Finish {
        tenant_id: String,
        call_id: String,
        function_call_id: String,
        record: String,
        /// The sealed context and active agent, when the invocation changed them.
        context: Option<(String, Option<String>)>,
        handoffs: i64,
        fence: Option<i64>,
        at: String,
    },
}

/// How a job went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Done {
    /// Written and committed.
    Written,
    /// Nothing written: the caller takes the ordinary path, which says why.
    Undecided,
}

struct Request {
    job: Job,
    reply: oneshot::Sender<Done>,
}

/// The handle to the writer thread; the thread stops when the last handle is dropped.
#[derive(Debug)]
pub(crate) struct GroupWriter {
    queue: mpsc::Sender<Request>,
}

impl GroupWriter {
    /// Starts the writer thread on its own connection to the file `options` name. `turn` is the
    /// store's write gate, held for each batch, so the store's other writers queue with it.
    pub(crate) fn start(
        options: SqliteConnectOptions,
        turn: Arc<Mutex<()>>,
    ) -> std::io::Result<GroupWriter> {
        let (queue, jobs) = mpsc::channel(QUEUE);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        std::thread::Builder::new()
            .name("sqlite-journal".into())
            .spawn(move || {
                // The writer leaves checkpoints to a connection of their own (see below);
                // both stop with the thread.
                runtime.spawn(checkpoint_now_and_then(options.clone()));
                let writer = options.pragma("wal_autocheckpoint", "0");
                runtime.block_on(write_batches(writer, turn, jobs));
            })?;
        Ok(GroupWriter { queue })
    }

    /// Writes `job` with whatever else is waiting; `Undecided` when nothing was written,
    /// the writer included (stopped, or its connection lost).
    pub(crate) async fn run(&self, job: Job) -> Done {
        let (reply, done) = oneshot::channel();
        if self.queue.send(Request { job, reply }).await.is_err() {
            return Done::Undecided;
        }
        done.await.unwrap_or(Done::Undecided)
    }
}

/// The writer thread: takes what waits, writes it in one transaction, answers, and again.
async fn write_batches(
    options: SqliteConnectOptions,
    turn: Arc<Mutex<()>>,
    mut jobs: mpsc::Receiver<Request>,
) {
    let mut conn: Option<SqliteConnection> = None;
    let mut batch = Vec::with_capacity(MAX_BATCH);
    while let Some(first) = jobs.recv().await {
        batch.push(first);
        while batch.len() < MAX_BATCH {
            match jobs.try_recv() {
                Ok(next) => batch.push(next),
                Err(_) => break,
            }
        }
        if conn.is_none() {
            conn = match options.connect().await {
                Ok(c) => Some(c),
                Err(e) => {
                    tracing::warn!(name: "journal_writer_connect_failed", error = %e, "journal_writer_connect_failed");
                    None
                }
            };
        }
        let outcome = match conn.as_mut() {
            Some(c) => {
                let _turn = turn.lock().await;
                write_batch(c, &batch).await
            }
            None => Err(sqlx::Error::PoolClosed),
        };
        match outcome {
            Ok(done) => {
                for (request, done) in batch.drain(..).zip(done) {
                    let _ = request.reply.send(done);
                }
            }
            Err(e) => {
                tracing::warn!(name: "journal_batch_failed", jobs = batch.len(), error = %e, "journal_batch_failed");
                // A connection that failed is opened again for the next batch.
                if let Some(c) = conn.take() {
                    let _ = c.close().await;
                }
                for request in batch.drain(..) {
                    let _ = request.reply.send(Done::Undecided);
                }
                // Not straight into the same fault again.
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
    }
    if let Some(c) = conn {
        let _ = c.close().await;
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
