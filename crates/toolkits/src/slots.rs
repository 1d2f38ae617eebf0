//! Free-slot arithmetic for `check_availability`: which busy intervals a slot overlaps, and the
//! next free slots of the same length inside working hours. Pure: times in, times out.

use chrono::{DateTime, Duration, FixedOffset, NaiveTime, Utc};

/// The hours in which slots are offered, read in the UTC offset of the time the model asked
/// about (a caller asking for `14:00-05:00` gets alternatives in the same zone's hours).
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

/// A busy interval, half-open: `[start, end)`.
pub type Interval = (DateTime<Utc>, DateTime<Utc>);

/// Whether two half-open intervals share a moment.
pub fn overlaps(a: Interval, b: Interval) -> bool {
    a.0 < b.1 && b.0 < a.1
}

/// Whether `[start, start + len)` lies within working hours of its own day (in `start`'s offset).
pub fn within_hours(start: DateTime<FixedOffset>, len: Duration, hours: WorkingHours) -> bool {
    let end = start + len;
    hours.start < hours.end
        && start.date_naive() == end.date_naive()
        && start.time() >= hours.start
        && end.time() <= hours.end
}

/// Up to `want` free slots of length `len`, from `from` on and before `horizon`, each inside
/// working hours and overlapping no busy interval; in `from`'s offset. Candidates start on a
/// 15-minute grid after a conflict; the search is bounded whatever the input.
pub fn next_free(
    from: DateTime<FixedOffset>,
    len: Duration,
    busy: &[Interval],
    hours: WorkingHours,
    horizon: DateTime<Utc>,
    want: usize,
) -> Vec<(DateTime<FixedOffset>, DateTime<FixedOffset>)> {
    let mut out = Vec::new();
    if len <= Duration::zero() || hours.start >= hours.end {
        return out;
    }
    let tz = *from.offset();
    let mut t = from;
    // Each turn either emits a slot or moves `t` forward by at least a minute.
    for _ in 0..20_000 {
        if out.len() >= want || t.with_timezone(&Utc) + len > horizon {
            break;
        }
        let day_start = t.date_naive().and_time(hours.start);
        let day_end = t.date_naive().and_time(hours.end);
        let local = t.naive_local();
        if local < day_start {
            t = match day_start.and_local_timezone(tz).single() {
                Some(s) => s,
                None => break,
            };
            continue;
        }
        if local + len > day_end {
            let next = match t.date_naive().succ_opt() {
                Some(d) => d.and_time(hours.start),
                None => break,
            };
            t = match next.and_local_timezone(tz).single() {
                Some(s) => s,
                None => break,
            };
            continue;
        }
        let slot = (t.with_timezone(&Utc), (t + len).with_timezone(&Utc));
        match busy
            .iter()
            .filter(|b| overlaps(slot, **b))
            .map(|b| b.1)
            .max()
        {
            Some(busy_until) => {
                let until = busy_until.with_timezone(&tz);
                t = round_up_15(until).max(t + Duration::minutes(1));
            }
            None => {
                out.push((t, t + len));
                t += len;
            }
        }
    }
    out
}

/// The first quarter hour at or after `t`.
fn round_up_15(t: DateTime<FixedOffset>) -> DateTime<FixedOffset> {
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

    fn at(s: &str) -> DateTime<FixedOffset> {
        DateTime::parse_from_rfc3339(s).unwrap()
    }

    fn utc(s: &str) -> DateTime<Utc> {
        at(s).with_timezone(&Utc)
    }

    #[test]
    fn alternatives_skip_busy_time_and_stay_in_working_hours() {
        let busy = [
            (utc("2030-01-07T10:00:00Z"), utc("2030-01-07T11:10:00Z")),
            (utc("2030-01-07T16:00:00Z"), utc("2030-01-08T09:30:00Z")),
        ];
        let slots = next_free(
            at("2030-01-07T10:00:00Z"),
            Duration::minutes(30),
            &busy,
            WorkingHours::default(),
            utc("2030-01-14T00:00:00Z"),
            3,
        );
        let starts: Vec<String> = slots.iter().map(|s| s.0.to_rfc3339()).collect();
        assert_eq!(
            starts,
            [
                "2030-01-07T11:15:00+00:00",
                "2030-01-07T11:45:00+00:00",
                "2030-01-07T12:15:00+00:00"
            ]
        );
        let late = next_free(
            at("2030-01-07T15:45:00Z"),
            Duration::minutes(30),
            &busy,
            WorkingHours::default(),
            utc("2030-01-14T00:00:00Z"),
            1,
        );
        assert_eq!(late[0].0.to_rfc3339(), "2030-01-08T09:30:00+00:00");
    }

    #[test]
    fn working_hours_are_read_in_the_asked_offset() {
        let slots = next_free(
            at("2030-01-07T06:00:00-05:00"),
            Duration::minutes(60),
            &[],
            WorkingHours::default(),
            utc("2030-01-14T00:00:00Z"),
            1,
        );
        assert_eq!(slots[0].0.to_rfc3339(), "2030-01-07T09:00:00-05:00");
        assert!(within_hours(
            at("2030-01-07T16:00:00-05:00"),
            Duration::minutes(60),
            WorkingHours::default()
        ));
        assert!(!within_hours(
            at("2030-01-07T16:30:00-05:00"),
            Duration::minutes(60),
            WorkingHours::default()
        ));
    }
}
