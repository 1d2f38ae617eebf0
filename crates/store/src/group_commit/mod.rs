//! Group commit of the journal's writes per tool call: a function call's claim and its finish.
//!
//! A tool call that can reach outside the call claims its function call before it runs; every
//! tool call records it when it ends. Run as
//! transactions of their own, each costs its round trips and its commit: on SQLite each
//! statement went to the connection's thread and back and waited in the server runtime's queue
//! behind the network traffic of a thousand calls while the store's write gate was held; on
//! PostgreSQL each commit waited for its own flush of the log. Here one thread of its own takes
//! every claim and finish waiting at that moment, writes them in one transaction and answers
//! each once that transaction has committed. An answer still follows its journal entry. How a
//! batch is written is the backend's (`sqlite.rs`, `postgres.rs`).
//!
//! The thread writes in lanes, each with a connection of its own: while one lane's batch is
//! written, the next free lane takes what waits. SQLite has one writer per file, so one lane;
//! PostgreSQL takes several, so a batch waits for its own commit rather than for the one before
//! it, and one waiting for a locked call holds up no other (nor for long: `postgres.rs`).
//! Lanes do not reorder a call's writes: a session waits for each of its journal writes before
//! it makes the next.
//!
//! A job either writes all its rows or none. A job that writes nothing (the call was fenced
//! off, has ended, or the record exists) is answered [`Done::Undecided`], and so is every job
//! of a batch that failed: the caller then takes the store's ordinary path, one transaction
//! with the reasons spelled out. This is only the fast path; no outcome depends on it.

mod postgres;
mod sqlite;

use std::future::Future;
use std::time::Duration;

use tokio::sync::{Mutex, mpsc, oneshot};

pub(crate) use postgres::PgBatches;
pub(crate) use sqlite::SqliteBatches;

/// Jobs written in one transaction at most.
const MAX_BATCH: usize = 128;
/// Jobs waiting for the writer at most; a caller beyond waits to hand its job over.
const QUEUE: usize = 4096;

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
    },
}

impl Job {
    /// The call the job writes: `(tenant, call)`.
    fn call(&self) -> (&str, &str) {
        match self {
            Job::Claim {
                tenant_id, call_id, ..
            }
            | Job::Finish {
                tenant_id, call_id, ..
            } => (tenant_id, call_id),
        }
    }
}

/// How a job went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Done {
    /// Written and committed.
    Written,
    /// Nothing written: the caller takes the ordinary path, which says why.
    Undecided,
}

pub(crate) struct Request {
    /// What to write.
    pub(crate) job: Job,
    reply: oneshot::Sender<Done>,
}

/// The handle to the writer thread; the thread stops when the last handle is dropped.
#[derive(Debug)]
pub(crate) struct GroupWriter {
    queue: mpsc::Sender<Request>,
}

/// How a backend writes a batch, on a connection of the writer's own.
pub(crate) trait Batches: Send + 'static {
    type Conn;
    type Error: std::fmt::Display;
    /// Opens the writer's connection (again, after one failed).
    fn connect(&self) -> impl Future<Output = Result<Self::Conn, Self::Error>>;
    /// Writes `batch` in one transaction: the outcome of each job, in order, or the error that
    /// rolled all back.
    fn write(
        &self,
        conn: &mut Self::Conn,
        batch: &[Request],
    ) -> impl Future<Output = Result<Vec<Done>, Self::Error>>;
    /// Closes a connection that failed, or the last one.
    fn close(conn: Self::Conn) -> impl Future<Output = ()>;
    /// Work of the backend's own beside the writer, on the writer's thread (stops with it).
    fn beside(&self) -> impl Future<Output = ()> + Send + 'static;
}

impl GroupWriter {
    /// Starts the writer thread, named `name`, writing with `writer` on `lanes` connections
    /// at once (at least one).
    pub(crate) fn start<B: Batches>(
        name: &str,
        writer: B,
        lanes: usize,
    ) -> std::io::Result<GroupWriter> {
        let (queue, jobs) = mpsc::channel(QUEUE);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        std::thread::Builder::new()
            .name(name.to_owned())
            .spawn(move || {
                runtime.spawn(writer.beside());
                let jobs = Mutex::new(jobs);
                let lanes = (0..lanes.max(1)).map(|_| write_batches(&writer, &jobs));
                runtime.block_on(futures_util::future::join_all(lanes));
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

/// One lane of the writer thread: takes what waits, writes it in one transaction on its own
/// connection, answers, and again. While one lane writes, the next free lane takes the queue:
/// its jobs wait for a commit, not for another batch's.
async fn write_batches<B: Batches>(writer: &B, jobs: &Mutex<mpsc::Receiver<Request>>) {
    let mut conn: Option<B::Conn> = None;
    let mut batch = Vec::with_capacity(MAX_BATCH);
    loop {
        {
            let mut jobs = jobs.lock().await;
            let Some(first) = jobs.recv().await else {
                break;
            };
            batch.push(first);
            while batch.len() < MAX_BATCH {
                match jobs.try_recv() {
                    Ok(next) => batch.push(next),
                    Err(_) => break,
                }
            }
        }
        // A job whose caller stopped waiting (it gave up on a database that did not answer)
        // is not written: it would land after its caller answered without it.
        batch.retain(|request| !request.reply.is_closed());
        if batch.is_empty() {
            continue;
        }
        if conn.is_none() {
            conn = match writer.connect().await {
                Ok(c) => Some(c),
                Err(e) => {
                    tracing::warn!(name: "journal_writer_connect_failed", error = %e, "journal_writer_connect_failed");
                    None
                }
            };
        }
        let outcome = match conn.as_mut() {
            Some(c) => writer.write(c, &batch).await.map_err(|e| e.to_string()),
            None => Err("no connection to the database".to_owned()),
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
                    B::close(c).await;
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
        B::close(c).await;
    }
}
