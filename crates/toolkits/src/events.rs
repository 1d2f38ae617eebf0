//! What both calendar providers tell the model: events as JSON, the availability answer, and
//! the refusal of a taken slot with the free times to offer instead. CalDAV and Google differ in
//! how they read a calendar, not in what they answer.

use chrono::{DateTime, Duration, FixedOffset, Utc};
use serde_json::{Value, json};

use switchboard_core::ToolError;

use crate::caldav::rfc3339;
use crate::failure;
use crate::slots::{self, Interval, WorkingHours, Zone};

/// How far ahead free times are looked for.
pub(crate) const SEARCH_DAYS: i64 = 7;
/// Free times offered when a slot is taken.
pub(crate) const ALTERNATIVES: usize = 3;

/// One event as the model reads it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Event {
    /// The CalDAV UID or the Google event id.
    pub(crate) id: String,
    /// When the provider stored it, where it says (Google's `created`).
    pub(crate) created: Option<DateTime<Utc>>,
    pub(crate) title: String,
    pub(crate) start: DateTime<Utc>,
    pub(crate) end: DateTime<Utc>,
    pub(crate) description: Option<String>,
    /// The call that booked it, when Switchboard did (Google's private extended property,
    /// CalDAV's `X-SWITCHBOARD-CALL`).
    pub(crate) call: Option<String>,
    /// The caller's number (or user id) of that call, when known.
    pub(crate) caller: Option<String>,
    /// Attendee addresses (`mailto:` or bare).
    pub(crate) attendees: Vec<String>,
}

impl Event {
    /// The event in the offset the model asked in.
    pub(crate) fn json(&self, tz: &FixedOffset) -> Value {
        let mut v = json!({
            "id": self.id,
            "title": self.title,
            "start": rfc3339(self.start.with_timezone(tz)),
            "end": rfc3339(self.end.with_timezone(tz)),
        });
        if let (Some(d), Value::Object(m)) = (&self.description, &mut v) {
            m.insert("description".into(), json!(d));
        }
        v
    }

    pub(crate) fn interval(&self) -> Interval {
        (self.start, self.end)
    }
}

/// The slot a caller asked about, and where its working hours are read.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Asked {
    pub(crate) start: DateTime<FixedOffset>,
    pub(crate) len: Duration,
    pub(crate) hours: WorkingHours,
    pub(crate) zone: Zone,
}

impl Asked {
    fn next_free(&self, busy: &[Interval], want: usize) -> Vec<Interval> {
        let from = self.start.to_utc();
        let horizon = from + Duration::days(SEARCH_DAYS);
        slots::next_free(from, self.len, busy, self.hours, self.zone, horizon, want)
    }

    /// `check_availability`'s answer: `conflicts` (in the asked offset), and when the slot is
    /// taken or outside working hours the next free slots (in the zone's offset of their day).
    pub(crate) fn availability(&self, conflicts: Vec<Value>, busy: &[Interval]) -> Value {
        let in_hours = self.in_hours();
        let available = conflicts.is_empty() && in_hours;
        let next = if available {
            Vec::new()
        } else {
            self.alternatives(busy)
        };
        let zone = self.zone;
        let mut out = json!({
            "available": available,
            "start": rfc3339(self.start),
            "end": rfc3339(self.start + self.len),
            "conflicts": conflicts,
            "next_free_slots": next,
        });
        if !in_hours && let Value::Object(m) = &mut out {
            m.insert(
                "reason".into(),
                json!(format!(
                    "outside working hours ({}-{} {})",
                    self.hours.start.format("%H:%M"),
                    self.hours.end.format("%H:%M"),
                    zone.name()
                )),
            );
        }
        out
    }

    /// The free slots to offer instead of this one, in the zone's offset of their day.
    pub(crate) fn alternatives(&self, busy: &[Interval]) -> Vec<Value> {
        let zone = self.zone;
        self.next_free(busy, ALTERNATIVES)
            .iter()
            .map(|(a, b)| json!({"start": rfc3339(zone.show(*a)), "end": rfc3339(zone.show(*b))}))
            .collect()
    }

    /// Whether the slot lies within the calendar's hours.
    pub(crate) fn in_hours(&self) -> bool {
        slots::within_hours(self.start.to_utc(), self.len, self.hours, self.zone)
    }

    /// The refusal of the slot (`how`: "is already taken", "is being booked by another
    /// caller"), with the free times to offer instead.
    pub(crate) fn taken(&self, how: &str, busy: &[Interval]) -> ToolError {
        let offer = self.alternatives(busy);
        failure::slot_taken(
            format!(
                "the slot {} to {} {how}; nothing was booked. Offer the caller one of these free times instead: {}",
                rfc3339(self.start),
                rfc3339(self.start + self.len),
                listed(&offer)
            ),
            offer,
        )
    }

    /// The refusal of a slot outside the calendar's hours, with free times inside them.
    pub(crate) fn outside(&self, busy: &[Interval]) -> ToolError {
        let offer = self.alternatives(busy);
        failure::outside_hours(
            format!(
                "the slot {} to {} is outside the calendar's hours ({}-{} {}); nothing was booked. Offer the caller one of these free times instead: {}",
                rfc3339(self.start),
                rfc3339(self.start + self.len),
                self.hours.start.format("%H:%M"),
                self.hours.end.format("%H:%M"),
                self.zone.name(),
                listed(&offer)
            ),
            offer,
        )
    }
}

/// The starts of free slots as a sentence.
fn listed(offer: &[Value]) -> String {
    if offer.is_empty() {
        return "none in the next week".to_owned();
    }
    offer
        .iter()
        .filter_map(|o| o.get("start").and_then(Value::as_str))
        .collect::<Vec<_>>()
        .join(", ")
}
