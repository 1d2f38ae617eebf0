//! Searching a tenant's calls, at any number of them: a page at a time, newest first, through
//! an opaque keyset cursor (the last call's start time and id, never an offset), by call id,
//! phone number, user id, tool invoked, error code, status and time range.
//!
//! Each search key has an index in the list's order (migration 0020), so a page reads about its
//! own rows whatever the tenant's calls number. Every query names the tenant: a cursor is only a
//! place in a tenant's list, so one made for another tenant finds only this tenant's calls.

use serde::{Deserialize, Serialize};

use crate::page::encode_cursor;
use crate::{Backend, Page, Store, StoreError, WritePool, with_pool};

/// The longest phone number, user id or call id a search takes (longer ones are not indexed).
pub const MAX_SEARCH_KEY: usize = 256;

/// What a call list shows of each call: no context and no record, so a page opens nothing
/// sealed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallSummary {
    /// The call's id.
    pub id: String,
    /// The active agent.
    pub agent: String,
    /// `active` or `ended`.
    pub status: crate::CallStatus,
    /// The caller's number, if the call has one.
    pub from: Option<String>,
    /// The number called, if the call has one.
    pub to: Option<String>,
    /// `user.id` as the call started (none when absent, or longer than [`MAX_SEARCH_KEY`]).
    pub user_id: Option<String>,
    /// RFC 3339, when it started.
    pub created_at: String,
    /// RFC 3339, when it ended.
    pub ended_at: Option<String>,
    /// Whether one of its invocations failed.
    pub failed: bool,
}

/// Which calls a status filter keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StatusFilter {
    /// Going on.
    Active,
    /// Over.
    Ended,
    /// With an invocation that failed, going on or over.
    Failed,
}

impl StatusFilter {
    /// `active`, `ended` or `failed`; anything else is refused naming the values.
    pub fn parse(s: &str) -> Result<Self, StoreError> {
        match s {
            "active" => Ok(StatusFilter::Active),
            "ended" => Ok(StatusFilter::Ended),
            "failed" => Ok(StatusFilter::Failed),
            other => Err(StoreError::Invalid(format!(
                "status `{}` is not one a call has: use `active`, `ended` or `failed` (an invocation failed), or leave it out for any",
                crate::truncate(other, 40)
            ))),
        }
    }

    /// As written in a query string.
    pub fn as_str(self) -> &'static str {
        match self {
            StatusFilter::Active => "active",
            StatusFilter::Ended => "ended",
            StatusFilter::Failed => "failed",
        }
    }
}

/// A time bound of a search, in the form calls' times are stored (RFC 3339 UTC, milliseconds),
/// so comparing the text compares the times.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimeBound(String);

impl TimeBound {
    /// Reads RFC 3339 (any offset, e.g. `2026-11-24T09:00:00Z` or `…+02:00`) or a date
    /// (`2026-11-24`, its midnight UTC). `param` names the parameter in the error.
    pub fn parse(param: &str, s: &str) -> Result<Self, StoreError> {
        use chrono::{DateTime, NaiveDate, Utc};
        let s = s.trim();
        let at = DateTime::parse_from_rfc3339(s)
            .map(|t| t.with_timezone(&Utc))
            .or_else(|_| {
                NaiveDate::parse_from_str(s, "%Y-%m-%d")
                    .map(|d| d.and_hms_opt(0, 0, 0).unwrap_or_default().and_utc())
            })
            .map_err(|_| {
                StoreError::Invalid(format!(
                    "`{param}` is `{}`, not a time: write RFC 3339, e.g. `2026-11-24T09:00:00Z` or `2026-11-24T10:00:00+01:00`, or a date, e.g. `2026-11-24`",
                    crate::truncate(s, 60)
                ))
            })?;
        Ok(TimeBound(at.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()))
    }

    /// The bound as stored times are written.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// What to look for among a tenant's calls: each field given narrows the list, all of them
/// together (and). Every string is matched exactly.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CallSearch {
    /// The call with this id.
    pub call_id: Option<String>,
    /// Calls from or to this number.
    pub number: Option<String>,
    /// Calls whose `user.id` is this.
    pub user_id: Option<String>,
    /// Calls whose active agent is this one.
    pub agent: Option<String>,
    /// Calls that invoked this tool.
    pub tool: Option<String>,
    /// Calls with an invocation that failed with this error code.
    pub error: Option<String>,
    /// Active, ended, or with a failed invocation.
    pub status: Option<StatusFilter>,
    /// `Some(true)`: calls with an invocation that failed; `Some(false)`: calls without one.
    pub failed: Option<bool>,
    /// Calls started at or after it.
    pub since: Option<TimeBound>,
    /// Calls started before it.
    pub until: Option<TimeBound>,
}

/// Where a page of calls starts.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum CallsAt {
    /// The newest calls.
    #[default]
    Newest,
    /// The calls older than the cursor's (a page's `next`).
    After(String),
    /// The calls newer than the cursor's (a page's `previous`).
    Before(String),
}

/// One page of calls, newest first, with the cursors of the pages beside it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallPage {
    /// The calls, newest first.
    pub items: Vec<CallSummary>,
    /// The cursor of the older calls (`after`); `None` when there are none.
    pub next: Option<String>,
    /// The cursor of the newer calls (`before`); `None` on the newest page.
    pub previous: Option<String>,
}

impl CallSearch {
    /// Refuses keys no call can match (empty, or longer than any indexed one), naming the
    /// parameter.
    fn check(&self) -> Result<(), StoreError> {
        let keys = [
            ("id", &self.call_id, MAX_SEARCH_KEY),
            ("number", &self.number, MAX_SEARCH_KEY),
            ("user_id", &self.user_id, MAX_SEARCH_KEY),
            ("agent", &self.agent, 64),
            ("tool", &self.tool, 64),
            ("error", &self.error, 64),
        ];
        for (param, value, max) in keys {
            if let Some(v) = value
                && (v.is_empty() || v.chars().count() > max)
            {
                return Err(StoreError::Invalid(format!(
                    "`{param}` must be 1 to {max} characters; leave it out to match any"
                )));
            }
        }
        if let (Some(since), Some(until)) = (&self.since, &self.until)
            && since.as_str() >= until.as_str()
        {
            return Err(StoreError::Invalid(
                "`since` must be before `until`: the range is calls started at or after `since` and before `until`"
                    .to_owned(),
            ));
        }
        Ok(())
    }
}

/// The cursor's place: a call's start time and id.
fn decode(param: &str, cursor: &str) -> Result<(String, String), StoreError> {
    let page = Page::after(1, cursor);
    let bad = || {
        StoreError::Invalid(format!(
            "the cursor `{param}` is not one this server returned; pass a page's `next` as `after` or its `previous` as `before`, or leave both out for the newest calls"
        ))
    };
    let keys = page.cursor(2).map_err(|_| bad())?.ok_or_else(bad)?;
    match <[String; 2]>::try_from(keys) {
        Ok([at, id]) => Ok((at, id)),
        Err(_) => Err(bad()),
    }
}

type SummaryTuple = (
    String,
    String,
    String,
    Option<String>,
    Option<String>,
    Option<String>,
    String,
    Option<String>,
    bool,
);

/// A failed invocation, as migration 0020's partial index `call_invocations_failed` writes it.
fn failed(kind: Backend, alias: &str) -> String {
    match kind {
        Backend::Sqlite => format!("json_extract({alias}.record, '$.ok') = 0"),
        Backend::Postgres => format!("({alias}.record::jsonb ->> 'ok') = 'false'"),
    }
}

/// The SQL of one search and its text parameters (`$1` is the tenant), in order.
fn search_sql(
    kind: Backend,
    tenant_id: &str,
    search: &CallSearch,
    at: Option<(bool, String, String)>,
    fetch: i64,
) -> (String, Vec<String>) {
    let mut binds = vec![tenant_id.to_owned()];
    let mut bind = |v: &str| {
        binds.push(v.to_owned());
        format!("${}", binds.len())
    };
    let mut wheres = vec!["c.tenant_id = $1".to_owned()];
    if let Some(id) = &search.call_id {
        wheres.push(format!("c.id = {}", bind(id)));
    }
    // A number is the caller's or the line called: one branch per index (below).
    let number = search.number.as_deref().map(&mut bind);
    if let Some(u) = &search.user_id {
        wheres.push(format!("c.user_id = {}", bind(u)));
    }
    if let Some(a) = &search.agent {
        wheres.push(format!("c.agent = {}", bind(a)));
    }
    if let Some(t) = &search.tool {
        let tool = match kind {
            Backend::Sqlite => "substr(json_extract(i.record, '$.tool'), 1, 64)",
            Backend::Postgres => "left(i.record::jsonb ->> 'tool', 64)",
        };
        wheres.push(format!(
            "c.id IN (SELECT i.call_id FROM call_invocations i WHERE i.tenant_id = $1 AND {tool} = {})",
            bind(t)
        ));
    }
    let error_of = match kind {
        Backend::Sqlite => "json_extract(f.record, '$.error')",
        Backend::Postgres => "(f.record::jsonb ->> 'error')",
    };
    if let Some(e) = &search.error {
        wheres.push(format!(
            "c.id IN (SELECT f.call_id FROM call_invocations f WHERE f.tenant_id = $1 AND {} AND {error_of} = {})",
            failed(kind, "f"),
            bind(e)
        ));
    }
    match search.status {
        None => {}
        Some(StatusFilter::Active) => wheres.push("c.status = 'active'".to_owned()),
        Some(StatusFilter::Ended) => wheres.push("c.status = 'ended'".to_owned()),
        Some(StatusFilter::Failed) => wheres.push(format!(
            "c.id IN (SELECT f.call_id FROM call_invocations f WHERE f.tenant_id = $1 AND {})",
            failed(kind, "f")
        )),
    }
    match search.failed {
        None => {}
        Some(failed_) => wheres.push(format!(
            "c.id {}IN (SELECT f.call_id FROM call_invocations f WHERE f.tenant_id = $1 AND {})",
            if failed_ { "" } else { "NOT " },
            failed(kind, "f")
        )),
    }
    if let Some(since) = &search.since {
        wheres.push(format!("c.created_at >= {}", bind(since.as_str())));
    }
    if let Some(until) = &search.until {
        wheres.push(format!("c.created_at < {}", bind(until.as_str())));
    }
    // Newest first; `before` reads the newer calls upwards, and the caller turns them round.
    let order = match at {
        Some((older, ts, id)) => {
            let (cmp, ts, id) = (if older { "<" } else { ">" }, bind(&ts), bind(&id));
            // The plain bound lets both databases start the index range at the cursor; the
            // OR alone, PostgreSQL applies row by row from the start of the list.
            wheres.push(format!(
                "c.created_at {cmp}= {ts} AND (c.created_at {cmp} {ts} OR (c.created_at = {ts} AND c.id {cmp} {id}))"
            ));
            if older { "DESC" } else { "ASC" }
        }
        None => "DESC",
    };
    let select = |extra: &str| {
        format!(
            "SELECT c.id, c.agent, c.status, c.from_number, c.to_number, c.user_id, c.created_at, c.ended_at, \
             EXISTS (SELECT 1 FROM call_invocations f WHERE f.tenant_id = c.tenant_id AND f.call_id = c.id AND {}) AS failed \
             FROM calls c WHERE {}{extra} ORDER BY c.created_at {order}, c.id {order} LIMIT {fetch}",
            failed(kind, "f"),
            wheres.join(" AND ")
        )
    };
    let sql = match number {
        None => select(""),
        // Each branch reads a page in order through its own index (as one OR, SQLite walks the
        // whole list, and PostgreSQL sorts every call of a busy line); a call from and to the
        // number is in both, once.
        Some(p) => format!(
            "SELECT * FROM ({}) a UNION SELECT * FROM ({}) b ORDER BY created_at {order}, id {order} LIMIT {fetch}",
            select(&format!(" AND c.from_number = {p}")),
            select(&format!(" AND c.to_number = {p}"))
        ),
    };
    (sql, binds)
}

impl Store {
    /// A page of at most `limit` (1 to [`Page::MAX_LIMIT`]) of the tenant's calls that match
    /// `search`, newest first, starting at `at`.
    pub async fn search_calls(
        &self,
        tenant_id: &str,
        search: &CallSearch,
        at: &CallsAt,
        limit: u32,
    ) -> Result<CallPage, StoreError> {
        let fetch = Page::first(limit).fetch_limit()?;
        search.check()?;
        let cursor = match at {
            CallsAt::Newest => None,
            CallsAt::After(c) => Some(decode("after", c).map(|(t, i)| (true, t, i))?),
            CallsAt::Before(c) => Some(decode("before", c).map(|(t, i)| (false, t, i))?),
        };
        let backwards = matches!(at, CallsAt::Before(_));
        let rows: Vec<SummaryTuple> = with_pool!(self, |pool| {
            let (sql, binds) = search_sql(pool.kind(), tenant_id, search, cursor, fetch);
            let mut query = sqlx::query_as(sqlx::AssertSqlSafe(sql));
            for b in binds {
                query = query.bind(b);
            }
            query.fetch_all(pool).await?
        });
        let mut items = rows
            .into_iter()
            .map(
                |(id, agent, status, from, to, user, created_at, ended_at, failed)| {
                    Ok(CallSummary {
                        status: crate::CallStatus::parse(&status)?,
                        user_id: user.filter(|u| !u.is_empty()),
                        id,
                        agent,
                        from,
                        to,
                        created_at,
                        ended_at,
                        failed,
                    })
                },
            )
            .collect::<Result<Vec<_>, StoreError>>()?;
        let limit = usize::try_from(limit).unwrap_or(usize::MAX);
        let more = items.len() > limit;
        items.truncate(limit);
        if backwards {
            items.reverse();
        }
        let key = |c: &CallSummary| encode_cursor(&[&c.created_at, &c.id]);
        // Coming from a cursor, the calls on its other side exist (or did a moment ago).
        let (next, previous) = match at {
            CallsAt::Newest => (more.then(|| items.last().map(key)).flatten(), None),
            CallsAt::After(_) => (
                more.then(|| items.last().map(key)).flatten(),
                items.first().map(key),
            ),
            CallsAt::Before(_) => (
                items.last().map(key),
                more.then(|| items.first().map(key)).flatten(),
            ),
        };
        Ok(CallPage {
            items,
            next,
            previous,
        })
    }

    /// Where the tenant's call list stands, to tell cheaply whether it changed: its newest
    /// call's start and id, and how many of its calls are live (migration 0015 keeps that
    /// count on the tenant's row). A call that starts or ends moves one of them.
    pub async fn calls_cursor(
        &self,
        tenant_id: &str,
    ) -> Result<(Option<(String, String)>, i64), StoreError> {
        with_pool!(self, |pool| {
            let mut tx = pool.begin_read().await?;
            let newest: Option<(String, String)> = sqlx::query_as(
                "SELECT created_at, id FROM calls WHERE tenant_id = $1 \
                 ORDER BY created_at DESC, id DESC LIMIT 1",
            )
            .bind(tenant_id)
            .fetch_optional(&mut *tx)
            .await?;
            let live: Option<i64> =
                sqlx::query_scalar("SELECT live_calls FROM tenants WHERE id = $1")
                    .bind(tenant_id)
                    .fetch_optional(&mut *tx)
                    .await?;
            tx.commit().await?;
            Ok((newest, live.unwrap_or(0)))
        })
    }

    /// Fills `user_id` of the calls stored before migration 0020 from their contexts (sealed:
    /// SQL cannot read them); returns how many. [`Store::migrate`] runs it.
    pub async fn index_call_users(&self) -> Result<u64, StoreError> {
        const BATCH: i64 = 500;
        let mut done = 0;
        loop {
            let unread: Vec<(String, String, String)> = with_pool!(self, |pool| {
                sqlx::query_as(
                    "SELECT tenant_id, id, context FROM calls WHERE user_id IS NULL LIMIT $1",
                )
                .bind(BATCH)
                .fetch_all(pool)
                .await?
            });
            if unread.is_empty() {
                return Ok(done);
            }
            for (tenant_id, call_id, text) in unread {
                // A context that cannot be opened is left unsearchable by user, not retried.
                let user =
                    crate::calls::open_context(self.master_key(), &tenant_id, &call_id, &text)
                        .map(|c| searchable_user(&c))
                        .unwrap_or_default();
                done += with_pool!(self, |pool| {
                    sqlx::query(
                        "UPDATE calls SET user_id = $3 WHERE tenant_id = $1 AND id = $2 AND user_id IS NULL",
                    )
                    .bind(&tenant_id)
                    .bind(&call_id)
                    .bind(&user)
                    .execute(pool)
                    .await?
                    .rows_affected()
                });
            }
        }
    }
}

/// A call's `user.id` as its search key: a string, or a number written as digits; `''` when
/// it has none or one longer than [`MAX_SEARCH_KEY`] characters (not indexed).
pub(crate) fn searchable_user(context: &switchboard_core::Context) -> String {
    let id = match context.user.get("id") {
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(serde_json::Value::Number(n)) => n.to_string(),
        _ => return String::new(),
    };
    if id.chars().count() > MAX_SEARCH_KEY {
        return String::new();
    }
    id
}
