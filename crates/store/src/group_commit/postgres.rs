//! PostgreSQL's batches: a whole batch in one statement, each job through a function of
//! migration 0012 (`journal_finish` as 0014 and 0016 redid it) over arrays (`unnest`). A statement is its own transaction, so a batch is one
//! round trip and one flush of the log, where a transaction per job took a round trip per
//! statement and a flush per job.
//!
//! A batch locks the rows of the calls it writes until it commits. Its jobs go in the order of
//! their calls, a call's finishes (which lock its row for update) before its claims (which
//! share it), so two batches (of two lanes, or of two nodes around a takeover) meet their calls in the same
//! order and never both hold one shared while waiting to update it. A deadlock the database breaks anyway fails the batch,
//! and its jobs take the ordinary path.

use sqlx::postgres::{PgConnectOptions, PgConnection};
use sqlx::{ConnectOptions, Connection};

use super::{Batches, Done, Job, Request};

/// A batch: `(n, outcome)` for job `n` (from 1): a claim's `'claimed'`, `'taken'` or
/// `'refused'`, a finish's `'written'`, `'recorded'` or `'refused'`.
const BATCH: &str = "SELECT j.n, CASE WHEN j.r IS NULL \
       THEN journal_claim(j.t, j.c, j.f, j.i, j.fe, j.at) \
       ELSE journal_finish(j.t, j.c, j.f, j.r, j.at, j.ctx, j.agent, j.h, j.fe) END \
     FROM unnest($1::text[], $2::text[], $3::text[], $4::bytea[], $5::text[], $6::text[], \
                 $7::text[], $8::text[], $9::int8[], $10::int8[]) \
     WITH ORDINALITY AS j(t, c, f, i, r, at, ctx, agent, h, fe, n)";

/// How long a batch waits for a row another transaction holds (another node's, around a
/// takeover) before it gives its jobs back.
const LOCK_WAIT: &str = "1s";

/// The writer of a PostgreSQL database.
pub(crate) struct PgBatches {
    /// The database, as the store's pool connects to it.
    pub(crate) options: PgConnectOptions,
}

impl Batches for PgBatches {
    type Conn = PgConnection;
    type Error = sqlx::Error;

    /// A batch waits at most [`LOCK_WAIT`] for a call's row: past it, the batch fails and its
    /// jobs take the ordinary path, where only their own callers wait, and the lane is free.
    async fn connect(&self) -> Result<PgConnection, sqlx::Error> {
        self.options
            .clone()
            .options([("lock_timeout", LOCK_WAIT)])
            .connect()
            .await
    }

    async fn write(
        &self,
        conn: &mut PgConnection,
        batch: &[Request],
    ) -> Result<Vec<Done>, sqlx::Error> {
        let mut order: Vec<usize> = (0..batch.len()).collect();
        order.sort_by_key(|&i| {
            let job = &batch[i].job;
            (job.call(), matches!(job, Job::Claim { .. }))
        });
        let mut columns = Columns::default();
        for &i in &order {
            columns.push(&batch[i].job);
        }
        let rows: Vec<(i64, String)> = sqlx::query_as(BATCH)
            .bind(&columns.tenant_id)
            .bind(&columns.call_id)
            .bind(&columns.function_call_id)
            .bind(&columns.sealed)
            .bind(&columns.record)
            .bind(&columns.at)
            .bind(&columns.context)
            .bind(&columns.agent)
            .bind(&columns.handoffs)
            .bind(&columns.fence)
            .fetch_all(conn)
            .await?;
        let mut done = vec![Done::Undecided; batch.len()];
        for (n, outcome) in rows {
            let job = usize::try_from(n - 1).ok().and_then(|k| order.get(k));
            if let Some(&i) = job
                && matches!(outcome.as_str(), "claimed" | "written" | "recorded")
            {
                done[i] = Done::Written;
            }
        }
        Ok(done)
    }

    async fn close(conn: PgConnection) {
        let _ = conn.close().await;
    }

    /// Nothing: the database checkpoints by itself.
    fn beside(&self) -> impl Future<Output = ()> + Send + 'static {
        std::future::ready(())
    }
}

/// A batch as the columns `BATCH` binds, one row per job; a claim has no record, a finish
/// no sealed invocation.
#[derive(Default)]
struct Columns<'a> {
    tenant_id: Vec<&'a str>,
    call_id: Vec<&'a str>,
    function_call_id: Vec<&'a str>,
    sealed: Vec<Option<&'a [u8]>>,
    record: Vec<Option<&'a str>>,
    at: Vec<&'a str>,
    context: Vec<Option<&'a str>>,
    agent: Vec<Option<&'a str>>,
    handoffs: Vec<i64>,
    fence: Vec<Option<i64>>,
}

impl<'a> Columns<'a> {
    fn push(&mut self, job: &'a Job) {
        match job {
            Job::Claim {
                tenant_id,
                call_id,
                function_call_id,
                sealed,
                fence,
                at,
            } => {
                self.row(tenant_id, call_id, function_call_id, at, *fence);
                self.sealed.push(Some(sealed));
                self.record.push(None);
                self.context.push(None);
                self.agent.push(None);
                self.handoffs.push(0);
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
                // `journal_finish` stamps the record with the database's clock (0016).
                self.row(tenant_id, call_id, function_call_id, "", *fence);
                self.sealed.push(None);
                self.record.push(Some(record));
                self.context
                    .push(context.as_ref().map(|(text, _)| text.as_str()));
                self.agent
                    .push(context.as_ref().and_then(|(_, agent)| agent.as_deref()));
                self.handoffs.push(*handoffs);
            }
        }
    }

    fn row(
        &mut self,
        tenant_id: &'a str,
        call_id: &'a str,
        fc: &'a str,
        at: &'a str,
        fence: Option<i64>,
    ) {
        self.tenant_id.push(tenant_id);
        self.call_id.push(call_id);
        self.function_call_id.push(fc);
        self.at.push(at);
        self.fence.push(fence);
    }
}
