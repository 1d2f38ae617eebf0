//! The runtime's call journal ([`CallJournal`]) on the call's rows: sessions' checkpoints,
//! claims, finished invocations (each with the context its tool's writes made) and ends.
//!
//! **Ownership.** A journal may be *fenced* ([`TenantJournal::fenced`]) with the fencing token
//! its node got when it became the call's owner ([`crate::ownership`]). Every write it makes
//! first locks the call's row and compares the token: when another node has taken the call
//! over since, the write is refused with [`StoreError::Fenced`] and nothing is stored, so a
//! node that was paused or cut off cannot write a call it no longer owns.
//!
//! **Claims.** A function call whose tool can ask for an effect is claimed (a row in
//! `call_claims`, holding the sealed invocation) before it runs, unless it is claimed or
//! recorded already; the claim goes when its record lands. A tool without effects is not
//! claimed: its record, fenced, is its claim. A node that takes a call over resumes the claimed runs that reached an
//! effect (their checkpoints) and reruns those that did not.
//!
//! Journal appends are idempotent: a `Finished` whose function call id is already recorded is
//! ignored whole, so a retried append cannot record an invocation twice.

use switchboard_core::{CallInfo, Context};
use switchboard_runtime::BoxFuture;
use switchboard_runtime::journal::{
    CallJournal, CallState, Checkpoint, Claim, JournalEntry, JournalError,
};
use switchboard_runtime::{Invocation, InvocationRecord};

use crate::calls::{
    CallStatus, check_call_id, checkpoint_aad, legacy_checkpoint_aad, open_context, seal_context,
};
use crate::crypto::{open_with, seal_with};
use crate::error::is_fk_violation;
use crate::group_commit::{Done, Job};
use crate::{Backend, Store, StoreError, WritePool, now, parse_json, to_json, with_pool};

/// The statement that locks a call's row and reads its fencing token and status: shared for
/// writes beside the row (checkpoints, claims), exclusive for writes of it. SQLite's write
/// transaction holds the whole database already.
fn lock_call(kind: Backend, exclusive: bool) -> &'static str {
    match (kind, exclusive) {
        (Backend::Sqlite, _) => "SELECT fence, status FROM calls WHERE tenant_id = $1 AND id = $2",
        (Backend::Postgres, false) => {
            "SELECT fence, status FROM calls WHERE tenant_id = $1 AND id = $2 FOR SHARE"
        }
        (Backend::Postgres, true) => {
            "SELECT fence, status FROM calls WHERE tenant_id = $1 AND id = $2 FOR UPDATE"
        }
    }
}

/// Claims a function call in one statement on SQLite when nothing stands in the way (see
/// `claim_function_call`).
pub(crate) const SQLITE_CLAIM: &str = "INSERT INTO call_claims (tenant_id, call_id, function_call_id, invocation, fence, claimed_at) \
     SELECT $1, $2, $3, $4, c.fence, $6 FROM calls c \
     WHERE c.tenant_id = $1 AND c.id = $2 AND c.status <> 'ended' AND ($5 IS NULL OR c.fence = $5) \
     AND NOT EXISTS (SELECT 1 FROM call_invocations i \
                     WHERE i.tenant_id = $1 AND i.call_id = $2 AND i.function_call_id = $3) \
     ON CONFLICT (tenant_id, call_id, function_call_id) DO NOTHING";

/// Refuses a fenced write when the call's token is not the writer's any more.
fn check_fence(call_id: &str, stored: Option<i64>, fence: Option<i64>) -> Result<(), StoreError> {
    match (fence, stored) {
        (Some(mine), Some(now)) if now != mine => Err(StoreError::Fenced(format!(
            "call `{call_id}` has a new owner (fencing token {now}, this node holds {mine})"
        ))),
        _ => Ok(()),
    }
}

/// Binds a sealed claim to its tenant, call and function call.
fn claim_aad(tenant_id: &str, call_id: &str, function_call_id: &str) -> Vec<u8> {
    format!("claim\u{0}{tenant_id}\u{0}{call_id}\u{0}{function_call_id}").into_bytes()
}

impl Store {
    /// Records one journal entry of a tenant's call (see the module docs), unfenced.
    pub async fn journal_append(
        &self,
        tenant_id: &str,
        call_id: &str,
        entry: JournalEntry,
    ) -> Result<(), StoreError> {
        self.journal_append_fenced(tenant_id, call_id, entry, None)
            .await
    }

    /// [`Store::journal_append`] by the holder of fencing token `fence` (when given): refused
    /// with [`StoreError::Fenced`], nothing stored, once another node owns the call.
    pub async fn journal_append_fenced(
        &self,
        tenant_id: &str,
        call_id: &str,
        entry: JournalEntry,
        fence: Option<i64>,
    ) -> Result<(), StoreError> {
        match entry {
            JournalEntry::Started { call, context } => {
                self.journal_started(tenant_id, call_id, &call, &context, fence)
                    .await
            }
            JournalEntry::Checkpoint {
                function_call_id,
                checkpoint,
            } => {
                self.journal_checkpoint(tenant_id, call_id, &function_call_id, &checkpoint, fence)
                    .await
            }
            JournalEntry::Finished {
                record,
                context,
                handoffs,
            } => {
                let finished = (context.as_ref(), handoffs);
                self.journal_finished(tenant_id, call_id, &record, finished, fence)
                    .await
            }
            JournalEntry::Ended => self.journal_ended(tenant_id, call_id, fence).await,
        }
    }

    /// Claims a function call before it runs: `Claim::Taken` when it is claimed or recorded
    /// already, [`StoreError::Fenced`] when the holder of `fence` no longer owns the call.
    pub async fn claim_function_call(
        &self,
        tenant_id: &str,
        call_id: &str,
        invocation: &Invocation,
        fence: Option<i64>,
    ) -> Result<Claim, StoreError> {
        let fc = &invocation.function_call_id;
        let sealed = seal_with(
            self.master_key(),
            to_json(invocation)?.as_bytes(),
            &claim_aad(tenant_id, call_id, fc),
        )?;
        let at = now();
        if let Some(group) = &self.gate.group {
            let job = Job::Claim {
                tenant_id: tenant_id.to_owned(),
                call_id: call_id.to_owned(),
                function_call_id: fc.clone(),
                sealed: sealed.clone(),
                fence,
                at: at.clone(),
            };
            if group.run(job).await == Done::Written {
                return Ok(Claim::Claimed);
            }
        }
        with_pool!(self, |pool| {
            async {
                // SQLite: the usual case in one statement (the call is there, not ended, still
                // this node's, and the function call neither claimed nor recorded), read and
                // written under the database's one write lock. Not on PostgreSQL: a statement
                // that waits for the call's row lock still reads the other tables as they were
                // when it started, so a claim racing its function call's finish would miss the
                // record that finish commits and run the call again.
                if pool.kind() == Backend::Sqlite {
                    let turn = self.write_turn(pool.kind()).await?;
                    let claimed = sqlx::query(SQLITE_CLAIM)
                        .bind(tenant_id)
                        .bind(call_id)
                        .bind(fc)
                        .bind(&sealed)
                        .bind(fence)
                        .bind(&at)
                        .execute(pool)
                        .await?
                        .rows_affected();
                    drop(turn);
                    if claimed == 1 {
                        return Ok(Claim::Claimed);
                    }
                }
                // Otherwise find out why, in a transaction of its own.
                let mut tx = self.begin_write(pool).await?;
                let row: Option<(i64, String)> = sqlx::query_as(lock_call(pool.kind(), false))
                    .bind(tenant_id)
                    .bind(call_id)
                    .fetch_optional(&mut *tx)
                    .await?;
                let Some((stored, status)) = row else {
                    return Err(StoreError::NotFound(format!("call `{call_id}`")));
                };
                check_fence(call_id, Some(stored), fence)?;
                if CallStatus::parse(&status)? == CallStatus::Ended {
                    return Err(StoreError::Conflict(format!("call `{call_id}` has ended")));
                }
                let recorded: Option<String> = sqlx::query_scalar(
                    "SELECT function_call_id FROM call_invocations WHERE tenant_id = $1 AND call_id = $2 AND function_call_id = $3",
                )
                .bind(tenant_id)
                .bind(call_id)
                .bind(fc)
                .fetch_optional(&mut *tx)
                .await?;
                if recorded.is_some() {
                    tx.rollback().await?;
                    return Ok(Claim::Taken);
                }
                let inserted = sqlx::query(
                    "INSERT INTO call_claims (tenant_id, call_id, function_call_id, invocation, fence, claimed_at) \
                     VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (tenant_id, call_id, function_call_id) DO NOTHING",
                )
                .bind(tenant_id)
                .bind(call_id)
                .bind(fc)
                .bind(&sealed)
                .bind(stored)
                .bind(&at)
                .execute(&mut *tx)
                .await?
                .rows_affected();
                tx.commit().await?;
                Ok(if inserted == 1 { Claim::Claimed } else { Claim::Taken })
            }
            .await
        })
    }

    async fn journal_started(
        &self,
        tenant_id: &str,
        call_id: &str,
        call: &CallInfo,
        context: &Context,
        fence: Option<i64>,
    ) -> Result<(), StoreError> {
        check_call_id(call_id)?;
        if call.tenant_id != tenant_id {
            return Err(StoreError::Invalid(format!(
                "call `{call_id}` names another tenant than its journal's"
            )));
        }
        let call_info = to_json(call)?;
        let context_text = seal_context(self.master_key(), tenant_id, call_id, context)?;
        let at = now();
        // A call made by `create_call` keeps its pinned versions; the context is the session's.
        let result = with_pool!(self, |pool| {
            async {
                let mut tx = self.begin_write(pool).await?;
                let row: Option<(i64, String)> = sqlx::query_as(lock_call(pool.kind(), true))
                    .bind(tenant_id)
                    .bind(call_id)
                    .fetch_optional(&mut *tx)
                    .await?;
                check_fence(call_id, row.map(|r| r.0), fence)?;
                sqlx::query(
                    "INSERT INTO calls (id, tenant_id, agent, status, call_info, context, pinned, version, handoffs, created_at, user_id) \
                     VALUES ($1, $2, $3, 'active', $4, $5, '{}', 0, 0, $6, $7) \
                     ON CONFLICT (tenant_id, id) DO UPDATE SET agent = excluded.agent, call_info = excluded.call_info, \
                     context = excluded.context, user_id = excluded.user_id, version = calls.version + 1",
                )
                .bind(call_id)
                .bind(tenant_id)
                .bind(context.active_agent())
                .bind(&call_info)
                .bind(&context_text)
                .bind(&at)
                .bind(crate::call_search::searchable_user(context))
                .execute(&mut *tx)
                .await?;
                tx.commit().await?;
                Ok::<(), StoreError>(())
                }
            .await
        });
        match result {
            Err(StoreError::Database(e)) if is_fk_violation(&e) => {
                Err(StoreError::NotFound(format!("tenant `{tenant_id}`")))
            }
            other => other,
        }
    }

    async fn journal_checkpoint(
        &self,
        tenant_id: &str,
        call_id: &str,
        function_call_id: &str,
        checkpoint: &Checkpoint,
        fence: Option<i64>,
    ) -> Result<(), StoreError> {
        let sealed = seal_with(
            self.master_key(),
            to_json(checkpoint)?.as_bytes(),
            &checkpoint_aad(tenant_id, call_id, function_call_id),
        )?;
        let at = now();
        let result = with_pool!(self, |pool| {
            async {
                let mut tx = self.begin_write(pool).await?;
                let row: Option<(i64, String)> = sqlx::query_as(lock_call(pool.kind(), false))
                    .bind(tenant_id)
                    .bind(call_id)
                    .fetch_optional(&mut *tx)
                    .await?;
                let Some((stored, _)) = row else {
                    return Err(StoreError::NotFound(format!("call `{call_id}`")));
                };
                check_fence(call_id, Some(stored), fence)?;
                // Not once the function call is recorded: a checkpoint given up on while the
                // database did not answer may land after its run's record, and must not leave
                // a finished run to be resumed.
                sqlx::query(
                    "INSERT INTO call_checkpoints (tenant_id, call_id, function_call_id, checkpoint, updated_at) \
                     SELECT $1, $2, $3, $4, $5 WHERE NOT EXISTS (SELECT 1 FROM call_invocations i \
                     WHERE i.tenant_id = $1 AND i.call_id = $2 AND i.function_call_id = $3) \
                     ON CONFLICT (tenant_id, call_id, function_call_id) DO UPDATE SET \
                     checkpoint = excluded.checkpoint, updated_at = excluded.updated_at",
                )
                .bind(tenant_id)
                .bind(call_id)
                .bind(function_call_id)
                .bind(&sealed)
                .bind(&at)
                .execute(&mut *tx)
                .await?;
                tx.commit().await?;
                Ok(())
                }
            .await
        });
        match result {
            Err(StoreError::Database(e)) if is_fk_violation(&e) => {
                Err(StoreError::NotFound(format!("call `{call_id}`")))
            }
            other => other,
        }
    }

    async fn journal_finished(
        &self,
        tenant_id: &str,
        call_id: &str,
        record: &InvocationRecord,
        (context, handoffs): (Option<&Context>, u32),
        fence: Option<i64>,
    ) -> Result<(), StoreError> {
        let record_text = to_json(record)?;
        let context_text = context
            .map(|c| seal_context(self.master_key(), tenant_id, call_id, c))
            .transpose()?;
        let agent = context.map(|c| c.active_agent().to_owned());
        if let Some(group) = &self.gate.group {
            let job = Job::Finish {
                tenant_id: tenant_id.to_owned(),
                call_id: call_id.to_owned(),
                function_call_id: record.function_call_id.clone(),
                record: record_text.clone(),
                context: context_text.clone().map(|text| (text, agent.clone())),
                handoffs: i64::from(handoffs),
                fence,
            };
            // Not written: fenced off, gone, recorded already or a failed batch; the
            // transaction below says which.
            if group.run(job).await == Done::Written {
                return Ok(());
            }
        }
        with_pool!(self, |pool| {
            async {
                let mut tx = self.begin_write(pool).await?;
                // The call's row first, fenced: it locks the call, so its finishes are
                // serialised, and a call another node owns now is left as it is.
                let updated = match &context_text {
                    Some(text) => sqlx::query(
                        "UPDATE calls SET context = $3, agent = $4, handoffs = $5, version = version + 1 \
                         WHERE tenant_id = $1 AND id = $2 AND (CAST($6 AS BIGINT) IS NULL OR fence = $6)",
                    )
                    .bind(tenant_id)
                    .bind(call_id)
                    .bind(text)
                    .bind(agent.as_deref())
                    .bind(i64::from(handoffs))
                    .bind(fence)
                    .execute(&mut *tx)
                    .await?,
                    None => sqlx::query(
                        "UPDATE calls SET handoffs = $3 WHERE tenant_id = $1 AND id = $2 AND (CAST($4 AS BIGINT) IS NULL OR fence = $4)",
                    )
                    .bind(tenant_id)
                    .bind(call_id)
                    .bind(i64::from(handoffs))
                    .bind(fence)
                    .execute(&mut *tx)
                    .await?,
                };
                if updated.rows_affected() == 0 {
                    // Not there, or fenced off: say which.
                    let row: Option<(i64, String)> = sqlx::query_as(lock_call(pool.kind(), true))
                        .bind(tenant_id)
                        .bind(call_id)
                        .fetch_optional(&mut *tx)
                        .await?;
                    check_fence(call_id, row.map(|r| r.0), fence)?;
                    return Err(StoreError::NotFound(format!("call `{call_id}`")));
                }
                // Its claim and checkpoint go with it (a trigger, migration 0010).
                let inserted = sqlx::query(sqlx::AssertSqlSafe(format!(
                    "INSERT INTO call_invocations (tenant_id, call_id, function_call_id, record, created_at) VALUES ($1, $2, $3, $4, {}) \
                     ON CONFLICT (tenant_id, call_id, function_call_id) DO NOTHING",
                    crate::ownership::now_stamp(pool.kind())
                )))
                .bind(tenant_id)
                .bind(call_id)
                .bind(&record.function_call_id)
                .bind(&record_text)
                .execute(&mut *tx)
                .await?;
                if inserted.rows_affected() == 0 {
                    // Recorded already: this append is a retry; keep the first one whole.
                    tx.rollback().await?;
                    return Ok(());
                }
                tx.commit().await?;
                Ok(())
            }
            .await
        })
    }

    async fn journal_ended(
        &self,
        tenant_id: &str,
        call_id: &str,
        fence: Option<i64>,
    ) -> Result<(), StoreError> {
        let at = now();
        with_pool!(self, |pool| {
            async {
                let mut tx = self.begin_write(pool).await?;
                let row: Option<(i64, String)> = sqlx::query_as(lock_call(pool.kind(), true))
                    .bind(tenant_id)
                    .bind(call_id)
                    .fetch_optional(&mut *tx)
                    .await?;
                check_fence(call_id, row.map(|r| r.0), fence)?;
                for sql in [
                    "DELETE FROM call_checkpoints WHERE tenant_id = $1 AND call_id = $2",
                    "DELETE FROM call_claims WHERE tenant_id = $1 AND call_id = $2",
                ] {
                    sqlx::query(sql)
                        .bind(tenant_id)
                        .bind(call_id)
                        .execute(&mut *tx)
                        .await?;
                }
                // Last: its trigger moves the tenant's live calls, whose row call starts lock,
                // so the row is held only from here to the commit.
                let updated = sqlx::query(
                    "UPDATE calls SET status = 'ended', ended_at = COALESCE(ended_at, $3) WHERE tenant_id = $1 AND id = $2",
                )
                .bind(tenant_id)
                .bind(call_id)
                .bind(&at)
                .execute(&mut *tx)
                .await?;
                if updated.rows_affected() == 0 {
                    return Err(StoreError::NotFound(format!("call `{call_id}`")));
                }
                tx.commit().await?;
                Ok(())
            }
            .await
        })
    }

    /// A tenant's call's journal state rebuilt from its rows (one snapshot); `None` for an
    /// unknown call.
    pub async fn journal_load(
        &self,
        tenant_id: &str,
        call_id: &str,
    ) -> Result<Option<CallState>, StoreError> {
        self.journal_load_recent(tenant_id, call_id, usize::MAX)
            .await
    }

    /// [`Store::journal_load`] with only the newest `max_records` invocation records read (a
    /// session holds no more; the rest stay in the database and are found one by one).
    pub async fn journal_load_recent(
        &self,
        tenant_id: &str,
        call_id: &str,
        max_records: usize,
    ) -> Result<Option<CallState>, StoreError> {
        type Head = (String, String, i64, String);
        let max_records = i64::try_from(max_records).unwrap_or(i64::MAX);
        type Rows = (
            Vec<String>,
            Vec<(String, Vec<u8>)>,
            Vec<(String, Vec<u8>)>,
            Option<i64>,
        );
        let (head, records, checkpoints, claims, newest_age) = with_pool!(self, |pool| {
            let mut tx = pool.begin_read().await?;
            let head: Option<Head> = sqlx::query_as(
                "SELECT call_info, context, handoffs, status FROM calls WHERE tenant_id = $1 AND id = $2",
            )
            .bind(tenant_id)
            .bind(call_id)
            .fetch_optional(&mut *tx)
            .await?;
            let (records, checkpoints, claims, newest_age): Rows = if head.is_some() {
                let records = sqlx::query_scalar(
                    "SELECT record FROM (SELECT record, seq FROM call_invocations \
                     WHERE tenant_id = $1 AND call_id = $2 ORDER BY seq DESC LIMIT $3) recent \
                     ORDER BY seq",
                )
                .bind(tenant_id)
                .bind(call_id)
                .bind(max_records)
                .fetch_all(&mut *tx)
                .await?;
                let checkpoints = sqlx::query_as(
                    "SELECT function_call_id, checkpoint FROM call_checkpoints WHERE tenant_id = $1 AND call_id = $2",
                )
                .bind(tenant_id)
                .bind(call_id)
                .fetch_all(&mut *tx)
                .await?;
                let claims = sqlx::query_as(
                    "SELECT function_call_id, invocation FROM call_claims WHERE tenant_id = $1 AND call_id = $2",
                )
                .bind(tenant_id)
                .bind(call_id)
                .fetch_all(&mut *tx)
                .await?;
                // How long ago the newest record was stored, by the database's clock (records
                // are stamped with it): the one clock every node shares.
                let newest_age: Option<i64> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
                    "SELECT {} - {} FROM call_invocations WHERE tenant_id = $1 AND call_id = $2 \
                     ORDER BY seq DESC LIMIT 1",
                    crate::ownership::now_ms(pool.kind()),
                    crate::ownership::stamp_ms(pool.kind(), "created_at"),
                )))
                .bind(tenant_id)
                .bind(call_id)
                .fetch_optional(&mut *tx)
                .await?
                .flatten();
                (records, checkpoints, claims, newest_age)
            } else {
                (Vec::new(), Vec::new(), Vec::new(), None)
            };
            tx.commit().await?;
            (head, records, checkpoints, claims, newest_age)
        });
        let Some((call_info, context, handoffs, status)) = head else {
            return Ok(None);
        };
        let mut state = CallState {
            call: Some(parse_json("call info", &call_info)?),
            context: Some(open_context(
                self.master_key(),
                tenant_id,
                call_id,
                &context,
            )?),
            handoffs: u32::try_from(handoffs).unwrap_or(u32::MAX),
            ended: CallStatus::parse(&status)? == CallStatus::Ended,
            newest_record_age: newest_age
                .map(|ms| std::time::Duration::from_millis(u64::try_from(ms).unwrap_or(0))),
            ..CallState::default()
        };
        for r in &records {
            state.records.push(parse_json("invocation record", r)?);
        }
        for (function_call_id, sealed) in checkpoints {
            let key = self.master_key();
            let plain = open_with(
                key,
                &sealed,
                &checkpoint_aad(tenant_id, call_id, &function_call_id),
            )
            .or_else(|_| {
                open_with(
                    key,
                    &sealed,
                    &legacy_checkpoint_aad(call_id, &function_call_id),
                )
            })?;
            let checkpoint: Checkpoint = serde_json::from_slice(&plain).map_err(|e| {
                StoreError::Corrupt(format!("checkpoint of `{function_call_id}`: {e}"))
            })?;
            state.checkpoints.insert(function_call_id, checkpoint);
        }
        // Claimed runs that stopped before their first effect; the others have checkpoints.
        for (function_call_id, sealed) in claims {
            if state.checkpoints.contains_key(&function_call_id) {
                continue;
            }
            let plain = open_with(
                self.master_key(),
                &sealed,
                &claim_aad(tenant_id, call_id, &function_call_id),
            )?;
            let invocation: Invocation = serde_json::from_slice(&plain)
                .map_err(|e| StoreError::Corrupt(format!("claim of `{function_call_id}`: {e}")))?;
            state.claimed.insert(function_call_id, invocation);
        }
        Ok(Some(state))
    }

    /// The call journal of one tenant's calls, for a session.
    pub fn journal(&self, tenant_id: &str) -> TenantJournal {
        TenantJournal {
            store: self.clone(),
            tenant_id: tenant_id.to_owned(),
            fence: None,
        }
    }
}

/// The store as the runtime's [`CallJournal`] for one tenant: the runtime names calls by id,
/// and this journal reads and writes only that tenant's call of that id.
#[derive(Debug, Clone)]
pub struct TenantJournal {
    store: Store,
    tenant_id: String,
    /// The fencing token of this node's ownership of the call, checked by every write.
    fence: Option<i64>,
}

/// The runtime's view of a store failure: a write of a call that has a new owner is fenced;
/// anything else is a failure of the journal.
fn journal_error(e: StoreError) -> JournalError {
    match e {
        StoreError::Fenced(m) => JournalError::Fenced(m),
        other => JournalError::failed(other.to_string()),
    }
}

impl TenantJournal {
    /// The tenant whose calls this journal keeps.
    pub fn tenant_id(&self) -> &str {
        &self.tenant_id
    }

    /// The journal of one call this node owns with fencing token `fence` (see
    /// [`crate::ownership`]): every write is refused once another node has taken the call over.
    pub fn fenced(self, fence: i64) -> Self {
        TenantJournal {
            fence: Some(fence),
            ..self
        }
    }
}

impl CallJournal for TenantJournal {
    fn append<'a>(
        &'a self,
        call_id: &'a str,
        entry: JournalEntry,
    ) -> BoxFuture<'a, Result<(), JournalError>> {
        Box::pin(async move {
            self.store
                .journal_append_fenced(&self.tenant_id, call_id, entry, self.fence)
                .await
                .map_err(journal_error)
        })
    }

    fn claim<'a>(
        &'a self,
        call_id: &'a str,
        invocation: &'a Invocation,
    ) -> BoxFuture<'a, Result<Claim, JournalError>> {
        Box::pin(async move {
            self.store
                .claim_function_call(&self.tenant_id, call_id, invocation, self.fence)
                .await
                .map_err(journal_error)
        })
    }

    fn load<'a>(
        &'a self,
        call_id: &'a str,
    ) -> BoxFuture<'a, Result<Option<CallState>, JournalError>> {
        Box::pin(async move {
            self.store
                .journal_load(&self.tenant_id, call_id)
                .await
                .map_err(journal_error)
        })
    }

    fn load_recent<'a>(
        &'a self,
        call_id: &'a str,
        max_records: usize,
    ) -> BoxFuture<'a, Result<Option<CallState>, JournalError>> {
        Box::pin(async move {
            self.store
                .journal_load_recent(&self.tenant_id, call_id, max_records)
                .await
                .map_err(journal_error)
        })
    }

    fn recorded<'a>(
        &'a self,
        call_id: &'a str,
        function_call_id: &'a str,
    ) -> BoxFuture<'a, Result<Option<InvocationRecord>, JournalError>> {
        Box::pin(async move {
            self.store
                .invocation(&self.tenant_id, call_id, function_call_id)
                .await
                .map_err(journal_error)
        })
    }
}
