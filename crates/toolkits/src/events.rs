//! What both calendar providers tell the model: events as JSON, the availability answer, and
//! the refusal of a taken slot with the free times to offer instead. CalDAV and Google differ in
//! how they read a calendar, not in what they answer.

use chrono::{DateTime, Duration, FixedOffset, Utc};
use serde_json::{Value, json};

use switchboard_core::ToolError;

use crate::caldav::rfc3339;
use crate::failure;
use switchboard_core::toolkits::calendar::BookingRules;

use crate::rules::{self, Refusal};
use crate::slots::{self, Interval, Zone};

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

/// Where alternatives to a slot starting at `start` are looked for: from it (or the first time
/// the notice allows) for [`SEARCH_DAYS`]; for a slot beyond the booking horizon, the last
/// [`SEARCH_DAYS`] before the horizon ends.
fn search(start: DateTime<Utc>, rules: &BookingRules, now: DateTime<Utc>) -> Interval {
    let first = rules::earliest(rules, now).max(now);
    let mut from = start.max(first);
    if let Some(last) = rules::latest(rules, now)
        && from > last
    {
        from = (last - Duration::days(SEARCH_DAYS)).max(first);
    }
    (from, from + Duration::days(SEARCH_DAYS))
}

/// The span of the calendar to read to judge `slot` at `now` and offer alternatives: the
/// slot, the search, and the buffers around both. A slot long past (a wrong year) or far
/// beyond the horizon is refused by the rules whatever the calendar holds, so only the search
/// is read then: a span of years would be slow to read and could crowd the times to offer out
/// of a bounded answer.
pub(crate) fn reading(slot: Interval, rules: &BookingRules, now: DateTime<Utc>) -> Interval {
    let (padded, search) = (rules::padded(rules, slot), search(slot.0, rules, now));
    let (before, after) = (
        Duration::minutes(i64::from(rules.buffer_before_minutes)),
        Duration::minutes(i64::from(rules.buffer_after_minutes)),
    );
    let day = Duration::days(1);
    if padded.1 + day < search.0 || padded.0 > search.1 + day {
        return (search.0 - before, search.1 + after);
    }
    (padded.0.min(search.0), padded.1.max(search.1 + after))
}

/// The slot a caller asked about, the rules it is judged by, and the clock they are read on.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Asked<'a> {
    pub(crate) start: DateTime<FixedOffset>,
    pub(crate) len: Duration,
    pub(crate) rules: &'a BookingRules,
    pub(crate) zone: Zone,
    /// When the action runs: notice and horizon count from it.
    pub(crate) now: DateTime<Utc>,
}

impl Asked<'_> {
    /// The slot as instants.
    pub(crate) fn slot(&self) -> Interval {
        (self.start.to_utc(), (self.start + self.len).to_utc())
    }

    /// The slot with the free time the rules keep around a booking: events overlapping it
    /// are in the way.
    pub(crate) fn padded(&self) -> Interval {
        rules::padded(self.rules, self.slot())
    }

    /// Where alternatives are looked for: from the slot (or the first time the notice allows)
    /// for [`SEARCH_DAYS`].
    fn search(&self) -> Interval {
        search(self.start.to_utc(), self.rules, self.now)
    }

    /// The span of the calendar to read to judge this slot and offer alternatives.
    pub(crate) fn reading(&self) -> Interval {
        reading(self.slot(), self.rules, self.now)
    }

    fn next_free(&self, busy: &[Interval], want: usize) -> Vec<Interval> {
        let (from, until) = self.search();
        rules::free_slots(
            self.rules, from, until, self.len, busy, self.now, self.zone, want,
        )
    }

    /// Why the rules refuse this slot (hours, closed days and dates, notice, horizon), if
    /// they do.
    pub(crate) fn refusal(&self) -> Option<Refusal> {
        rules::refusal(
            self.rules,
            self.start.to_utc(),
            self.len,
            self.now,
            self.zone,
        )
    }

    /// Whether a busy interval is in the way of this slot, its buffers included.
    pub(crate) fn blocked_by(&self, busy: Interval) -> bool {
        slots::overlaps(self.padded(), busy)
    }

    /// `check_availability`'s answer: `conflicts` (in the asked offset: the events in the
    /// slot or its buffers), and when the slot cannot be had the next free slots (in the
    /// zone's offset of their day). A slot the rules refuse is the typed failure every other
    /// action answers, `outside_hours` with the sentence saying why, its `details` keeping
    /// `available: false`, the slot, its conflicts and the free times (`alternatives`, also
    /// as `next_free_slots`).
    pub(crate) fn availability(
        &self,
        conflicts: Vec<Value>,
        busy: &[Interval],
    ) -> Result<Value, ToolError> {
        if let Some(why) = self.refusal() {
            let mut refused = self.outside_then(why, busy, "it is not available");
            if let Some(Value::Object(d)) = &mut refused.details {
                let offer = d.get("alternatives").cloned().unwrap_or_else(|| json!([]));
                d.insert("available".into(), json!(false));
                d.insert("start".into(), json!(rfc3339(self.start)));
                d.insert("end".into(), json!(rfc3339(self.start + self.len)));
                d.insert("conflicts".into(), json!(conflicts));
                d.insert("next_free_slots".into(), offer);
            }
            return Err(refused);
        }
        let available = conflicts.is_empty();
        let next = if available {
            Vec::new()
        } else {
            self.alternatives(busy)
        };
        Ok(json!({
            "available": available,
            "start": rfc3339(self.start),
            "end": rfc3339(self.start + self.len),
            "conflicts": conflicts,
            "next_free_slots": next,
        }))
    }

    /// The free slots to offer instead of this one, in the zone's offset of their day.
    pub(crate) fn alternatives(&self, busy: &[Interval]) -> Vec<Value> {
        let zone = self.zone;
        self.next_free(busy, ALTERNATIVES)
            .iter()
            .map(|(a, b)| json!({"start": rfc3339(zone.show(*a)), "end": rfc3339(zone.show(*b))}))
            .collect()
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

    /// The refusal of a slot the rules do not allow (`why`), with free times inside them;
    /// `kept` says what was left as it was ("nothing was booked").
    fn outside_then(&self, why: Refusal, busy: &[Interval], kept: &str) -> ToolError {
        let offer = self.alternatives(busy);
        failure::outside_hours(
            format!(
                "the slot {} to {} cannot be booked: {}; {kept}. Offer the caller one of these free times instead: {}",
                rfc3339(self.start),
                rfc3339(self.start + self.len),
                why.say(self.rules, self.zone),
                listed(&offer)
            ),
            offer,
        )
    }

    /// The first refusal of this slot: the rules', else an event in the slot or its
    /// buffers (`busy`: every other event; `moving`: the slot is a booking's new time).
    pub(crate) fn judge(&self, busy: &[Interval], moving: bool) -> Result<(), ToolError> {
        let tail = if moving {
            "; the booking was not moved"
        } else {
            ""
        };
        if let Some(why) = self.refusal() {
            let kept = if moving {
                "the booking was not moved"
            } else {
                "nothing was booked"
            };
            return Err(self.outside_then(why, busy, kept));
        }
        if busy.iter().any(|b| slots::overlaps(self.slot(), *b)) {
            return Err(self.taken(&format!("is already taken{tail}"), busy));
        }
        if busy.iter().any(|b| self.blocked_by(*b)) {
            let (before, after) = (
                self.rules.buffer_before_minutes,
                self.rules.buffer_after_minutes,
            );
            return Err(self.taken(
                &format!(
                    "is too close to another booking (the calendar keeps {before} minutes free before and {after} minutes after each booking){tail}"
                ),
                busy,
            ));
        }
        Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;

    fn utc(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().to_utc()
    }

    #[test]
    fn the_calendar_is_read_around_the_slot_and_the_times_to_offer() {
        let rules = BookingRules::from_config(
            &json!({"rules": {"buffer_before_minutes": 15, "buffer_after_minutes": 10, "min_notice_minutes": 60}}),
            "",
        )
        .unwrap();
        let now = utc("2030-01-07T08:00:00Z");
        let slot = (utc("2030-01-07T10:00:00Z"), utc("2030-01-07T10:30:00Z"));
        assert_eq!(
            reading(slot, &rules, now),
            (utc("2030-01-07T09:45:00Z"), utc("2030-01-14T10:10:00Z"))
        );
        // Too soon: the search starts when the notice allows, the slot's buffers still count.
        let soon = (utc("2030-01-07T08:30:00Z"), utc("2030-01-07T09:00:00Z"));
        assert_eq!(
            reading(soon, &rules, now),
            (utc("2030-01-07T08:15:00Z"), utc("2030-01-14T09:10:00Z"))
        );
        // Beyond a horizon of 30 days: the last week before it is searched and read.
        let near = BookingRules {
            horizon_days: Some(30),
            ..rules.clone()
        };
        let far = (utc("2030-06-03T10:00:00Z"), utc("2030-06-03T10:30:00Z"));
        assert_eq!(
            reading(far, &near, now),
            (utc("2030-01-30T07:45:00Z"), utc("2030-02-06T08:10:00Z"))
        );
        // A year in the past: only the times to offer are read.
        let past = (utc("2029-01-07T10:00:00Z"), utc("2029-01-07T10:30:00Z"));
        assert_eq!(
            reading(past, &rules, now),
            (utc("2030-01-07T08:45:00Z"), utc("2030-01-14T09:10:00Z"))
        );
    }
}
