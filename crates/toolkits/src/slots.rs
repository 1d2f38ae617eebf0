//! Free-slot arithmetic for `check_availability`: which busy intervals a slot overlaps, and the
//! next free slots of the same length inside working hours. Pure: times in, times out.
//!
//! Working hours are wall-clock times in a [`Zone`]: the calendar's IANA zone when it is known
//! (so 09:00 stays 09:00 across a daylight-saving change), else the offset of the time asked.

use chrono::{
    DateTime, Duration, FixedOffset, LocalResult, NaiveDateTime, NaiveTime, TimeZone, Utc,
};
use chrono_tz::Tz;

/// The hours in which slots are offered, as wall-clock times of the calendar's [`Zone`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkingHours {
    pub start: NaiveTime,
    pub end: NaiveTime,
}

impl Default for WorkingHours {
    fn default() -> Self {
        WorkingHours {
            start: NaiveTime::from_hms_opt(9, 0, 0).unwrap_or(NaiveTime::MIN),
            end: NaiveTime::from_hms_opt(17, 0, 0).unwrap_or(NaiveTime::MIN),
        }
    }
}

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

/// Whether `[start, start + len)` lies within working hours of its own day, on `zone`'s clock.
pub fn within_hours(start: DateTime<Utc>, len: Duration, hours: WorkingHours, zone: Zone) -> bool {
    let (from, to) = (zone.local(start), zone.local(start + len));
    hours.start < hours.end
        && from.date() == to.date()
        && from.time() >= hours.start
        && to.time() <= hours.end
}

/// Up to `want` free slots of length `len`, from `from` on and before `horizon`, each inside
/// working hours on `zone`'s clock and overlapping no busy interval. Candidates start on a
/// 15-minute grid after a conflict; the search is bounded whatever the input.
pub fn next_free(
    from: DateTime<Utc>,
    len: Duration,
    busy: &[Interval],
    hours: WorkingHours,
    zone: Zone,
    horizon: DateTime<Utc>,
    want: usize,
) -> Vec<Interval> {
    let mut out = Vec::new();
    if len <= Duration::zero() || hours.start >= hours.end {
        return out;
    }
    let mut t = from;
    // Each turn either emits a slot or moves `t` forward by at least a minute.
    for _ in 0..20_000 {
        if out.len() >= want || t + len > horizon {
            break;
        }
        let day = zone.local(t).date();
        let (Some(day_start), Some(day_end)) = (
            zone.instant(day.and_time(hours.start)),
            zone.instant(day.and_time(hours.end)),
        ) else {
            break;
        };
        if t < day_start {
            t = day_start;
            continue;
        }
        if t + len > day_end {
            match day
                .succ_opt()
                .and_then(|d| zone.instant(d.and_time(hours.start)))
            {
                Some(next) if next > t => t = next,
                _ => break,
            }
            continue;
        }
        let slot = (t, t + len);
        match busy
            .iter()
            .filter(|b| overlaps(slot, **b))
            .map(|b| b.1)
            .max()
        {
            Some(busy_until) => t = round_up_15(busy_until).max(t + Duration::minutes(1)),
            None => {
                out.push(slot);
                t += len;
            }
        }
    }
    out
}

/// The first quarter hour at or after `t`.
fn round_up_15(t: DateTime<Utc>) -> DateTime<Utc> {
    let secs = t.timestamp();
    let q = 15 * 60;
    let rem = secs.rem_euclid(q);
    let nanos = i64::from(t.timestamp_subsec_nanos());
    if rem == 0 && nanos == 0 {
        return t;
    }
    t + Duration::seconds(q - rem) - Duration::nanoseconds(nanos)
}

#[cfg(test)]
mod tests {
    use super::*;

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
            WorkingHours::default(),
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
            WorkingHours::default(),
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
            WorkingHours::default(),
            zone,
            utc("2030-01-14T00:00:00Z"),
            1,
        );
        assert_eq!(shown(zone, &slots), ["2030-01-07T09:00:00-05:00"]);
        let hours = WorkingHours::default();
        let hour = Duration::minutes(60);
        assert!(within_hours(
            utc("2030-01-07T16:00:00-05:00"),
            hour,
            hours,
            zone
        ));
        assert!(!within_hours(
            utc("2030-01-07T16:30:00-05:00"),
            hour,
            hours,
            zone
        ));
    }

    /// New York springs forward on Sunday 2030-03-10 (02:00 EST → 03:00 EDT) and falls back on
    /// Sunday 2030-11-03: 09:00 stays 09:00 on the clock, one hour apart in UTC. Reading the
    /// hours in the offset of the time asked (the day before) would be an hour off.
    #[test]
    fn working_hours_follow_daylight_saving_in_the_calendars_zone() {
        let zone = new_york();
        let hours = WorkingHours::default();
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
            let slots = next_free(utc(asked), hour, &[], hours, zone, horizon, 1);
            assert_eq!(slots[0].0, utc(first), "{asked}");
            assert_eq!(shown(zone, &slots), [local], "{asked}");
            let old = next_free(utc(asked), hour, &[], hours, fixed(asked), horizon, 1);
            assert_ne!(old[0].0, utc(first), "{asked}");
        }
        // 08:30 asked as -05:00 after the change is 09:30 EDT: inside the hours.
        assert!(within_hours(
            utc("2030-03-11T08:30:00-05:00"),
            hour,
            hours,
            zone
        ));
        assert!(!within_hours(
            utc("2030-03-11T08:30:00-04:00"),
            hour,
            hours,
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
