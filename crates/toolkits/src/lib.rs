//! Switchboard's built-in toolkit handlers: the services behind the `calendar.*` and
//! `email.send` effects.
//!
//! # Layout
//! - [`caldav`]: CalDAV calendars (`REPORT` calendar-query, idempotent `PUT` of a VEVENT).
//! - [`slots`]: free-slot arithmetic for `check_availability` (pure).
//! - [`smtp`]: email over SMTP (lettre), with a deterministic `Message-ID` and a per-tenant rate.
//!
//! [`Calendars`] is the runtime's `Calendar` handler: it picks the provider from the agent
//! tool's config (a CalDAV `url`), so the toolkit functions and tenants' own `calendar.*`
//! actions reach the same code.
#![forbid(unsafe_code)]

pub mod caldav;
pub mod slots;
pub mod smtp;

use serde_json::Value;
use switchboard_runtime::BoxFuture;
use switchboard_runtime::effects::{Calendar, CalendarOp, EmailMessage, EmailSender, ToolkitScope};

/// The calendar handler of a deployment.
#[derive(Debug)]
pub struct Calendars {
    caldav: caldav::CalDav,
}

impl Calendars {
    /// `allow_private`: whether calendars on loopback and private networks may be reached
    /// (tests and local development only).
    pub fn new(allow_private: bool) -> Self {
        Calendars {
            caldav: caldav::CalDav::new(allow_private),
        }
    }
}

impl Calendar for Calendars {
    fn call<'a>(
        &'a self,
        scope: &'a ToolkitScope<'a>,
        op: &'a CalendarOp,
    ) -> BoxFuture<'a, Result<Value, String>> {
        Box::pin(async move {
            if scope.config.get("url").is_some() {
                self.caldav.call(scope, op).await
            } else {
                Err("the calendar is not connected: this agent's calendar has no CalDAV `url` and Google Calendar is not available on this server. Tell the caller you cannot book by phone right now".to_owned())
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
