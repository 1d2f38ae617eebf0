//! Calls: their context, the tool versions pinned at their start, their invocation records,
//! and the runtime's call journal ([`CallJournal`]) on top of the same rows.
//!
//! A call is identified by its tenant and its id: two tenants may use one call id, each with
//! its own call. Every query here names both, and the journal a session gets
//! ([`Store::journal`]) is bound to one tenant.
//!
//! The context (it holds the `user` scope, tokens included) is sealed at rest like checkpoints:
//! stored as `sealed:v1:<base64>`, bound to its tenant and call. Rows written before sealing hold
//! plain JSON; they are read as they are and sealed by [`Store::seal_call_contexts`], which
//! [`Store::migrate`] runs.
//!
//! Journal appends are idempotent: a `Finished` whose function call id is already recorded is
//! ignored whole, so a retried append cannot record an invocation twice.

use std::error::Error as StdError;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use switchboard_core::{CallInfo, Context};
use switchboard_runtime::BoxFuture;
use switchboard_runtime::InvocationRecord;
use switchboard_runtime::commit::{CommitError, Refusal};
use switchboard_runtime::journal::{
    CallJournal, CallState, Checkpoint, Commit, JournalEntry, JournalError,
};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

use crate::crypto::{MasterKey, open_with, seal_with};
use crate::error::{is_fk_violation, is_unique_violation};
use crate::page::{encode_cursor, paginate};
use crate::{
    Backend, Page, Paged, Store, StoreError, WritePool, now, parse_json, to_json, truncate,
    with_pool,
};

/// Whether a call is going on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallStatus {
    /// Going on.
    Active,
    /// Over; its context no longer changes.
    Ended,
}

impl CallStatus {
    /// `active` or `ended`, as stored.
    pub fn as_str(self) -> &'static str {
        match self {
            CallStatus::Active => "active",
            CallStatus::Ended => "ended",
        }
    }

    fn parse(s: &str) -> Result<Self, StoreError> {
        match s {
            "active" => Ok(CallStatus::Active),
            "ended" => Ok(CallStatus::Ended),
            other => Err(StoreError::Corrupt(format!(
                "unknown call status `{other}`"
            ))),
        }
    }
}

/// A call as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallRow {
    /// The call's id (unique within its tenant).
    pub id: String,
    /// The tenant it belongs to.
    pub tenant_id: String,
    /// The active agent.
    pub agent: String,
    /// Active or ended.
    pub status: CallStatus,
    /// The call's context as last committed.
    pub context: Context,
    /// The tool versions pinned at the start, as the caller gave them.
    pub pinned: Value,
    /// One more for each write of the context (0 at creation).
    pub version: i64,
    /// How many handoffs the call has made.
    pub handoffs: u32,
    /// RFC 3339, when the row was created.
    pub created_at: String,
    /// RFC 3339, when it ended.
    pub ended_at: Option<String>,
}

type CallRowTuple = (
    String,
    String,
    String,
    String,
    String,
    String,
    i64,
    i64,
    String,
    Option<String>,
);

fn call_from_row(key: &MasterKey, row: CallRowTuple) -> Result<CallRow, StoreError> {
    let (id, tenant_id, agent, status, context, pinned, version, handoffs, created_at, ended_at) =
        row;
    Ok(CallRow {
        status: CallStatus::parse(&status)?,
        context: open_context(key, &tenant_id, &id, &context)?,
        pinned: parse_json("call pinned tools", &pinned)?,
        handoffs: u32::try_from(handoffs).unwrap_or(u32::MAX),
        id,
        tenant_id,
        agent,
        version,
        created_at,
        ended_at,
    })
}

/// Binds a sealed checkpoint to its tenant, call and function call.
fn checkpoint_aad(tenant_id: &str, call_id: &str, function_call_id: &str) -> Vec<u8> {
    format!("checkpoint\u{0}{tenant_id}\u{0}{call_id}\u{0}{function_call_id}").into_bytes()
}

/// How checkpoints sealed before call ids were scoped by tenant were bound.
fn legacy_checkpoint_aad(call_id: &str, function_call_id: &str) -> Vec<u8> {
    format!("checkpoint\u{0}{call_id}\u{0}{function_call_id}").into_bytes()
}

/// The prefix of a sealed context in the `context` column (plain JSON starts with `{`).
const SEALED_CONTEXT: &str = "sealed:v1:";

/// Binds a sealed context to its tenant and call.
fn context_aad(tenant_id: &str, call_id: &str) -> Vec<u8> {
    format!("call-context\u{0}{tenant_id}\u{0}{call_id}").into_bytes()
}

/// The context as the `context` column stores it: sealed, bound to its row.
fn seal_context(
    key: &MasterKey,
    tenant_id: &str,
    call_id: &str,
    context: &Context,
) -> Result<String, StoreError> {
    let sealed = seal_with(
        key,
        to_json(context)?.as_bytes(),
        &context_aad(tenant_id, call_id),
    )?;
    Ok(format!("{SEALED_CONTEXT}{}", STANDARD.encode(sealed)))
}

/// Reads the `context` column: sealed, or plain JSON from before sealing.
fn open_context(
    key: &MasterKey,
    tenant_id: &str,
    call_id: &str,
    text: &str,
) -> Result<Context, StoreError> {
    let Some(encoded) = text.strip_prefix(SEALED_CONTEXT) else {
        return parse_json("call context", text);
    };
    let sealed = STANDARD
        .decode(encoded)
        .map_err(|_| StoreError::Corrupt(format!("the sealed context of call `{call_id}`")))?;
    let plain = open_with(key, &sealed, &context_aad(tenant_id, call_id))?;
    serde_json::from_slice(&plain)
        .map_err(|e| StoreError::Corrupt(format!("the context of call `{call_id}`: {e}")))
}

const MAX_CALL_ID: usize = 200;

fn check_call_id(id: &str) -> Result<(), StoreError> {
    if id.is_empty() || id.len() > MAX_CALL_ID || id.chars().any(char::is_control) {
        return Err(StoreError::Invalid(format!(
            "call id `{}` must be 1-{MAX_CALL_ID} printable characters",
            truncate(id, 80)
        )));
    }
    Ok(())
}

const CALL_COLUMNS_WHERE_ID: &str = "SELECT id, tenant_id, agent, status, context, pinned, version, handoffs, created_at, ended_at \
     FROM calls WHERE tenant_id = $1 AND id = $2";

impl Store {
    /// Records a new call with its starting context and the tool versions pinned for it.
    /// Create the call before its session appends `Started` (which then keeps `pinned`).
    pub async fn create_call(
        &self,
        tenant_id: &str,
        call: &CallInfo,
        pinned: &Value,
        context: &Context,
    ) -> Result<CallRow, StoreError> {
        self.insert_call(tenant_id, call, pinned, context, None)
            .await?
            .ok_or_else(|| StoreError::Conflict(format!("call `{}` was not created", call.id)))
    }

    /// [`Store::create_call`] unless the tenant has `max_active` active calls already (on any
    /// node), then `None`. The count and the insert are one transaction under a lock on the
    /// tenant's row (PostgreSQL `FOR UPDATE`; SQLite's write lock), so concurrent starts cannot
    /// both take the last place.
    pub async fn create_call_within(
        &self,
        tenant_id: &str,
        call: &CallInfo,
        pinned: &Value,
        context: &Context,
        max_active: usize,
    ) -> Result<Option<CallRow>, StoreError> {
        self.insert_call(tenant_id, call, pinned, context, Some(max_active))
            .await
    }

    async fn insert_call(
        &self,
        tenant_id: &str,
        call: &CallInfo,
        pinned: &Value,
        context: &Context,
        max_active: Option<usize>,
    ) -> Result<Option<CallRow>, StoreError> {
        check_call_id(&call.id)?;
        if call.tenant_id != tenant_id {
            return Err(StoreError::Invalid(format!(
                "call `{}` names tenant `{}`, not `{tenant_id}`",
                call.id, call.tenant_id
            )));
        }
        let call_info = to_json(call)?;
        let context_text = seal_context(self.master_key(), tenant_id, &call.id, context)?;
        let pinned_text = to_json(pinned)?;
        let at = now();
        let agent = context.active_agent().to_owned();
        let inserted: Result<bool, sqlx::Error> = with_pool!(self, |pool| {
            async {
                let mut tx = pool.begin_write().await?;
                if let Some(max) = max_active {
                    let lock = match pool.kind() {
                        Backend::Sqlite => "SELECT id FROM tenants WHERE id = $1",
                        Backend::Postgres => "SELECT id FROM tenants WHERE id = $1 FOR UPDATE",
                    };
                    // A missing tenant is the insert's foreign key error below.
                    let _: Option<String> = sqlx::query_scalar(lock)
                        .bind(tenant_id)
                        .fetch_optional(&mut *tx)
                        .await?;
                    let active: i64 = sqlx::query_scalar(
                        "SELECT COUNT(*) FROM calls WHERE tenant_id = $1 AND status = 'active'",
                    )
                    .bind(tenant_id)
                    .fetch_one(&mut *tx)
                    .await?;
                    if usize::try_from(active).unwrap_or(usize::MAX) >= max {
                        tx.rollback().await?;
                        return Ok(false);
                    }
                }
                sqlx::query(
                    "INSERT INTO calls (id, tenant_id, agent, status, call_info, context, pinned, version, handoffs, created_at) \
                     VALUES ($1, $2, $3, 'active', $4, $5, $6, 0, 0, $7)",
                )
                .bind(&call.id)
                .bind(tenant_id)
                .bind(&agent)
                .bind(&call_info)
                .bind(&context_text)
                .bind(&pinned_text)
                .bind(&at)
                .execute(&mut *tx)
                .await?;
                tx.commit().await?;
                Ok::<bool, sqlx::Error>(true)
            }
            .await
        });
        match inserted {
            Ok(false) => Ok(None),
            Ok(true) => Ok(Some(CallRow {
                id: call.id.clone(),
                tenant_id: tenant_id.to_owned(),
                agent,
                status: CallStatus::Active,
                context: context.clone(),
                pinned: pinned.clone(),
                version: 0,
                handoffs: 0,
                created_at: at,
                ended_at: None,
            })),
            Err(e) if is_unique_violation(&e) => Err(StoreError::Conflict(format!(
                "call `{}` already exists; give each call of this tenant its own id",
                call.id
            ))),
            Err(e) if is_fk_violation(&e) => {
                Err(StoreError::NotFound(format!("tenant `{tenant_id}`")))
            }
            Err(e) => Err(e.into()),
        }
    }

    /// A call of the tenant.
    pub async fn get_call(
        &self,
        tenant_id: &str,
        call_id: &str,
    ) -> Result<Option<CallRow>, StoreError> {
        let row: Option<CallRowTuple> = with_pool!(self, |pool| {
            sqlx::query_as(CALL_COLUMNS_WHERE_ID)
                .bind(tenant_id)
                .bind(call_id)
                .fetch_optional(pool)
                .await?
        });
        row.map(|r| call_from_row(self.master_key(), r)).transpose()
    }

    /// The tenant's calls, newest first.
    pub async fn list_calls(
        &self,
        tenant_id: &str,
        page: Page,
    ) -> Result<Paged<CallRow>, StoreError> {
        let limit = page.fetch_limit()?;
        let (after_at, after_id) = match page.cursor(2)? {
            Some(k) => (k.first().cloned(), k.get(1).cloned()),
            None => (None, None),
        };
        let rows: Vec<CallRowTuple> = with_pool!(self, |pool| {
            sqlx::query_as(
                "SELECT id, tenant_id, agent, status, context, pinned, version, handoffs, created_at, ended_at \
                 FROM calls WHERE tenant_id = $1 \
                 AND ($2 IS NULL OR created_at < $2 OR (created_at = $2 AND id < $3)) \
                 ORDER BY created_at DESC, id DESC LIMIT $4",
            )
            .bind(tenant_id)
            .bind(after_at.as_deref())
            .bind(after_id.as_deref())
            .bind(limit)
            .fetch_all(pool)
            .await?
        });
        let items = rows
            .into_iter()
            .map(|r| call_from_row(self.master_key(), r))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(paginate(items, &page, |c| {
            encode_cursor(&[&c.created_at, &c.id])
        }))
    }

    /// The newest `limit` invocation records of a call, in the order they finished, and how
    /// many the call has in all (empty and 0 for an unknown call). What a call's view shows:
    /// its size is bounded whatever the call's length.
    pub async fn recent_invocations(
        &self,
        tenant_id: &str,
        call_id: &str,
        limit: usize,
    ) -> Result<(Vec<InvocationRecord>, u64), StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let (rows, total): (Vec<String>, i64) = with_pool!(self, |pool| {
            let mut tx = pool.begin_read().await?;
            let rows = sqlx::query_scalar(
                "SELECT record FROM (SELECT record, seq FROM call_invocations \
                 WHERE tenant_id = $1 AND call_id = $2 ORDER BY seq DESC LIMIT $3) recent \
                 ORDER BY seq",
            )
            .bind(tenant_id)
            .bind(call_id)
            .bind(limit)
            .fetch_all(&mut *tx)
            .await?;
            let total = sqlx::query_scalar(
                "SELECT COUNT(*) FROM call_invocations WHERE tenant_id = $1 AND call_id = $2",
            )
            .bind(tenant_id)
            .bind(call_id)
            .fetch_one(&mut *tx)
            .await?;
            tx.commit().await?;
            (rows, total)
        });
        let records = rows
            .iter()
            .map(|r| parse_json("invocation record", r))
            .collect::<Result<Vec<_>, _>>()?;
        Ok((records, u64::try_from(total).unwrap_or(0)))
    }

    /// Every invocation record of a call, in the order they finished (empty for an unknown
    /// call). Unbounded: the API reads [`Store::recent_invocations`].
    pub async fn invocations(
        &self,
        tenant_id: &str,
        call_id: &str,
    ) -> Result<Vec<InvocationRecord>, StoreError> {
        let rows: Vec<String> = with_pool!(self, |pool| {
            sqlx::query_scalar(
                "SELECT record FROM call_invocations WHERE tenant_id = $1 AND call_id = $2 ORDER BY seq",
            )
            .bind(tenant_id)
            .bind(call_id)
            .fetch_all(pool)
            .await?
        });
        rows.iter()
            .map(|r| parse_json("invocation record", r))
            .collect()
    }

    /// Applies `f` to the call's stored context atomically against concurrent writers on any
    /// node: the row is locked (PostgreSQL `SELECT … FOR UPDATE`; SQLite's write transaction),
    /// read, changed, and written back with `version + 1`. Returns the new context.
    /// An ended call is a [`StoreError::Conflict`]; an error from `f` is
    /// [`StoreError::Rejected`] and changes nothing.
    pub async fn update_call_context<F, E>(
        &self,
        tenant_id: &str,
        call_id: &str,
        f: F,
    ) -> Result<Context, StoreError>
    where
        F: FnOnce(&mut Context) -> Result<(), E> + Send,
        E: Into<Box<dyn StdError + Send + Sync>>,
    {
        with_pool!(self, |pool| {
            async {
                let mut tx = pool.begin_write().await?;
                let select = match pool.kind() {
                    Backend::Sqlite => {
                        "SELECT context, status FROM calls WHERE tenant_id = $1 AND id = $2"
                    }
                    Backend::Postgres => {
                        "SELECT context, status FROM calls WHERE tenant_id = $1 AND id = $2 FOR UPDATE"
                    }
                };
                let row: Option<(String, String)> = sqlx::query_as(select)
                    .bind(tenant_id)
                    .bind(call_id)
                    .fetch_optional(&mut *tx)
                    .await?;
                let Some((text, status)) = row else {
                    return Err(StoreError::NotFound(format!("call `{call_id}`")));
                };
                if CallStatus::parse(&status)? == CallStatus::Ended {
                    return Err(StoreError::Conflict(format!(
                        "call `{call_id}` has ended; its context can no longer change"
                    )));
                }
                let mut context = open_context(self.master_key(), tenant_id, call_id, &text)?;
                f(&mut context).map_err(|e| StoreError::Rejected(e.into()))?;
                let new_text = seal_context(self.master_key(), tenant_id, call_id, &context)?;
                sqlx::query(
                    "UPDATE calls SET context = $3, agent = $4, version = version + 1 \
                     WHERE tenant_id = $1 AND id = $2",
                )
                .bind(tenant_id)
                .bind(call_id)
                .bind(&new_text)
                .bind(context.active_agent())
                .execute(&mut *tx)
                .await?;
                tx.commit().await?;
                Ok(context)
            }
            .await
        })
    }

    /// Records one journal entry of a tenant's call (see the module docs).
    pub async fn journal_append(
        &self,
        tenant_id: &str,
        call_id: &str,
        entry: JournalEntry,
    ) -> Result<(), StoreError> {
        match entry {
            JournalEntry::Started { call, context } => {
                self.journal_started(tenant_id, call_id, &call, &context)
                    .await
            }
            JournalEntry::Checkpoint {
                function_call_id,
                checkpoint,
            } => {
                self.journal_checkpoint(tenant_id, call_id, &function_call_id, &checkpoint)
                    .await
            }
            JournalEntry::Finished {
                record,
                context,
                handoffs,
            } => {
                self.journal_finished(tenant_id, call_id, &record, context.as_ref(), handoffs)
                    .await
            }
            JournalEntry::Ended => self.journal_ended(tenant_id, call_id).await,
        }
    }

    async fn journal_started(
        &self,
        tenant_id: &str,
        call_id: &str,
        call: &CallInfo,
        context: &Context,
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
            sqlx::query(
                "INSERT INTO calls (id, tenant_id, agent, status, call_info, context, pinned, version, handoffs, created_at) \
                 VALUES ($1, $2, $3, 'active', $4, $5, '{}', 0, 0, $6) \
                 ON CONFLICT (tenant_id, id) DO UPDATE SET agent = excluded.agent, call_info = excluded.call_info, \
                 context = excluded.context, version = calls.version + 1",
            )
            .bind(call_id)
            .bind(tenant_id)
            .bind(context.active_agent())
            .bind(&call_info)
            .bind(&context_text)
            .bind(&at)
            .execute(pool)
            .await
            .map(|r| r.rows_affected())
        });
        match result {
            Ok(_) => Ok(()),
            Err(e) if is_fk_violation(&e) => {
                Err(StoreError::NotFound(format!("tenant `{tenant_id}`")))
            }
            Err(e) => Err(e.into()),
        }
    }

    async fn journal_checkpoint(
        &self,
        tenant_id: &str,
        call_id: &str,
        function_call_id: &str,
        checkpoint: &Checkpoint,
    ) -> Result<(), StoreError> {
        let sealed = seal_with(
            self.master_key(),
            to_json(checkpoint)?.as_bytes(),
            &checkpoint_aad(tenant_id, call_id, function_call_id),
        )?;
        let at = now();
        let result = with_pool!(self, |pool| {
            sqlx::query(
                "INSERT INTO call_checkpoints (tenant_id, call_id, function_call_id, checkpoint, updated_at) VALUES ($1, $2, $3, $4, $5) \
                 ON CONFLICT (tenant_id, call_id, function_call_id) DO UPDATE SET \
                 checkpoint = excluded.checkpoint, updated_at = excluded.updated_at",
            )
            .bind(tenant_id)
            .bind(call_id)
            .bind(function_call_id)
            .bind(&sealed)
            .bind(&at)
            .execute(pool)
            .await
            .map(|r| r.rows_affected())
        });
        match result {
            Ok(_) => Ok(()),
            Err(e) if is_fk_violation(&e) => Err(StoreError::NotFound(format!("call `{call_id}`"))),
            Err(e) => Err(e.into()),
        }
    }

    async fn journal_finished(
        &self,
        tenant_id: &str,
        call_id: &str,
        record: &InvocationRecord,
        context: Option<&Context>,
        handoffs: u32,
    ) -> Result<(), StoreError> {
        let record_text = to_json(record)?;
        let context_text = context
            .map(|c| seal_context(self.master_key(), tenant_id, call_id, c))
            .transpose()?;
        let agent = context.map(|c| c.active_agent().to_owned());
        let at = now();
        with_pool!(self, |pool| {
            async {
                let mut tx = pool.begin_write().await?;
                // The call's row first: it locks the call, so its finishes are serialised.
                let updated = match &context_text {
                    Some(text) => sqlx::query(
                        "UPDATE calls SET context = $3, agent = $4, handoffs = $5, version = version + 1 WHERE tenant_id = $1 AND id = $2",
                    )
                    .bind(tenant_id)
                    .bind(call_id)
                    .bind(text)
                    .bind(agent.as_deref())
                    .bind(i64::from(handoffs))
                    .execute(&mut *tx)
                    .await?,
                    None => sqlx::query("UPDATE calls SET handoffs = $3 WHERE tenant_id = $1 AND id = $2")
                        .bind(tenant_id)
                        .bind(call_id)
                        .bind(i64::from(handoffs))
                        .execute(&mut *tx)
                        .await?,
                };
                if updated.rows_affected() == 0 {
                    return Err(StoreError::NotFound(format!("call `{call_id}`")));
                }
                let inserted = sqlx::query(
                    "INSERT INTO call_invocations (tenant_id, call_id, function_call_id, record, created_at) VALUES ($1, $2, $3, $4, $5) \
                     ON CONFLICT (tenant_id, call_id, function_call_id) DO NOTHING",
                )
                .bind(tenant_id)
                .bind(call_id)
                .bind(&record.function_call_id)
                .bind(&record_text)
                .bind(&at)
                .execute(&mut *tx)
                .await?;
                if inserted.rows_affected() == 0 {
                    // Recorded already: this append is a retry; keep the first one whole.
                    tx.rollback().await?;
                    return Ok(());
                }
                sqlx::query("DELETE FROM call_checkpoints WHERE tenant_id = $1 AND call_id = $2 AND function_call_id = $3")
                    .bind(tenant_id)
                    .bind(call_id)
                    .bind(&record.function_call_id)
                    .execute(&mut *tx)
                    .await?;
                tx.commit().await?;
                Ok(())
            }
            .await
        })
    }

    async fn journal_ended(&self, tenant_id: &str, call_id: &str) -> Result<(), StoreError> {
        let at = now();
        with_pool!(self, |pool| {
            async {
                let mut tx = pool.begin_write().await?;
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
                sqlx::query("DELETE FROM call_checkpoints WHERE tenant_id = $1 AND call_id = $2")
                    .bind(tenant_id)
                    .bind(call_id)
                    .execute(&mut *tx)
                    .await?;
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
        let (head, records, checkpoints) = with_pool!(self, |pool| {
            let mut tx = pool.begin_read().await?;
            let head: Option<Head> = sqlx::query_as(
                "SELECT call_info, context, handoffs, status FROM calls WHERE tenant_id = $1 AND id = $2",
            )
            .bind(tenant_id)
            .bind(call_id)
            .fetch_optional(&mut *tx)
            .await?;
            let (records, checkpoints): (Vec<String>, Vec<(String, Vec<u8>)>) = if head.is_some() {
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
                (records, checkpoints)
            } else {
                (Vec::new(), Vec::new())
            };
            tx.commit().await?;
            (head, records, checkpoints)
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
        Ok(Some(state))
    }
}

impl Store {
    /// The stored context of a tenant's call and its handoff count.
    pub async fn call_context(
        &self,
        tenant_id: &str,
        call_id: &str,
    ) -> Result<Option<(Context, u32)>, StoreError> {
        let row: Option<(String, i64)> = with_pool!(self, |pool| {
            sqlx::query_as("SELECT context, handoffs FROM calls WHERE tenant_id = $1 AND id = $2")
                .bind(tenant_id)
                .bind(call_id)
                .fetch_optional(pool)
                .await?
        });
        row.map(|(text, handoffs)| {
            Ok((
                open_context(self.master_key(), tenant_id, call_id, &text)?,
                u32::try_from(handoffs).unwrap_or(u32::MAX),
            ))
        })
        .transpose()
    }

    /// Commits a finished invocation as one transaction against concurrent nodes: the call's row
    /// is locked, its writes and handoff are applied to the context as stored now (all of them,
    /// or none: `Ok(Err(refusal))` when one no longer fits or the context would outgrow its
    /// limit, and then nothing is stored), the record is kept and the checkpoint dropped. A
    /// record already present (a retry) changes nothing.
    pub async fn commit_invocation(
        &self,
        tenant_id: &str,
        call_id: &str,
        commit: Commit,
    ) -> Result<Result<(Context, u32), Refusal>, StoreError> {
        let record_text = to_json(&commit.record)?;
        let at = now();
        let key = self.master_key();
        with_pool!(self, |pool| {
            async {
                let mut tx = pool.begin_write().await?;
                let select = match pool.kind() {
                    Backend::Sqlite => "SELECT context, handoffs, status FROM calls WHERE tenant_id = $1 AND id = $2",
                    Backend::Postgres => "SELECT context, handoffs, status FROM calls WHERE tenant_id = $1 AND id = $2 FOR UPDATE",
                };
                let row: Option<(String, i64, String)> = sqlx::query_as(select).bind(tenant_id).bind(call_id).fetch_optional(&mut *tx).await?;
                let Some((text, handoffs, status)) = row else {
                    return Err(StoreError::NotFound(format!("call `{call_id}`")));
                };
                let mut context = open_context(key, tenant_id, call_id, &text)?;
                let mut handoffs = u32::try_from(handoffs).unwrap_or(u32::MAX);
                let inserted = sqlx::query(
                    "INSERT INTO call_invocations (tenant_id, call_id, function_call_id, record, created_at) VALUES ($1, $2, $3, $4, $5) \
                     ON CONFLICT (tenant_id, call_id, function_call_id) DO NOTHING",
                )
                .bind(tenant_id)
                .bind(call_id)
                .bind(&commit.record.function_call_id)
                .bind(&record_text)
                .bind(&at)
                .execute(&mut *tx)
                .await?;
                // Recorded already (a retry), or the call ended meanwhile: the context stays.
                if inserted.rows_affected() == 0 || CallStatus::parse(&status)? == CallStatus::Ended {
                    tx.rollback().await?;
                    return Ok(Ok((context, handoffs)));
                }
                if let Err(refusal) = commit.apply_to(&mut context, &mut handoffs) {
                    tx.rollback().await?;
                    return Ok(Err(refusal));
                }
                sqlx::query("UPDATE calls SET context = $3, agent = $4, handoffs = $5, version = version + 1 WHERE tenant_id = $1 AND id = $2")
                    .bind(tenant_id)
                    .bind(call_id)
                    .bind(seal_context(key, tenant_id, call_id, &context)?)
                    .bind(context.active_agent())
                    .bind(i64::from(handoffs))
                    .execute(&mut *tx)
                    .await?;
                sqlx::query("DELETE FROM call_checkpoints WHERE tenant_id = $1 AND call_id = $2 AND function_call_id = $3")
                    .bind(tenant_id)
                    .bind(call_id)
                    .bind(&commit.record.function_call_id)
                    .execute(&mut *tx)
                    .await?;
                tx.commit().await?;
                Ok(Ok((context, handoffs)))
            }
            .await
        })
    }

    /// One invocation's record, if the tenant's call has it (any node may have run it).
    pub async fn invocation(
        &self,
        tenant_id: &str,
        call_id: &str,
        function_call_id: &str,
    ) -> Result<Option<InvocationRecord>, StoreError> {
        let row: Option<String> = with_pool!(self, |pool| {
            sqlx::query_scalar(
                "SELECT record FROM call_invocations WHERE tenant_id = $1 AND call_id = $2 AND function_call_id = $3",
            )
            .bind(tenant_id)
            .bind(call_id)
            .bind(function_call_id)
            .fetch_optional(pool)
            .await?
        });
        row.map(|r| parse_json("invocation record", &r)).transpose()
    }

    /// Seals the contexts stored as plain JSON before contexts were sealed; returns how many.
    /// [`Store::migrate`] runs it, so it is done once per database (later runs find none).
    pub async fn seal_call_contexts(&self) -> Result<u64, StoreError> {
        const BATCH: i64 = 500;
        let mut sealed = 0;
        loop {
            let plain: Vec<(String, String, String)> = with_pool!(self, |pool| {
                sqlx::query_as(
                    "SELECT tenant_id, id, context FROM calls WHERE context NOT LIKE 'sealed:%' LIMIT $1",
                )
                .bind(BATCH)
                .fetch_all(pool)
                .await?
            });
            if plain.is_empty() {
                return Ok(sealed);
            }
            let mut changed = 0;
            for (tenant_id, call_id, text) in plain {
                let context: Context = parse_json("call context", &text)?;
                let new_text = seal_context(self.master_key(), &tenant_id, &call_id, &context)?;
                // Only if it is still the plain text read: a session may have written since.
                changed += with_pool!(self, |pool| {
                    sqlx::query(
                        "UPDATE calls SET context = $4 WHERE tenant_id = $1 AND id = $2 AND context = $3",
                    )
                    .bind(&tenant_id)
                    .bind(&call_id)
                    .bind(&text)
                    .bind(&new_text)
                    .execute(pool)
                    .await?
                    .rows_affected()
                });
            }
            if changed == 0 {
                return Ok(sealed);
            }
            sealed += changed;
        }
    }

    /// The call journal of one tenant's calls, for a session.
    pub fn journal(&self, tenant_id: &str) -> TenantJournal {
        TenantJournal {
            store: self.clone(),
            tenant_id: tenant_id.to_owned(),
            shared: true,
        }
    }
}

/// The store as the runtime's [`CallJournal`] for one tenant: the runtime names calls by id,
/// and this journal reads and writes only that tenant's call of that id.
#[derive(Debug, Clone)]
pub struct TenantJournal {
    store: Store,
    tenant_id: String,
    shared: bool,
}

impl TenantJournal {
    /// The tenant whose calls this journal keeps.
    pub fn tenant_id(&self) -> &str {
        &self.tenant_id
    }

    /// The journal of calls only one node serves (a Realtime call lives on the node attached
    /// to its WebSocket): the session's own context is then the authority, journaled after each
    /// tool rather than read back before each one.
    pub fn owned(self) -> Self {
        TenantJournal {
            shared: false,
            ..self
        }
    }
}

impl CallJournal for TenantJournal {
    fn shared(&self) -> bool {
        self.shared
    }

    fn current<'a>(
        &'a self,
        call_id: &'a str,
    ) -> BoxFuture<'a, Result<Option<(Context, u32)>, JournalError>> {
        Box::pin(async move {
            self.store
                .call_context(&self.tenant_id, call_id)
                .await
                .map_err(|e| JournalError(e.to_string()))
        })
    }

    fn commit<'a>(
        &'a self,
        call_id: &'a str,
        commit: Commit,
    ) -> BoxFuture<'a, Result<(Context, u32), CommitError>> {
        Box::pin(async move {
            match self
                .store
                .commit_invocation(&self.tenant_id, call_id, commit)
                .await
            {
                Ok(Ok(committed)) => Ok(committed),
                Ok(Err(refusal)) => Err(CommitError::Refused(refusal)),
                Err(e) => Err(JournalError(e.to_string()).into()),
            }
        })
    }

    fn append<'a>(
        &'a self,
        call_id: &'a str,
        entry: JournalEntry,
    ) -> BoxFuture<'a, Result<(), JournalError>> {
        Box::pin(async move {
            self.store
                .journal_append(&self.tenant_id, call_id, entry)
                .await
                .map_err(|e| JournalError(e.to_string()))
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
                .map_err(|e| JournalError(e.to_string()))
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
                .map_err(|e| JournalError(e.to_string()))
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
                .map_err(|e| JournalError(e.to_string()))
        })
    }
}
