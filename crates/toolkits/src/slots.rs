//! Time arithmetic the calendars share: the [`Zone`] a calendar's clock is read on, and which
//! busy intervals a slot overlaps. Pure: times in, times out. The booking rules themselves
//! (hours, free slots) are applied in `rules`.
//!
//! Opening hours are wall-clock times in a [`Zone`]: the calendar's IANA zone when it is known
//! (so 09:00 stays 09:00 across a daylight-saving change), else the offset of the time asked.

use chrono::{DateTime, Duration, FixedOffset, LocalResult, NaiveDateTime, TimeZone, Utc};
use chrono_tz::Tz;

/// Where working hours are read: an IANA zone (its offset changes with daylight saving), or,
/// when the calendar's zone is unknown, the fixed offset of the time the model asked about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Zone {
    Iana(Tz),
    Fixed(FixedOffset),
}

impl Zone {
    /// The zone an agent tool's config names (`time_zone`), else the calendar's own (a name
    /// its server sent), else `asked`'s offset. A name that is not an IANA zone is skipped.
    pub fn pick(configured: Option<&str>, calendar: Option<&str>, asked: FixedOffset) -> Zone {
        configured
            .into_iter()
            .chain(calendar)
            .find_map(|n| n.parse::<Tz>().ok())
            .map_or(Zone::Fixed(asked), Zone::Iana)
    }

    /// The wall-clock time of an instant.
    pub fn local(&self, t: DateTime<Utc>) -> NaiveDateTime {
        match self {
            Zone::Iana(z) => t.with_timezone(z).naive_local(),
            Zone::Fixed(o) => t.with_timezone(o).naive_local(),
        }
    }

    /// The instant of a wall-clock time: the earlier one when the clock shows it twice (the
    /// hour repeated when daylight saving ends); when the clock skips it (the hour lost when
    /// it starts), the first instant after the gap.
    pub fn instant(&self, local: NaiveDateTime) -> Option<DateTime<Utc>> {
        let at = |l: NaiveDateTime| -> LocalResult<DateTime<Utc>> {
            match self {
                Zone::Iana(z) => z.from_local_datetime(&l).map(|t| t.to_utc()),
                Zone::Fixed(o) => o.from_local_datetime(&l).map(|t| t.to_utc()),
            }
        };
        match at(local) {
            LocalResult::Single(t) | LocalResult::Ambiguous(t, _) => Some(t),
            LocalResult::None => {
                // Gaps are at most a few hours; find where the clock resumes, minute by minute
                // after a coarse step.
                let mut probe = local;
                for _ in 0..(24 * 4) {
                    probe += Duration::minutes(15);
                    if let LocalResult::Single(t) | LocalResult::Ambiguous(t, _) = at(probe) {
                        let mut first = t;
                        for m in 1..15 {
                            match at(probe - Duration::minutes(m)) {
                                LocalResult::Single(e) | LocalResult::Ambiguous(e, _) => first = e,
                                LocalResult::None => break,
                            }
                        }
                        return Some(first);
                    }
                }
                None
            }
        }
    }

    /// An instant as the zone's clock shows it, with the offset in force then.
    pub fn show(&self, t: DateTime<Utc>) -> DateTime<FixedOffset> {
        match self {
            Zone::Iana(z) => t.with_timezone(z).fixed_offset(),
            Zone::Fixed(o) => t.with_timezone(o),
        }
    }

    /// The zone's name (`Europe/Berlin`), or its offset (`-05:00`).
    pub fn name(&self) -> String {
        match self {
            Zone::Iana(z) => z.name().to_owned(),
            Zone::Fixed(o) => o.to_string(),
        }
    }
}

/// A busy interval, half-open: `[start, end)`.
pub type Interval = (DateTime<Utc>, DateTime<Utc>);

/// Whether two half-open intervals share a moment.
pub fn overlaps(a: Interval, b: Interval) -> bool {
    a.0 < b.1 && b.0 < a.1
}

#[cfg(test)]
mod tests {
    use switchboard_core::toolkits::calendar::BookingRules;

    use super::*;
    use crate::rules::{free_slots, refusal};

    /// The rules of a calendar without `rules`: 09:00-17:00 every day.
    fn hours() -> BookingRules {
        BookingRules::default()
    }

    fn long_ago() -> DateTime<Utc> {
        utc("2020-01-01T00:00:00Z")
    }

    /// The free slots of the default hours, as calendars searched before rules existed.
    fn next_free(
        from: DateTime<Utc>,
        len: Duration,
        busy: &[Interval],
        rules: &BookingRules,
        zone: Zone,
        horizon: DateTime<Utc>,
        want: usize,
    ) -> Vec<Interval> {
        free_slots(rules, from, horizon, len, busy, long_ago(), zone, want)
    }

    fn within_hours(start: DateTime<Utc>, len: Duration, rules: &BookingRules, zone: Zone) -> bool {
        refusal(rules, start, len, long_ago(), zone).is_none()
    }

    fn utc(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().to_utc()
    }

    fn shown(zone: Zone, slots: &[Interval]) -> Vec<String> {
        slots.iter().map(|s| zone.show(s.0).to_rfc3339()).collect()
    }

    fn fixed(s: &str) -> Zone {
        Zone::Fixed(*DateTime::parse_from_rfc3339(s).unwrap().offset())
    }

    fn new_york() -> Zone {
        Zone::Iana(chrono_tz::America::New_York)
    }

    #[test]
    fn alternatives_skip_busy_time_and_stay_in_working_hours() {
        let busy = [
            (utc("2030-01-07T10:00:00Z"), utc("2030-01-07T11:10:00Z")),
            (utc("2030-01-07T16:00:00Z"), utc("2030-01-08T09:30:00Z")),
        ];
        let zone = fixed("2030-01-07T10:00:00Z");
        let horizon = utc("2030-01-14T00:00:00Z");
        let slots = next_free(
            utc("2030-01-07T10:00:00Z"),
            Duration::minutes(30),
            &busy,
            &hours(),
            zone,
            horizon,
            3,
        );
        assert_eq!(
            shown(zone, &slots),
            [
                "2030-01-07T11:15:00+00:00",
                "2030-01-07T11:45:00+00:00",
                "2030-01-07T12:15:00+00:00"
            ]
        );
        let late = next_free(
            utc("2030-01-07T15:45:00Z"),
            Duration::minutes(30),
            &busy,
            &hours(),
            zone,
            horizon,
            1,
        );
        assert_eq!(shown(zone, &late), ["2030-01-08T09:30:00+00:00"]);
    }

    #[test]
    fn working_hours_are_read_in_the_asked_offset_without_a_zone() {
        let zone = fixed("2030-01-07T06:00:00-05:00");
        let slots = next_free(
            utc("2030-01-07T06:00:00-05:00"),
            Duration::minutes(60),
            &[],
            &hours(),
            zone,
            utc("2030-01-14T00:00:00Z"),
            1,
        );
        assert_eq!(shown(zone, &slots), ["2030-01-07T09:00:00-05:00"]);
        let hours = hours();
        let hour = Duration::minutes(60);
        assert!(within_hours(
            utc("2030-01-07T16:00:00-05:00"),
            hour,
            &hours,
            zone
        ));
        assert!(!within_hours(
            utc("2030-01-07T16:30:00-05:00"),
            hour,
            &hours,
            zone
        ));
    }

    /// New York springs forward on Sunday 2030-03-10 (02:00 EST → 03:00 EDT) and falls back on
    /// Sunday 2030-11-03: 09:00 stays 09:00 on the clock, one hour apart in UTC. Reading the
    /// hours in the offset of the time asked (the day before) would be an hour off.
    #[test]
    fn working_hours_follow_daylight_saving_in_the_calendars_zone() {
        let zone = new_york();
        let hours = hours();
        let hour = Duration::minutes(60);
        let horizon = utc("2030-12-01T00:00:00Z");
        // (asked on the day before the change, first free slot in UTC, as the zone shows it)
        let cases = [
            (
                "2030-03-09T16:30:00-05:00",
                "2030-03-10T13:00:00Z",
                "2030-03-10T09:00:00-04:00",
            ),
            (
                "2030-11-02T16:30:00-04:00",
                "2030-11-03T14:00:00Z",
                "2030-11-03T09:00:00-05:00",
            ),
        ];
        for (asked, first, local) in cases {
            let slots = next_free(utc(asked), hour, &[], &hours, zone, horizon, 1);
            assert_eq!(slots[0].0, utc(first), "{asked}");
            assert_eq!(shown(zone, &slots), [local], "{asked}");
            let old = next_free(utc(asked), hour, &[], &hours, fixed(asked), horizon, 1);
            assert_ne!(old[0].0, utc(first), "{asked}");
        }
        // 08:30 asked as -05:00 after the change is 09:30 EDT: inside the hours.
        assert!(within_hours(
            utc("2030-03-11T08:30:00-05:00"),
            hour,
            &hours,
            zone
        ));
        assert!(!within_hours(
            utc("2030-03-11T08:30:00-04:00"),
            hour,
            &hours,
            zone
        ));
    }

    #[test]
    fn a_wall_clock_time_the_clock_skips_starts_after_the_gap() {
        let zone = new_york();
        let skipped = NaiveDateTime::parse_from_str("2030-03-10 02:30", "%Y-%m-%d %H:%M").unwrap();
        assert_eq!(
            zone.instant(skipped),
            Some(utc("2030-03-10T03:00:00-04:00"))
        );
        let twice = NaiveDateTime::parse_from_str("2030-11-03 01:30", "%Y-%m-%d %H:%M").unwrap();
        assert_eq!(zone.instant(twice), Some(utc("2030-11-03T01:30:00-04:00")));
        assert_eq!(
            Zone::pick(
                Some("Europe/Berln"),
                Some("America/New_York"),
                FixedOffset::east_opt(0).unwrap()
            ),
            new_york()
        );
        assert_eq!(
            Zone::pick(None, None, FixedOffset::east_opt(3600).unwrap()).name(),
            "+01:00"
        );
    }
}
