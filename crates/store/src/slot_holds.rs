//! Short-lived holds on calendar slots: a booking takes one on its interval before it writes
//! anything to the calendar, so of two bookings of overlapping times — on one node or on
//! several sharing this database — exactly one goes on to the calendar.
//!
//! A hold names its tenant, its calendar (a caller-chosen identity, e.g. a hash of the CalDAV
//! URL), its holder (the booking's idempotency key: a retry of the same booking takes its own
//! hold again) and the interval `[starts_at, ends_at)` in epoch ms. Taking one runs in one
//! transaction that first locks the calendar's row in `slot_hold_calendars` (PostgreSQL; on
//! SQLite the write lock serialises it already), drops the calendar's expired holds, and inserts
//! the hold only when no other live hold overlaps it. The booking releases its hold when it
//! ends, whatever the outcome; a node that dies holding one leaves it to expire at its
//! `expires_at`, on the database's clock, which all nodes share.

use crate::ownership::now_ms;
use crate::{Store, StoreError, WritePool, with_pool};

/// The longest a hold may be asked to last: a booking takes seconds, and a hold left by a
/// dead node must not block its slot for long.
pub const MAX_HOLD_MS: i64 = 10 * 60 * 1000;

/// What taking a hold found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotHold {
    /// The interval is this holder's until it releases it or the hold expires.
    Held,
    /// Another holder's live hold overlaps the interval.
    Taken,
}

/// One slot hold: where, who, and when.
#[derive(Debug, Clone, Copy)]
pub struct SlotHoldRequest<'a> {
    /// The tenant whose calendar it is.
    pub tenant_id: &'a str,
    /// The calendar's identity (at most 128 characters; a hash suits).
    pub calendar: &'a str,
    /// Who holds it (the booking's idempotency key, at most 512 characters).
    pub holder: &'a str,
    /// The interval, epoch ms, half-open.
    pub starts_at: i64,
    /// Its end (after `starts_at`).
    pub ends_at: i64,
    /// How long the hold lasts from now, in ms (1 to [`MAX_HOLD_MS`]).
    pub ttl_ms: i64,
}

impl Store {
    /// Takes a hold on an interval of a calendar, unless another holder's live hold overlaps
    /// it. A holder that holds an overlapping interval already (a retry) gets its hold renewed.
    pub async fn hold_slot(&self, h: &SlotHoldRequest<'_>) -> Result<SlotHold, StoreError> {
        if h.calendar.len() > 128 || h.holder.len() > 512 || h.ends_at <= h.starts_at {
            return Err(StoreError::Invalid(
                "a slot hold needs a calendar id of at most 128 characters, a holder of at most 512 and an interval that ends after it starts".into(),
            ));
        }
        let ttl = h.ttl_ms.clamp(1, MAX_HOLD_MS);
        with_pool!(self, |pool| {
            let mut tx = self.begin_write(pool).await?;
            // Locks the calendar's row for the rest of the transaction: holds on one calendar
            // are decided one at a time.
            sqlx::query(
                "INSERT INTO slot_hold_calendars (tenant_id, calendar) VALUES ($1, $2) \
                 ON CONFLICT (tenant_id, calendar) DO UPDATE SET calendar = excluded.calendar",
            )
            .bind(h.tenant_id)
            .bind(h.calendar)
            .execute(&mut *tx)
            .await?;
            let (now,): (i64,) = sqlx::query_as(sqlx::AssertSqlSafe(format!(
                "SELECT {}",
                now_ms(pool.kind())
            )))
            .fetch_one(&mut *tx)
            .await?;
            sqlx::query(
                "DELETE FROM slot_holds WHERE tenant_id = $1 AND calendar = $2 \
                 AND (expires_at <= $3 OR holder = $4)",
            )
            .bind(h.tenant_id)
            .bind(h.calendar)
            .bind(now)
            .bind(h.holder)
            .execute(&mut *tx)
            .await?;
            let (overlapping,): (i64,) = sqlx::query_as(
                "SELECT COUNT(*) FROM slot_holds WHERE tenant_id = $1 AND calendar = $2 \
                 AND starts_at < $4 AND $3 < ends_at",
            )
            .bind(h.tenant_id)
            .bind(h.calendar)
            .bind(h.starts_at)
            .bind(h.ends_at)
            .fetch_one(&mut *tx)
            .await?;
            if overlapping > 0 {
                tx.rollback().await?;
                return Ok(SlotHold::Taken);
            }
            sqlx::query(
                "INSERT INTO slot_holds (tenant_id, calendar, holder, starts_at, ends_at, expires_at) \
                 VALUES ($1, $2, $3, $4, $5, $6)",
            )
            .bind(h.tenant_id)
            .bind(h.calendar)
            .bind(h.holder)
            .bind(h.starts_at)
            .bind(h.ends_at)
            .bind(now + ttl)
            .execute(&mut *tx)
            .await?;
            tx.commit().await?;
            Ok(SlotHold::Held)
        })
    }

    /// Releases a holder's hold on a calendar (nothing when it holds none).
    pub async fn release_slot(
        &self,
        tenant_id: &str,
        calendar: &str,
        holder: &str,
    ) -> Result<(), StoreError> {
        with_pool!(self, |pool| {
            let mut tx = self.begin_write(pool).await?;
            sqlx::query(
                "DELETE FROM slot_holds WHERE tenant_id = $1 AND calendar = $2 AND holder = $3",
            )
            .bind(tenant_id)
            .bind(calendar)
            .bind(holder)
            .execute(&mut *tx)
            .await?;
            tx.commit().await?;
            Ok(())
        })
    }
}
