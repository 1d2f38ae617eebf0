//! The hold a booking takes on its slot in the store before it writes anything to a calendar,
//! so that of two bookings of overlapping times — on any nodes sharing the database — exactly
//! one goes on to the calendar, and no booking ever has to take back an event it made.
//!
//! A hold lasts [`HOLD_TTL_MS`] at most: longer than a booking's requests take (each has a
//! 10 s deadline, a tool 20 s by default), short enough that a hold left by a node that died
//! frees its slot within a minute. A booking releases its hold when it ends, unless the
//! calendar's answer to the write was lost (a timeout): then the event may exist, and the hold
//! stays until it expires so no one else books the slot meanwhile.

use sha2::{Digest, Sha256};
use switchboard_core::ToolError;
use switchboard_store::{SlotHold, SlotHoldRequest, Store};

use crate::failure;
use crate::slots::Interval;

/// How long a hold lasts unless released.
pub const HOLD_TTL_MS: i64 = 60_000;

/// The store's slot holds, for the calendar handlers.
#[derive(Debug, Clone)]
pub(crate) struct Holds {
    store: Store,
}

/// A hold taken; [`Hold::release`] gives it back.
#[derive(Debug)]
pub(crate) struct Hold<'a> {
    holds: &'a Holds,
    tenant: String,
    calendar: String,
    holder: String,
}

/// A calendar's identity in the store: a hash of what names it, never the URL or id itself.
pub(crate) fn calendar_key(parts: &[&str]) -> String {
    let digest = Sha256::digest(parts.join("\u{0}").as_bytes());
    digest.iter().take(20).map(|b| format!("{b:02x}")).collect()
}

impl Holds {
    pub(crate) fn new(store: Store) -> Self {
        Holds { store }
    }

    /// Holds `slot` of `calendar` for `holder` (the booking's idempotency key). `Ok(None)`:
    /// another booking holds an overlapping slot.
    pub(crate) async fn take(
        &self,
        tenant: &str,
        calendar: &str,
        holder: &str,
        slot: Interval,
    ) -> Result<Option<Hold<'_>>, ToolError> {
        let request = SlotHoldRequest {
            tenant_id: tenant,
            calendar,
            holder,
            starts_at: slot.0.timestamp_millis(),
            ends_at: slot.1.timestamp_millis(),
            ttl_ms: HOLD_TTL_MS,
        };
        match self.store.hold_slot(&request).await {
            Ok(SlotHold::Held) => Ok(Some(Hold {
                holds: self,
                tenant: tenant.to_owned(),
                calendar: calendar.to_owned(),
                holder: holder.to_owned(),
            })),
            Ok(SlotHold::Taken) => Ok(None),
            Err(e) => {
                tracing::warn!(name: "calendar_hold_unavailable", error = %e, "calendar_hold_unavailable");
                Err(failure::unavailable(
                    "the booking could not be secured right now (the booking database did not answer); nothing was booked. Try again in a few seconds",
                ))
            }
        }
    }
}

impl Hold<'_> {
    /// Gives the slot back. A release that fails leaves the hold to expire.
    pub(crate) async fn release(self) {
        if let Err(e) = self
            .holds
            .store
            .release_slot(&self.tenant, &self.calendar, &self.holder)
            .await
        {
            tracing::warn!(name: "calendar_hold_release_failed", error = %e, "calendar_hold_release_failed");
        }
    }

    /// Keeps the hold until it expires: the write's outcome is unknown.
    pub(crate) fn keep(self) {}
}
