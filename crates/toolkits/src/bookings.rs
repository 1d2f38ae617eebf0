//! What the caller's own-booking actions share across providers: whose booking an event is,
//! the window `find_free_slots` looks in, and the answers.
//!
//! A booking belongs to the caller whose identity it carries (`call.from`, else `user.id`, as
//! the booking's call had it). Only that identity finds, cancels or moves it: an id, an email
//! address or a name the model passes on from the caller is no proof of who is calling, so an
//! event of someone else answers `not_found`, exactly as a missing one does.

use chrono::{DateTime, Duration, NaiveDate, NaiveTime, Utc};
use serde_json::{Value, json};
use switchboard_core::ToolError;
use switchboard_runtime::effects::ToolkitScope;

use crate::caldav::{clip, parse_time, rfc3339};
use crate::events::Event;
use crate::failure;
use switchboard_core::toolkits::calendar::BookingRules;

use crate::slots::{Interval, Zone};

/// How far ahead `find_bookings` looks (five years; the answer is bounded by count).
pub(crate) const BOOKINGS_AHEAD_DAYS: i64 = 5 * 366;
/// Most bookings one answer lists.
pub(crate) const MAX_BOOKINGS: usize = 20;
/// Most free slots one answer lists.
const MAX_FREE_SLOTS: usize = 10;
/// The longest window `find_free_slots` searches.
const MAX_WINDOW_DAYS: i64 = 14;
/// How far ahead `find_free_slots` looks when no window is given.
const DEFAULT_WINDOW_DAYS: i64 = 7;

/// The caller's identity, which their bookings carry.
pub(crate) fn caller<'a>(scope: &'a ToolkitScope<'a>) -> Result<&'a str, ToolError> {
    scope.caller.filter(|c| !c.is_empty()).ok_or_else(|| {
        failure::not_found(
            "this call has no caller number, so the caller's bookings cannot be found; bookings can only be changed from the phone number they were made from",
        )
    })
}

/// Whether `event` is one of `caller`'s bookings.
pub(crate) fn owned(event: &Event, caller: &str) -> bool {
    event.caller.as_deref() == Some(caller)
}

/// The answer for a booking that is not there or not the caller's: the same words either way.
pub(crate) fn not_yours(id: &str) -> ToolError {
    failure::not_found(format!(
        "no booking `{}` of this caller was found; call find_bookings to list the caller's bookings",
        clip(id)
    ))
}

/// Whether the rules still let the caller cancel or move `event` at `now` (`action`:
/// "cancelled", "moved"): a booking starting within `cancel_notice_minutes` is
/// `too_late_to_change`, and nothing is changed.
pub(crate) fn changeable(
    event: &Event,
    rules: &BookingRules,
    zone: Zone,
    now: DateTime<Utc>,
    action: &str,
) -> Result<(), ToolError> {
    let notice = Duration::minutes(i64::from(rules.cancel_notice_minutes));
    if rules.cancel_notice_minutes == 0 || event.start - now >= notice {
        return Ok(());
    }
    Err(failure::too_late_to_change(format!(
        "the booking `{}` at {} ({}) starts too soon to be {action}: bookings can be cancelled or moved until {} minutes before they start; nothing was changed. Tell the caller, and offer to pass on a message instead",
        clip(&event.title),
        zone.show(event.start).format("%Y-%m-%d %H:%M"),
        zone.name(),
        rules.cancel_notice_minutes,
    )))
}

/// Whether a booking fits what the caller gave to narrow the list.
pub(crate) fn narrowed(event: &Event, email: Option<&str>, name: Option<&str>) -> bool {
    let email_fits = email.filter(|e| !e.is_empty()).is_none_or(|e| {
        event.attendees.iter().any(|a| {
            a.trim_start_matches("mailto:")
                .eq_ignore_ascii_case(e.trim())
        })
    });
    let name_fits = name.filter(|n| !n.is_empty()).is_none_or(|n| {
        event
            .title
            .to_lowercase()
            .contains(&n.trim().to_lowercase())
    });
    email_fits && name_fits
}

/// `find_bookings`' answer: the caller's bookings from now on, by start, at most
/// [`MAX_BOOKINGS`].
pub(crate) fn bookings_answer(mut found: Vec<&Event>, zone: Zone) -> Value {
    found.sort_by(|a, b| a.start.cmp(&b.start).then_with(|| a.id.cmp(&b.id)));
    found.truncate(MAX_BOOKINGS);
    json!({"bookings": found.iter().map(|e| json!({
        "id": e.id,
        "title": e.title,
        "start": rfc3339(zone.show(e.start)),
        "end": rfc3339(zone.show(e.end)),
    })).collect::<Vec<_>>()})
}

/// What `find_free_slots` was asked.
pub(crate) struct FreeSlotsAsk<'a> {
    pub(crate) day: Option<&'a str>,
    pub(crate) part_of_day: Option<&'a str>,
    pub(crate) time_min: Option<&'a str>,
    pub(crate) time_max: Option<&'a str>,
    pub(crate) duration_minutes: Option<u32>,
}

impl FreeSlotsAsk<'_> {
    /// The slots' length: the one asked, else the rules' `slot_minutes`, else 30 minutes.
    pub(crate) fn len(&self, rules: &BookingRules) -> Duration {
        let m = self.duration_minutes.or(rules.slot_minutes).unwrap_or(30);
        Duration::minutes(i64::from(m).clamp(5, 480))
    }

    /// The window to search, on `zone`'s clock, never before `now`.
    pub(crate) fn window(&self, zone: Zone, now: DateTime<Utc>) -> Result<Interval, ToolError> {
        let (from, to) = match (self.day, self.time_min) {
            (Some(_), Some(_)) => {
                return Err(failure::invalid(
                    "give either a day (and part_of_day) or a range (time_min, time_max), not both",
                ));
            }
            (Some(day), None) => {
                let d = NaiveDate::parse_from_str(day.trim(), "%Y-%m-%d").map_err(|_| {
                    failure::invalid(format!(
                        "day `{}` is not a date; write it like 2030-01-07",
                        clip(day)
                    ))
                })?;
                let (a, b) = match self.part_of_day {
                    None => (NaiveTime::MIN, None),
                    Some("morning") => (NaiveTime::MIN, NaiveTime::from_hms_opt(12, 0, 0)),
                    Some("afternoon") => (
                        NaiveTime::from_hms_opt(12, 0, 0).unwrap_or(NaiveTime::MIN),
                        NaiveTime::from_hms_opt(17, 0, 0),
                    ),
                    Some("evening") => (
                        NaiveTime::from_hms_opt(17, 0, 0).unwrap_or(NaiveTime::MIN),
                        None,
                    ),
                    Some(other) => {
                        return Err(failure::invalid(format!(
                            "part_of_day `{}` is not one of morning, afternoon, evening",
                            clip(other)
                        )));
                    }
                };
                let start = zone.instant(d.and_time(a));
                let end = match b {
                    Some(t) => zone.instant(d.and_time(t)),
                    None => d
                        .succ_opt()
                        .and_then(|n| zone.instant(n.and_time(NaiveTime::MIN))),
                };
                match (start, end) {
                    (Some(s), Some(e)) => (s, e),
                    _ => return Err(failure::invalid("that day is out of the calendar's range")),
                }
            }
            (None, Some(min)) => {
                let from = parse_time("time_min", min)?.to_utc();
                let to = match self.time_max {
                    Some(max) => parse_time("time_max", max)?.to_utc(),
                    None => from + Duration::days(1),
                };
                (from, to)
            }
            (None, None) => (now, now + Duration::days(DEFAULT_WINDOW_DAYS)),
        };
        if to <= from {
            return Err(failure::invalid(format!(
                "the window {} to {} ends before it starts; ask for one that ends after it starts",
                rfc3339(from.fixed_offset()),
                rfc3339(to.fixed_offset())
            )));
        }
        if to - from > Duration::days(MAX_WINDOW_DAYS) {
            return Err(failure::invalid(format!(
                "the window is longer than {MAX_WINDOW_DAYS} days; ask for a shorter one"
            )));
        }
        Ok((from.max(now), to))
    }
}

/// The span of the calendar `find_free_slots` reads for `window`: the window and the
/// buffers around it.
pub(crate) fn reading(window: Interval, rules: &BookingRules) -> Interval {
    let (before, after) = (
        Duration::minutes(i64::from(rules.buffer_before_minutes)),
        Duration::minutes(i64::from(rules.buffer_after_minutes)),
    );
    (window.0 - before, window.1 + after)
}

/// `find_free_slots`' answer: free slots of `len` in `window` that the rules allow at `now`.
pub(crate) fn free_slots_answer(
    window: Interval,
    len: Duration,
    busy: &[Interval],
    rules: &BookingRules,
    zone: Zone,
    now: DateTime<Utc>,
) -> Value {
    let free = if window.0 >= window.1 {
        Vec::new()
    } else {
        crate::rules::free_slots(
            rules,
            window.0,
            window.1,
            len,
            busy,
            now,
            zone,
            MAX_FREE_SLOTS,
        )
    };
    json!({
        "slots": free.iter().map(|(a, b)| json!({"start": rfc3339(zone.show(*a)), "end": rfc3339(zone.show(*b))})).collect::<Vec<_>>(),
        "time_zone": zone.name(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(caller: Option<&str>) -> Event {
        let t = DateTime::parse_from_rfc3339("2030-01-07T10:00:00Z")
            .unwrap()
            .to_utc();
        Event {
            id: "e1".into(),
            created: None,
            title: "Checkup Pat Smith".into(),
            start: t,
            end: t + Duration::minutes(30),
            description: None,
            call: Some("c1".into()),
            caller: caller.map(str::to_owned),
            attendees: vec!["mailto:pat@example.com".to_owned()],
        }
    }

    #[test]
    fn a_booking_is_the_callers_only_by_the_identity_it_carries() {
        assert!(owned(&event(Some("+14155550101")), "+14155550101"));
        assert!(!owned(&event(Some("+14155550101")), "+14155550102"));
        assert!(!owned(&event(None), "+14155550101"));
        let e = event(None);
        assert!(narrowed(&e, Some("PAT@example.com"), Some("smith")));
        assert!(!narrowed(&e, Some("sam@example.com"), None));
        assert!(!narrowed(&e, None, Some("jones")));
    }

    #[test]
    fn windows_are_read_on_the_calendars_clock() {
        let zone = Zone::Iana(chrono_tz::America::New_York);
        let now = DateTime::parse_from_rfc3339("2030-01-01T00:00:00Z")
            .unwrap()
            .to_utc();
        let ask = |day: Option<&'static str>, part: Option<&'static str>| FreeSlotsAsk {
            day,
            part_of_day: part,
            time_min: None,
            time_max: None,
            duration_minutes: None,
        };
        let (a, b) = ask(Some("2030-01-07"), Some("afternoon"))
            .window(zone, now)
            .unwrap();
        assert_eq!(rfc3339(zone.show(a)), "2030-01-07T12:00:00-05:00");
        assert_eq!(rfc3339(zone.show(b)), "2030-01-07T17:00:00-05:00");
        assert!(ask(Some("07.01.2030"), None).window(zone, now).is_err());
        assert!(
            ask(Some("2030-01-07"), Some("night"))
                .window(zone, now)
                .is_err()
        );
        // A day already past is clamped to now: nothing to offer.
        let (a, b) = ask(Some("2029-12-01"), None).window(zone, now).unwrap();
        assert!(a >= b);
    }
}
