//! Switchboard's built-in toolkit handlers: the services behind the `calendar.*` and
//! `email.send` effects.
//!
//! # Layout
//! - `bookings`: what the caller's own-booking actions share (whose booking an event is, the
//!   window of `find_free_slots`).
//! - [`caldav`]: CalDAV calendars (`REPORT` calendar-query, idempotent `PUT` of a VEVENT).
//! - `events`: what both calendar providers answer (events as JSON, availability, the refusal
//!   of a taken slot with free times).
//! - `failure`: the typed failures of the calendars (`slot_taken`, `not_connected`, …).
//! - [`google`]: Google Calendar API v3 (`events`, `freeBusy`; client-chosen event ids).
//! - [`holds`]: the hold a booking takes on its slot in the store before it writes, so no two
//!   bookings of one time reach a calendar.
//! - [`oauth`]: OAuth2 with PKCE for toolkits: authorize URLs, code exchange, access tokens
//!   refreshed once across nodes.
//! - [`rules`]: the booking rules applied to times (hours per weekday, closed dates, step,
//!   buffers, notice, horizon; pure): whether a slot may be booked, and the free slots.
//! - [`slots`]: the calendar's clock ([`slots::Zone`]) and interval overlap (pure).
//! - [`smtp`]: email over SMTP (lettre), with a deterministic `Message-ID` and a per-tenant rate.
//!
//! [`Calendars`] is the runtime's `Calendar` handler: it picks the provider from the agent
//! tool's config (a CalDAV `url`) or the Google connection the server names in it, so the toolkit functions and tenants' own `calendar.*`
//! actions reach the same code.
#![forbid(unsafe_code)]

mod bookings;
pub mod caldav;
mod events;
mod failure;
pub mod google;
pub mod holds;
pub mod oauth;
pub mod rules;
pub mod slots;
pub mod smtp;

use serde_json::Value;
use switchboard_core::ToolError;
use switchboard_runtime::BoxFuture;
use switchboard_runtime::effects::{Calendar, CalendarOp, EmailMessage, EmailSender, ToolkitScope};
use switchboard_store::Store;

/// The calendar handler of a deployment.
#[derive(Debug)]
pub struct Calendars {
    caldav: caldav::CalDav,
    /// Present when the deployment configured a Google OAuth client.
    google: Option<google::GoogleCalendar>,
    /// Where bookings hold their slots.
    holds: holds::Holds,
}

impl Calendars {
    /// `store`: where bookings hold their slots (shared by every node). `allow_private`:
    /// whether calendars on loopback and private networks may be reached (tests and local
    /// development only).
    pub fn new(store: Store, allow_private: bool) -> Self {
        let holds = holds::Holds::new(store);
        Calendars {
            caldav: caldav::CalDav::new(allow_private).holding(holds.clone()),
            google: None,
            holds,
        }
    }

    /// Serves agents connected to Google Calendar as well.
    pub fn with_google(mut self, google: google::GoogleCalendar) -> Self {
        self.google = Some(google.holding(self.holds.clone()));
        self
    }
}

impl Calendar for Calendars {
    fn call<'a>(
        &'a self,
        scope: &'a ToolkitScope<'a>,
        op: &'a CalendarOp,
    ) -> BoxFuture<'a, Result<Value, ToolError>> {
        Box::pin(async move {
            if scope.config.get("url").is_some() {
                self.caldav.call(scope, op).await
            } else if let (Some(g), true) = (&self.google, google::GoogleCalendar::serves(scope)) {
                g.call(scope, op).await
            } else {
                Err(failure::not_connected(
                    "the calendar is not connected: this agent's calendar has no CalDAV `url` and Google Calendar is not available on this server. Tell the caller you cannot book by phone right now",
                ))
            }
        })
    }
}

impl EmailSender for smtp::Smtp {
    fn send<'a>(
        &'a self,
        scope: &'a ToolkitScope<'a>,
        message: &'a EmailMessage,
    ) -> BoxFuture<'a, Result<Value, String>> {
        Box::pin(smtp::Smtp::send(self, scope, message))
    }
}
