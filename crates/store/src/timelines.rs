//! A call's invocation records a page at a time, however many the call has: a keyset cursor on
//! the record's `seq` (the order records were committed in) both ways, never an offset, read
//! through the `(tenant_id, call_id, seq)` index of migration 0027, so each page costs the
//! same at the start of a long call as at its end.

use switchboard_runtime::InvocationRecord;

use crate::page::encode_cursor;
use crate::{Page, Store, StoreError, WritePool, parse_json, with_pool};

/// Which page of a call's records to read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordsAt {
    /// The call's first records.
    First,
    /// The records after a page's `next` cursor.
    After(String),
    /// The records before a page's `previous` cursor (the newest of them).
    Before(String),
    /// The call's newest records.
    Newest,
}

/// One page of a call's records, oldest first, and where it stands in the call.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordPage {
    /// The records, in the order they were committed.
    pub items: Vec<InvocationRecord>,
    /// Pass as [`RecordsAt::After`] for the records after this page: given whenever the page
    /// holds a record (or was asked after a cursor), so a live call's later records can be
    /// asked for too; `None` only for an empty first page.
    pub next: Option<String>,
    /// Whether the call had records after this page when it was read.
    pub more: bool,
    /// Pass as [`RecordsAt::Before`] for the records before this page; `None` when it holds
    /// the call's first.
    pub previous: Option<String>,
    /// How many of the call's records come before this page.
    pub before: u64,
    /// How many records the call has in all (0 for an unknown call).
    pub total: u64,
}

fn cursor_of(seq: i64) -> String {
    encode_cursor(&[&seq.to_string()])
}

/// The `seq` a cursor names; a cursor this server did not give is `Invalid`.
fn seq_of(cursor: &str, param: &str) -> Result<i64, StoreError> {
    let bad = || {
        StoreError::Invalid(format!(
            "the cursor `{param}` is not one this server returned; pass the `next` or `previous` \
             value of a page of this call's invocations, or omit it for the first page"
        ))
    };
    let keys = Page::after(1, cursor).cursor(1).map_err(|_| bad())?;
    keys.and_then(|k| k.first().and_then(|s| s.parse::<i64>().ok()))
        .ok_or_else(bad)
}

impl Store {
    /// A page of at most `limit` (1 to [`Page::MAX_LIMIT`]) of a call's invocation records,
    /// oldest first, with the cursors either side and the call's count: records, count and
    /// position are read in one transaction, so they agree. An unknown call (or another
    /// tenant's) is an empty page of a call with no records.
    pub async fn invocation_page(
        &self,
        tenant_id: &str,
        call_id: &str,
        at: &RecordsAt,
        limit: u32,
    ) -> Result<RecordPage, StoreError> {
        let fetch = Page::first(limit).fetch_limit()?;
        let limit = usize::try_from(limit).unwrap_or(usize::MAX);
        // Forward pages read up from a seq, backward pages down from one.
        let (forward, from) = match at {
            RecordsAt::First => (true, 0),
            RecordsAt::After(c) => (true, seq_of(c, "after")?),
            RecordsAt::Before(c) => (false, seq_of(c, "before")?),
            RecordsAt::Newest => (false, i64::MAX),
        };
        let (mut rows, total, before): (Vec<(i64, String)>, i64, i64) = with_pool!(self, |pool| {
            let mut tx = pool.begin_read().await?;
            let query = if forward {
                "SELECT seq, record FROM call_invocations WHERE tenant_id = $1 AND call_id = $2 \
                 AND seq > $3 ORDER BY seq LIMIT $4"
            } else {
                "SELECT seq, record FROM call_invocations WHERE tenant_id = $1 AND call_id = $2 \
                 AND seq < $3 ORDER BY seq DESC LIMIT $4"
            };
            let rows: Vec<(i64, String)> = sqlx::query_as(query)
                .bind(tenant_id)
                .bind(call_id)
                .bind(from)
                .bind(fetch)
                .fetch_all(&mut *tx)
                .await?;
            let total: i64 = sqlx::query_scalar(
                "SELECT COUNT(*) FROM call_invocations WHERE tenant_id = $1 AND call_id = $2",
            )
            .bind(tenant_id)
            .bind(call_id)
            .fetch_one(&mut *tx)
            .await?;
            // The records before the page's first (or, for an empty page, before where it
            // would start).
            let first = if forward {
                rows.first().map_or(from.saturating_add(1), |r| r.0)
            } else {
                rows.get(rows.len().min(limit).saturating_sub(1))
                    .map_or(0, |r| r.0)
            };
            let before: i64 = sqlx::query_scalar(
                "SELECT COUNT(*) FROM call_invocations WHERE tenant_id = $1 AND call_id = $2 \
                 AND seq < $3",
            )
            .bind(tenant_id)
            .bind(call_id)
            .bind(first)
            .fetch_one(&mut *tx)
            .await?;
            tx.commit().await?;
            (rows, total, before)
        });
        let more = rows.len() > limit;
        rows.truncate(limit);
        if !forward {
            rows.reverse();
        }
        let total = u64::try_from(total).unwrap_or(0);
        let before = u64::try_from(before).unwrap_or(0);
        let shown = u64::try_from(rows.len()).unwrap_or(u64::MAX);
        let (first, last) = (rows.first().map(|r| r.0), rows.last().map(|r| r.0));
        let (later, previous) = if forward {
            (more, first.filter(|_| before > 0).map(cursor_of))
        } else {
            (
                before + shown < total,
                first.filter(|_| more).map(cursor_of),
            )
        };
        // An empty page after a cursor keeps it: nothing was after it yet.
        let next = last.map(cursor_of).or_else(|| match at {
            RecordsAt::After(c) => Some(c.clone()),
            _ => None,
        });
        let items = rows
            .iter()
            .map(|(_, r)| parse_json("invocation record", r))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(RecordPage {
            items,
            next,
            more: later,
            previous,
            before,
            total,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_names_its_record_and_a_foreign_one_names_the_parameter() {
        for seq in [0, 1, 4_096, i64::MAX] {
            assert_eq!(seq_of(&cursor_of(seq), "after").unwrap(), seq);
        }
        let other_list = encode_cursor(&["2026-11-29T10:00:00.000Z", "c1"]);
        for bad in ["", "nonsense", "W10", other_list.as_str()] {
            match seq_of(bad, "before") {
                Err(StoreError::Invalid(m)) => assert!(m.contains("`before`"), "{m}"),
                other => panic!("{bad:?}: {other:?}"),
            }
        }
    }
}
