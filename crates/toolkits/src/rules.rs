//! The booking rules applied to times (pure): whether a slot may be booked under a calendar's
//! [`BookingRules`], and the free slots they allow. Every calendar action goes through here,
//! so `check_availability`, `create_event`, `reschedule_event` and `find_free_slots` never
//! disagree about a time.
//!
//! Opening hours are wall-clock ranges on the calendar's [`Zone`]: a range's opening and
//! closing are turned into instants per day, so 09:00 stays 09:00 on the day the clocks change
//! (an opening the clock skips starts when the clock resumes). `now` is passed in.

use chrono::{DateTime, Datelike, Duration, NaiveDate, NaiveTime, Utc, Weekday};
use switchboard_core::toolkits::calendar::{BookingRules, DAY_MINUTES, OpenRange, weekday_plural};

use crate::slots::{Interval, Zone, overlaps};

/// Why a slot cannot be booked under the rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// It starts before now.
    Past,
    /// It starts sooner than the minimum notice allows; `earliest` is the first start allowed.
    TooSoon { earliest: DateTime<Utc> },
    /// It starts beyond the booking horizon, which ends at `latest`.
    TooFar { latest: DateTime<Utc> },
    /// The calendar is closed on that date (`closed_dates`).
    ClosedDate(NaiveDate),
    /// The calendar is closed on that weekday.
    ClosedDay(Weekday),
    /// Not inside one of that day's opening ranges.
    OutsideHours(NaiveDate),
}

impl Refusal {
    /// The reason as a sentence the model can say.
    pub fn say(&self, rules: &BookingRules, zone: Zone) -> String {
        let tz = zone.name();
        match self {
            Refusal::Past => "that time has already passed".to_owned(),
            Refusal::TooSoon { earliest } => format!(
                "bookings need at least {} minutes' notice; the earliest bookable time is {} ({tz})",
                rules.min_notice_minutes,
                zone.show(*earliest).format("%Y-%m-%d %H:%M"),
            ),
            Refusal::TooFar { latest } => format!(
                "bookings are taken at most {} days ahead, until {} ({tz})",
                rules.horizon_days.unwrap_or_default(),
                zone.show(*latest).format("%Y-%m-%d %H:%M"),
            ),
            Refusal::ClosedDate(d) => format!("the calendar is closed on {d} ({tz})"),
            Refusal::ClosedDay(w) => {
                format!("the calendar is closed on {} ({tz})", weekday_plural(*w))
            }
            Refusal::OutsideHours(d) => {
                let ranges: Vec<String> =
                    rules.ranges_on(*d).iter().map(OpenRange::label).collect();
                format!(
                    "outside working hours on {} ({} {tz})",
                    weekday_plural(d.weekday()),
                    ranges.join(", "),
                )
            }
        }
    }
}

/// The instants a range opens and closes on `day`, on `zone`'s clock.
fn range_at(day: NaiveDate, r: OpenRange, zone: Zone) -> Option<Interval> {
    let at = |m: u16| {
        if m >= DAY_MINUTES {
            day.succ_opt()
                .and_then(|d| zone.instant(d.and_time(NaiveTime::MIN)))
        } else {
            let t = NaiveTime::from_hms_opt(u32::from(m / 60), u32::from(m % 60), 0)?;
            zone.instant(day.and_time(t))
        }
    };
    Some((at(r.start)?, at(r.end)?))
}

fn minutes(m: u32) -> Duration {
    Duration::minutes(i64::from(m))
}

/// The first start allowed by the minimum notice.
pub fn earliest(rules: &BookingRules, now: DateTime<Utc>) -> DateTime<Utc> {
    now + minutes(rules.min_notice_minutes)
}

/// The last start allowed by the horizon, if there is one.
pub fn latest(rules: &BookingRules, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
    rules
        .horizon_days
        .map(|d| now + Duration::days(i64::from(d)))
}

/// The slot `[start, start + len)` with the free time the rules keep around a booking.
pub fn padded(rules: &BookingRules, slot: Interval) -> Interval {
    (
        slot.0 - minutes(rules.buffer_before_minutes),
        slot.1 + minutes(rules.buffer_after_minutes),
    )
}

/// Why `[start, start + len)` may not be booked at `now`, or `None` when the rules allow it.
/// Busy time is not looked at here (see [`padded`]).
pub fn refusal(
    rules: &BookingRules,
    start: DateTime<Utc>,
    len: Duration,
    now: DateTime<Utc>,
    zone: Zone,
) -> Option<Refusal> {
    if start < now {
        return Some(Refusal::Past);
    }
    let first = earliest(rules, now);
    if start < first {
        return Some(Refusal::TooSoon { earliest: first });
    }
    if let Some(last) = latest(rules, now)
        && start > last
    {
        return Some(Refusal::TooFar { latest: last });
    }
    let day = zone.local(start).date();
    if rules.closed_dates.contains(&day) {
        return Some(Refusal::ClosedDate(day));
    }
    let ranges = rules.ranges_on(day);
    if ranges.is_empty() {
        return Some(Refusal::ClosedDay(day.weekday()));
    }
    let inside = ranges
        .iter()
        .filter_map(|r| range_at(day, *r, zone))
        .any(|(open, close)| open <= start && start + len <= close);
    (!inside).then_some(Refusal::OutsideHours(day))
}

/// The first start at or after `at` on the grid of `step` counted from `open`.
fn on_grid(open: DateTime<Utc>, step: Duration, at: DateTime<Utc>) -> DateTime<Utc> {
    if at <= open {
        return open;
    }
    let step_s = step.num_seconds().max(60);
    let gone = (at - open).num_seconds();
    let k = gone.div_euclid(step_s)
        + i64::from(gone.rem_euclid(step_s) != 0 || (at - open).subsec_nanos() != 0);
    open + Duration::seconds(k * step_s)
}

/// Up to `want` free slots of length `len` that start at or after `from` and end by `until`,
/// each allowed by the rules at `now` (hours, closed days and dates, notice, horizon) and, with
/// the rules' buffers around it, overlapping no busy interval. Starts lie on the rules' step
/// from the opening of their range; after a slot or a conflict the search moves on to the next
/// start on that grid. Bounded whatever the input.
#[allow(clippy::too_many_arguments)]
pub fn free_slots(
    rules: &BookingRules,
    from: DateTime<Utc>,
    until: DateTime<Utc>,
    len: Duration,
    busy: &[Interval],
    now: DateTime<Utc>,
    zone: Zone,
    want: usize,
) -> Vec<Interval> {
    let mut out = Vec::new();
    if len <= Duration::zero() || want == 0 {
        return out;
    }
    let step = minutes(rules.step_minutes.max(1));
    let start_at = from.max(earliest(rules, now)).max(now);
    let last = latest(rules, now);
    let mut day = zone.local(start_at).date();
    let last_day = zone.local(until).date();
    // Each turn either emits a slot, moves a candidate forward by at least a minute, or moves
    // to the next range or day.
    let mut budget = 20_000u32;
    while day <= last_day && out.len() < want && budget > 0 {
        budget -= 1;
        for r in rules.ranges_on(day) {
            let Some((open, close)) = range_at(day, *r, zone) else {
                continue;
            };
            let mut t = on_grid(open, step, start_at);
            while out.len() < want && budget > 0 {
                budget -= 1;
                let end = t + len;
                if end > close || end > until {
                    break;
                }
                if last.is_some_and(|l| t > l) {
                    return out;
                }
                let around = padded(rules, (t, end));
                match busy
                    .iter()
                    .filter(|b| overlaps(around, **b))
                    .map(|b| b.1)
                    .max()
                {
                    Some(busy_until) => {
                        let next = (busy_until + minutes(rules.buffer_before_minutes))
                            .max(t + Duration::minutes(1));
                        t = on_grid(open, step, next);
                    }
                    None => {
                        out.push((t, end));
                        t = on_grid(open, step, end);
                    }
                }
            }
        }
        day = match day.succ_opt() {
            Some(d) => d,
            None => break,
        };
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn utc(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().to_utc()
    }

    fn rules(v: serde_json::Value) -> BookingRules {
        BookingRules::from_config(&json!({ "rules": v }), "").unwrap()
    }

    fn shown(zone: Zone, slots: &[Interval]) -> Vec<String> {
        slots
            .iter()
            .map(|s| zone.show(s.0).format("%a %Y-%m-%dT%H:%M%:z").to_string())
            .collect()
    }

    const LISBON: Zone = Zone::Iana(chrono_tz::Europe::Lisbon);
    /// A long time before any slot in these tests: no notice or horizon gets in the way.
    const LONG_AGO: &str = "2020-01-01T00:00:00Z";

    /// Lisbon springs forward on Sunday 2030-03-31 (01:00 WET → 02:00 WEST) and falls back on
    /// Sunday 2030-10-27: 09:00 on the clock is 09:00Z before and 08:00Z after.
    #[test]
    fn hours_follow_lisbons_clock_across_daylight_saving() {
        let r = rules(json!({"hours": {"fri": [["09:00", "12:00"]], "mon": [["09:00", "12:00"]]}}));
        let now = utc(LONG_AGO);
        let hour = Duration::hours(1);
        let slots = free_slots(
            &r,
            utc("2030-03-29T11:30:00Z"),
            utc("2030-04-02T00:00:00Z"),
            hour,
            &[],
            now,
            LISBON,
            3,
        );
        assert_eq!(
            shown(LISBON, &slots),
            [
                "Mon 2030-04-01T09:00+01:00",
                "Mon 2030-04-01T10:00+01:00",
                "Mon 2030-04-01T11:00+01:00"
            ]
        );
        assert_eq!(slots[0].0, utc("2030-04-01T08:00:00Z"));
        // 08:30Z is 09:30 in summer (inside), 08:30 in winter (outside).
        assert_eq!(
            refusal(&r, utc("2030-04-01T08:30:00Z"), hour, now, LISBON),
            None
        );
        assert_eq!(
            refusal(&r, utc("2030-11-04T08:30:00Z"), hour, now, LISBON),
            Some(Refusal::OutsideHours(
                NaiveDate::from_ymd_opt(2030, 11, 4).unwrap()
            ))
        );
        // An opening inside the hour the clock skips starts when the clock resumes.
        let night = rules(json!({"hours": {"sun": [["01:30", "03:00"]]}}));
        let slots = free_slots(
            &night,
            utc("2030-03-30T00:00:00Z"),
            utc("2030-04-01T00:00:00Z"),
            Duration::minutes(30),
            &[],
            now,
            LISBON,
            1,
        );
        assert_eq!(shown(LISBON, &slots), ["Sun 2030-03-31T02:00+01:00"]);
    }

    #[test]
    fn closed_weekdays_and_dates_refuse_and_are_skipped() {
        let r = rules(json!({
            "hours": {"mon": [["09:00", "12:00"], ["13:00", "17:00"]], "tue": [["09:00", "17:00"]]},
            "closed_dates": ["2030-01-08"]}));
        let (now, half) = (utc(LONG_AGO), Duration::minutes(30));
        let z = Zone::Iana(chrono_tz::UTC);
        // Sunday: closed (what calendars without rules answered as free).
        assert_eq!(
            refusal(&r, utc("2030-01-06T10:00:00Z"), half, now, z),
            Some(Refusal::ClosedDay(Weekday::Sun))
        );
        assert_eq!(
            refusal(&r, utc("2030-01-08T10:00:00Z"), half, now, z),
            Some(Refusal::ClosedDate(
                NaiveDate::from_ymd_opt(2030, 1, 8).unwrap()
            ))
        );
        // The lunch break is outside the hours, as is a slot running into it.
        for at in ["2030-01-07T12:15:00Z", "2030-01-07T11:45:00Z"] {
            assert!(
                matches!(
                    refusal(&r, utc(at), half, now, z),
                    Some(Refusal::OutsideHours(_))
                ),
                "{at}"
            );
        }
        assert_eq!(refusal(&r, utc("2030-01-07T13:00:00Z"), half, now, z), None);
        let why = refusal(&r, utc("2030-01-07T12:15:00Z"), half, now, z)
            .unwrap()
            .say(&r, z);
        assert_eq!(
            why,
            "outside working hours on Mondays (09:00-12:00, 13:00-17:00 UTC)"
        );
        // From Sunday on: one slot in each of Monday's ranges; Tuesday is a closed date, and no
        // other weekday opens.
        let slots = free_slots(
            &r,
            utc("2030-01-06T00:00:00Z"),
            utc("2030-01-13T00:00:00Z"),
            Duration::hours(3),
            &[],
            now,
            z,
            5,
        );
        assert_eq!(
            shown(z, &slots),
            ["Mon 2030-01-07T09:00+00:00", "Mon 2030-01-07T13:00+00:00"]
        );
    }

    #[test]
    fn buffers_keep_time_free_around_other_events() {
        let r = rules(
            json!({"hours": {"mon": [["09:00", "17:00"]]}, "buffer_before_minutes": 15,
                             "buffer_after_minutes": 10, "step_minutes": 5}),
        );
        let z = Zone::Iana(chrono_tz::UTC);
        let busy = [(utc("2030-01-07T10:00:00Z"), utc("2030-01-07T11:00:00Z"))];
        let slots = free_slots(
            &r,
            utc("2030-01-07T09:00:00Z"),
            utc("2030-01-07T13:00:00Z"),
            Duration::minutes(30),
            &busy,
            utc(LONG_AGO),
            z,
            3,
        );
        // 09:30-10:00 would leave no 10 minutes after it before the 10:00 event; after the
        // event a booking needs 15 minutes before it: 11:15.
        assert_eq!(
            shown(z, &slots),
            [
                "Mon 2030-01-07T09:00+00:00",
                "Mon 2030-01-07T11:15+00:00",
                "Mon 2030-01-07T11:45+00:00"
            ]
        );
        let around = padded(&r, (busy[0].0, busy[0].1));
        assert_eq!(around.0, utc("2030-01-07T09:45:00Z"));
        assert_eq!(around.1, utc("2030-01-07T11:10:00Z"));
    }

    #[test]
    fn notice_and_horizon_bound_what_is_bookable() {
        let r = rules(json!({"min_notice_minutes": 120, "horizon_days": 60, "step_minutes": 30}));
        let z = Zone::Iana(chrono_tz::UTC);
        let now = utc("2030-01-07T10:10:00Z");
        let half = Duration::minutes(30);
        assert_eq!(
            refusal(&r, utc("2030-01-07T09:00:00Z"), half, now, z),
            Some(Refusal::Past)
        );
        assert_eq!(
            refusal(&r, utc("2030-01-07T11:00:00Z"), half, now, z),
            Some(Refusal::TooSoon {
                earliest: utc("2030-01-07T12:10:00Z")
            })
        );
        assert_eq!(refusal(&r, utc("2030-01-07T12:30:00Z"), half, now, z), None);
        assert_eq!(
            refusal(&r, utc("2030-03-09T10:00:00Z"), half, now, z),
            Some(Refusal::TooFar {
                latest: utc("2030-03-08T10:10:00Z")
            })
        );
        let soonest = free_slots(&r, now, now + Duration::days(1), half, &[], now, z, 1);
        assert_eq!(shown(z, &soonest), ["Mon 2030-01-07T12:30+00:00"]);
        let edge = free_slots(
            &r,
            utc("2030-03-08T00:00:00Z"),
            utc("2030-03-10T00:00:00Z"),
            half,
            &[],
            now,
            z,
            10,
        );
        assert_eq!(
            shown(z, &edge),
            [
                "Fri 2030-03-08T09:00+00:00",
                "Fri 2030-03-08T09:30+00:00",
                "Fri 2030-03-08T10:00+00:00"
            ]
        );
    }

    #[test]
    fn the_grid_counts_from_each_ranges_opening() {
        let open = utc("2030-01-07T09:10:00Z");
        let step = Duration::minutes(15);
        assert_eq!(on_grid(open, step, utc("2030-01-07T08:00:00Z")), open);
        assert_eq!(on_grid(open, step, open), open);
        assert_eq!(
            on_grid(open, step, utc("2030-01-07T09:11:00Z")),
            utc("2030-01-07T09:25:00Z")
        );
        assert_eq!(
            on_grid(open, step, utc("2030-01-07T09:25:00Z")),
            utc("2030-01-07T09:25:00Z")
        );
    }
}
