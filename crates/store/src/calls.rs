//! Calls: their context, the tool versions pinned at their start, and their invocation
//! records. The runtime's call journal on the same rows is `journal.rs`.
//!
//! A call is identified by its tenant and its id: two tenants may use one call id, each with
//! its own call. Every query here names both, and the journal a session gets
//! ([`Store::journal`]) is bound to one tenant.
//!
//! The context (it holds the `user` scope, tokens included) is sealed at rest like checkpoints:
//! stored as `sealed:v1:<base64>`, bound to its tenant and call. Rows written before sealing hold
//! plain JSON; they are read as they are and sealed by [`Store::seal_call_contexts`], which
//! [`Store::migrate`] runs.

use std::error::Error as StdError;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use switchboard_core::{CallInfo, Context};
use switchboard_runtime::InvocationRecord;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

use crate::crypto::{MasterKey, open_with, seal_with};
use crate::error::{is_fk_violation, is_unique_violation};
use crate::ownership::{Door, FIRST_FENCE};
use crate::page::{encode_cursor, paginate};
use crate::{
    Backend, Page, Paged, Store, StoreError, WritePool, now, parse_json, to_json, truncate,
    with_pool,
};

/// Where a call's timeline stands ([`Store::call_cursor`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallCursor {
    /// Whether the call goes on.
    pub status: CallStatus,
    /// How many invocation records it has.
    pub records: u64,
    /// Its context's version: [`CallRow::version`], which each change of the context moves.
    pub context_version: i64,
}

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

    pub(crate) fn parse(s: &str) -> Result<Self, StoreError> {
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
pub(crate) fn checkpoint_aad(tenant_id: &str, call_id: &str, function_call_id: &str) -> Vec<u8> {
    format!("checkpoint\u{0}{tenant_id}\u{0}{call_id}\u{0}{function_call_id}").into_bytes()
}

/// How checkpoints sealed before call ids were scoped by tenant were bound.
pub(crate) fn legacy_checkpoint_aad(call_id: &str, function_call_id: &str) -> Vec<u8> {
    format!("checkpoint\u{0}{call_id}\u{0}{function_call_id}").into_bytes()
}

/// The prefix of a sealed context in the `context` column (plain JSON starts with `{`).
const SEALED_CONTEXT: &str = "sealed:v1:";

/// Binds a sealed context to its tenant and call.
fn context_aad(tenant_id: &str, call_id: &str) -> Vec<u8> {
    format!("call-context\u{0}{tenant_id}\u{0}{call_id}").into_bytes()
}

/// The context as the `context` column stores it: sealed, bound to its row.
pub(crate) fn seal_context(
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
pub(crate) fn open_context(
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

pub(crate) fn check_call_id(id: &str) -> Result<(), StoreError> {
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

/// A call's start within its tenant's limit on PostgreSQL (migration 0015): the row lock, the
/// tenant's live calls and the insert in one statement, `true` when the call was inserted.
const START_WITHIN_LIMIT: &str =
    "SELECT call_start($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)";

/// A tenant's live calls, kept by the triggers of migration 0015 on every start, end and delete
/// of its calls: read in the write that records a call, it costs the same however many are live.
const LIVE_CALLS: &str = "SELECT live_calls FROM tenants WHERE id = $1";

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
        self.insert_call(tenant_id, call, pinned, context, None, None)
            .await?
            .ok_or_else(|| StoreError::Conflict(format!("call `{}` was not created", call.id)))
    }

    /// [`Store::create_call`] unless the tenant has `max_active` active calls already (on any
    /// node), then `None`. Reading the tenant's live calls (kept by migration 0015's
    /// triggers) and the insert are one transaction under a lock: on PostgreSQL one statement
    /// holding the tenant's row (`call_start`), on SQLite the write lock, so concurrent starts
    /// cannot both take the last place. The call is owned by `owner` (a node id) with fencing
    /// token [`crate::ownership::FIRST_FENCE`], reached through `door`.
    #[allow(clippy::too_many_arguments)]
    pub async fn create_call_within(
        &self,
        tenant_id: &str,
        call: &CallInfo,
        pinned: &Value,
        context: &Context,
        max_active: usize,
        (owner, door): (&str, Door),
    ) -> Result<Option<CallRow>, StoreError> {
        self.insert_call(
            tenant_id,
            call,
            pinned,
            context,
            Some(max_active),
            Some((owner, door)),
        )
        .await
    }

    async fn insert_call(
        &self,
        tenant_id: &str,
        call: &CallInfo,
        pinned: &Value,
        context: &Context,
        max_active: Option<usize>,
        owner: Option<(&str, Door)>,
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
        let fence = if owner.is_some() { FIRST_FENCE } else { 0 };
        let door = owner.map_or(Door::Http, |(_, door)| door).as_str();
        let user = crate::call_search::searchable_user(context);
        // The call's row: the first eleven parameters of both the insert and `call_start`.
        macro_rules! bind_row {
            ($query:expr) => {
                $query
                    .bind(&call.id)
                    .bind(tenant_id)
                    .bind(&agent)
                    .bind(&call_info)
                    .bind(&context_text)
                    .bind(&pinned_text)
                    .bind(&at)
                    .bind(owner.map(|(node, _)| node))
                    .bind(fence)
                    .bind(door)
                    .bind(&user)
            };
        }
        let inserted: Result<bool, sqlx::Error> = with_pool!(self, |pool| {
            async {
                if let (Backend::Postgres, Some(max)) = (pool.kind(), max_active) {
                    // One statement: the tenant's row is locked only while the database runs it.
                    return bind_row!(sqlx::query_scalar(START_WITHIN_LIMIT))
                        .bind(i64::try_from(max).unwrap_or(i64::MAX))
                        .fetch_one(pool)
                        .await;
                }
                let mut tx = self.begin_write(pool).await?;
                if let Some(max) = max_active {
                    // SQLite's write lock is held already: no other writer counts meanwhile.
                    // A missing tenant is the insert's foreign key error below.
                    let live: Option<i64> = sqlx::query_scalar(LIVE_CALLS)
                        .bind(tenant_id)
                        .fetch_optional(&mut *tx)
                        .await?;
                    if live.is_some_and(|n| usize::try_from(n).unwrap_or(usize::MAX) >= max) {
                        tx.rollback().await?;
                        return Ok(false);
                    }
                }
                bind_row!(sqlx::query(
                    "INSERT INTO calls (id, tenant_id, agent, status, call_info, context, pinned, version, handoffs, created_at, owner_node, fence, door, user_id) \
                     VALUES ($1, $2, $3, 'active', $4, $5, $6, 0, 0, $7, $8, $9, $10, $11)",
                ))
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

    /// Where a call's timeline stands, without reading a record or opening its context: its
    /// status, how many invocation records it has (records are only ever added, so the count
    /// moves exactly when there is something new to show) and its context's version (which
    /// moves with each change of the context). `None` for no such call.
    pub async fn call_cursor(
        &self,
        tenant_id: &str,
        call_id: &str,
    ) -> Result<Option<CallCursor>, StoreError> {
        let row: Option<(String, i64, i64)> = with_pool!(self, |pool| {
            sqlx::query_as(
                "SELECT c.status, (SELECT COUNT(*) FROM call_invocations i \
                 WHERE i.tenant_id = c.tenant_id AND i.call_id = c.id), c.version \
                 FROM calls c WHERE c.tenant_id = $1 AND c.id = $2",
            )
            .bind(tenant_id)
            .bind(call_id)
            .fetch_optional(pool)
            .await?
        });
        row.map(|(status, total, version)| {
            Ok(CallCursor {
                status: CallStatus::parse(&status)?,
                records: u64::try_from(total).unwrap_or(0),
                context_version: version,
            })
        })
        .transpose()
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
                let mut tx = self.begin_write(pool).await?;
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
}
