//! The calendar toolkits' booking rules (`config.rules`): opening hours per weekday, closed
//! dates, slot length and step, buffers, minimum notice, booking horizon, and how late a
//! booking may still be cancelled or moved.
//!
//! Parsed once into [`BookingRules`], which holds only valid values, by a pure function that
//! reports every problem at its JSON Pointer: the server refuses a bad config when the agent is
//! saved, and the calendar handlers read the same type for every booking action. Without
//! `rules` the rules are what calendars did before they existed: `working_hours` (09:00-17:00)
//! on every day of the week, a 15-minute step, no buffers, no notice, no horizon.

use std::collections::BTreeSet;

use chrono::{Datelike, NaiveDate, Weekday};
use serde_json::{Map, Value, json};

use crate::diag::Diagnostic;

/// Most opening ranges on one weekday.
pub const MAX_RANGES_PER_DAY: usize = 6;
/// Most closed dates one calendar lists.
pub const MAX_CLOSED_DATES: usize = 366;
/// Longest slot, buffer-free, in minutes (eight hours).
pub const MAX_SLOT_MINUTES: u32 = 480;
/// Coarsest step between offered slot starts, in minutes.
pub const MAX_STEP_MINUTES: u32 = 240;
/// Longest buffer before or after a booking, in minutes.
pub const MAX_BUFFER_MINUTES: u32 = 240;
/// Longest minimum notice, in minutes (30 days).
pub const MAX_NOTICE_MINUTES: u32 = 30 * 24 * 60;
/// Farthest booking horizon, in days (two years).
pub const MAX_HORIZON_DAYS: u32 = 730;
/// The weekdays as `rules.hours` names them, Monday first.
pub const WEEKDAYS: [&str; 7] = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"];
/// Most problems with the rules one save reports (the rest are counted).
pub const MAX_PROBLEMS: usize = 50;
/// Minutes in a day: the end of a range that closes at midnight (`24:00`).
pub const DAY_MINUTES: u16 = 24 * 60;

const RULE_KEYS: [&str; 9] = [
    "hours",
    "closed_dates",
    "slot_minutes",
    "step_minutes",
    "buffer_before_minutes",
    "buffer_after_minutes",
    "min_notice_minutes",
    "horizon_days",
    "cancel_notice_minutes",
];

/// One opening range of a day, in minutes after midnight on the calendar's clock:
/// `[start, end)`, `start < end <= 1440`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct OpenRange {
    pub start: u16,
    pub end: u16,
}

impl OpenRange {
    /// `09:00-12:00`.
    pub fn label(&self) -> String {
        format!("{}-{}", hhmm(self.start), hhmm(self.end))
    }
}

/// A calendar's booking rules, valid by construction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BookingRules {
    /// Opening ranges per weekday, Monday first, sorted and apart; an empty day is closed.
    pub hours: [Vec<OpenRange>; 7],
    /// Days the calendar is closed whatever the weekday, on its own clock.
    pub closed_dates: BTreeSet<NaiveDate>,
    /// The length of a slot when the caller names none (else the action's own default).
    pub slot_minutes: Option<u32>,
    /// Offered slots start every `step_minutes` from the opening of their range.
    pub step_minutes: u32,
    /// Free time a booking needs before it (after the previous event).
    pub buffer_before_minutes: u32,
    /// Free time a booking needs after it (before the next event).
    pub buffer_after_minutes: u32,
    /// How long before its start a booking must be made.
    pub min_notice_minutes: u32,
    /// How many days ahead bookings are taken; `None`: no limit.
    pub horizon_days: Option<u32>,
    /// How long before its start a booking may still be cancelled or moved (0: until it
    /// starts).
    pub cancel_notice_minutes: u32,
}

impl Default for BookingRules {
    fn default() -> Self {
        BookingRules::every_day(OpenRange {
            start: 9 * 60,
            end: 17 * 60,
        })
    }
}

impl BookingRules {
    /// One range on every day of the week, and no other rule: calendars before rules existed.
    pub fn every_day(range: OpenRange) -> Self {
        BookingRules {
            hours: std::array::from_fn(|_| vec![range]),
            closed_dates: BTreeSet::new(),
            slot_minutes: None,
            step_minutes: 15,
            buffer_before_minutes: 0,
            buffer_after_minutes: 0,
            min_notice_minutes: 0,
            horizon_days: None,
            cancel_notice_minutes: 0,
        }
    }

    /// The opening ranges of `day` (empty when closed that day).
    pub fn ranges_on(&self, day: NaiveDate) -> &[OpenRange] {
        if self.closed_dates.contains(&day) {
            return &[];
        }
        &self.hours[day.weekday().num_days_from_monday() as usize]
    }

    /// The rules of a calendar toolkit's `config`, or every problem with them, each at its
    /// pointer under `ptr` (the config's own pointer, e.g. `/tools/2/config`).
    pub fn from_config(config: &Value, ptr: &str) -> Result<BookingRules, Vec<Diagnostic>> {
        let mut out = Vec::new();
        let legacy = working_hours(config, ptr, &mut out);
        let mut rules = BookingRules::every_day(legacy);
        match config.get("rules") {
            None | Some(Value::Null) => {}
            Some(Value::Object(m)) => read_rules(m, config, &format!("{ptr}/rules"), &mut rules, &mut out),
            Some(_) => out.push(problem(
                &format!("{ptr}/rules"),
                "`rules` is not an object",
                "write the booking rules as an object, e.g. {\"hours\": {\"mon\": [[\"09:00\", \"17:00\"]]}, \"slot_minutes\": 30}",
            )),
        }
        if out.len() > MAX_PROBLEMS {
            let more = out.len() - MAX_PROBLEMS;
            out.truncate(MAX_PROBLEMS);
            out.push(problem(
                &format!("{ptr}/rules"),
                &format!("{more} more problems with the booking rules are not listed"),
                "fix the problems above and save again",
            ));
        }
        if out.is_empty() { Ok(rules) } else { Err(out) }
    }
}

/// The legacy `working_hours` (`start`, `end`; 09:00 and 17:00 by default).
fn working_hours(config: &Value, ptr: &str, out: &mut Vec<Diagnostic>) -> OpenRange {
    let at = |k: &str, default: u16| {
        config
            .pointer(&format!("/working_hours/{k}"))
            .and_then(Value::as_str)
            .and_then(|s| minutes(s, false))
            .unwrap_or(default)
    };
    let range = OpenRange {
        start: at("start", 9 * 60),
        end: at("end", 17 * 60),
    };
    if range.start >= range.end {
        out.push(problem(
            &format!("{ptr}/working_hours/end"),
            &format!(
                "working hours end at {} but start at {}: no time is left to book",
                hhmm(range.end),
                hhmm(range.start)
            ),
            "make `end` later than `start` (ranges that cross midnight are two days' ranges in `rules.hours`)",
        ));
    }
    range
}

fn read_rules(
    m: &Map<String, Value>,
    config: &Value,
    ptr: &str,
    rules: &mut BookingRules,
    out: &mut Vec<Diagnostic>,
) {
    for k in m.keys() {
        if !RULE_KEYS.contains(&k.as_str()) {
            out.push(problem(
                &format!("{ptr}/{}", escape(k)),
                &format!("`{}` is not a booking rule", clip(k)),
                &format!("use only: {}", RULE_KEYS.join(", ")),
            ));
        }
    }
    if let Some(h) = m.get("hours") {
        if config.get("working_hours").is_some() {
            out.push(problem(
                &format!("{ptr}/hours"),
                "opening hours are given twice: in `working_hours` and in `rules.hours`",
                "remove `working_hours` and keep `rules.hours`, which gives each weekday its own ranges",
            ));
        }
        if let Some(hours) = read_hours(h, &format!("{ptr}/hours"), out) {
            rules.hours = hours;
        }
    }
    if let Some(d) = m.get("closed_dates") {
        rules.closed_dates = read_dates(d, &format!("{ptr}/closed_dates"), out);
    }
    let mut int = |key: &str, min: u32, max: u32| -> Option<u32> {
        let v = m.get(key)?;
        let p = format!("{ptr}/{key}");
        match v.as_u64().and_then(|n| u32::try_from(n).ok()) {
            Some(n) if (min..=max).contains(&n) => Some(n),
            _ => {
                out.push(problem(
                    &p,
                    &format!("`{key}` must be a whole number from {min} to {max}"),
                    &format!("write a whole number of {} from {min} to {max}", unit(key)),
                ));
                None
            }
        }
    };
    rules.slot_minutes = int("slot_minutes", 5, MAX_SLOT_MINUTES);
    if let Some(n) = int("step_minutes", 5, MAX_STEP_MINUTES) {
        rules.step_minutes = n;
    }
    if let Some(n) = int("buffer_before_minutes", 0, MAX_BUFFER_MINUTES) {
        rules.buffer_before_minutes = n;
    }
    if let Some(n) = int("buffer_after_minutes", 0, MAX_BUFFER_MINUTES) {
        rules.buffer_after_minutes = n;
    }
    if let Some(n) = int("min_notice_minutes", 0, MAX_NOTICE_MINUTES) {
        rules.min_notice_minutes = n;
    }
    rules.horizon_days = int("horizon_days", 1, MAX_HORIZON_DAYS);
    if let Some(n) = int("cancel_notice_minutes", 0, MAX_NOTICE_MINUTES) {
        rules.cancel_notice_minutes = n;
    }
}

fn unit(key: &str) -> &'static str {
    if key.ends_with("_days") {
        "days"
    } else {
        "minutes"
    }
}

fn read_hours(v: &Value, ptr: &str, out: &mut Vec<Diagnostic>) -> Option<[Vec<OpenRange>; 7]> {
    let Value::Object(days) = v else {
        out.push(problem(
            ptr,
            "`hours` is not an object of weekdays",
            "write e.g. {\"mon\": [[\"09:00\", \"12:00\"], [\"13:00\", \"17:00\"]], \"sat\": []}; a weekday left out or empty is closed",
        ));
        return None;
    };
    let before = out.len();
    let mut hours: [Vec<OpenRange>; 7] = std::array::from_fn(|_| Vec::new());
    for (day, ranges) in days {
        let p = format!("{ptr}/{}", escape(day));
        let Some(i) = WEEKDAYS.iter().position(|w| w == day) else {
            out.push(problem(
                &p,
                &format!("`{}` is not a weekday", clip(day)),
                &format!("name weekdays as {}", WEEKDAYS.join(", ")),
            ));
            continue;
        };
        let Value::Array(list) = ranges else {
            out.push(problem(
                &p,
                "a weekday's hours are not a list of ranges",
                "write a list of [\"HH:MM\", \"HH:MM\"] ranges, or [] for a closed day",
            ));
            continue;
        };
        if list.len() > MAX_RANGES_PER_DAY {
            out.push(problem(
                &p,
                &format!(
                    "{} ranges on one day; at most {MAX_RANGES_PER_DAY} are allowed",
                    list.len()
                ),
                "merge adjacent ranges",
            ));
            continue;
        }
        let mut day_ranges: Vec<(usize, OpenRange)> = Vec::new();
        for (j, r) in list.iter().enumerate() {
            if let Some(range) = read_range(r, &format!("{p}/{j}"), out) {
                day_ranges.push((j, range));
            }
        }
        day_ranges.sort_by_key(|(_, r)| *r);
        for w in day_ranges.windows(2) {
            if let [(_, a), (j, b)] = w
                && b.start < a.end
            {
                out.push(problem(
                    &format!("{p}/{j}"),
                    &format!("{} overlaps {} on the same day", b.label(), a.label()),
                    "make the day's ranges apart (or merge them into one)",
                ));
            }
        }
        hours[i] = day_ranges.into_iter().map(|(_, r)| r).collect();
    }
    (out.len() == before).then_some(hours)
}

fn read_range(v: &Value, ptr: &str, out: &mut Vec<Diagnostic>) -> Option<OpenRange> {
    let fix = "write a range as [\"09:00\", \"12:00\"]: two times HH:MM (24-hour clock; 24:00 only as an end), the start before the end";
    let pair = match v {
        Value::Array(a) if a.len() == 2 => a,
        _ => {
            out.push(problem(ptr, "a range is not a [start, end] pair", fix));
            return None;
        }
    };
    let mut times = [0u16; 2];
    let mut ok = true;
    for (k, t) in pair.iter().enumerate() {
        match t.as_str().and_then(|s| minutes(s, k == 1)) {
            Some(m) => times[k] = m,
            None => {
                out.push(problem(
                    &format!("{ptr}/{k}"),
                    &format!("{} is not a time HH:MM", clip(&t.to_string())),
                    fix,
                ));
                ok = false;
            }
        }
    }
    if !ok {
        return None;
    }
    let range = OpenRange {
        start: times[0],
        end: times[1],
    };
    if range.start >= range.end {
        out.push(problem(
            &format!("{ptr}/1"),
            &format!(
                "the range ends at {} but starts at {}",
                hhmm(range.end),
                hhmm(range.start)
            ),
            "make the end later than the start; a range across midnight is two ranges on two days",
        ));
        return None;
    }
    Some(range)
}

fn read_dates(v: &Value, ptr: &str, out: &mut Vec<Diagnostic>) -> BTreeSet<NaiveDate> {
    let mut dates = BTreeSet::new();
    let Value::Array(list) = v else {
        out.push(problem(
            ptr,
            "`closed_dates` is not a list of dates",
            "write e.g. [\"2026-12-25\", \"2027-01-01\"]",
        ));
        return dates;
    };
    if list.len() > MAX_CLOSED_DATES {
        out.push(problem(
            ptr,
            &format!(
                "{} closed dates; at most {MAX_CLOSED_DATES} are allowed",
                list.len()
            ),
            "remove dates already past, or close a weekday in `hours` instead",
        ));
        return dates;
    }
    for (i, d) in list.iter().enumerate() {
        let p = format!("{ptr}/{i}");
        match d
            .as_str()
            .filter(|s| s.len() == 10)
            .and_then(|s| NaiveDate::parse_from_str(s, "%Y-%m-%d").ok())
        {
            Some(date) if !dates.insert(date) => out.push(problem(
                &p,
                &format!("{date} is listed twice"),
                "list each closed date once",
            )),
            Some(_) => {}
            None => out.push(problem(
                &p,
                &format!("{} is not a date YYYY-MM-DD", clip(&d.to_string())),
                "write a calendar date such as 2026-12-25",
            )),
        }
    }
    dates
}

/// `HH:MM` as minutes after midnight; `24:00` only when `end`.
fn minutes(s: &str, end: bool) -> Option<u16> {
    let b = s.as_bytes();
    if b.len() != 5 || b[2] != b':' {
        return None;
    }
    let (h, m): (u16, u16) = (s.get(0..2)?.parse().ok()?, s.get(3..5)?.parse().ok()?);
    if !b[..2].iter().chain(&b[3..]).all(u8::is_ascii_digit) || m > 59 {
        return None;
    }
    match (h, m) {
        (24, 0) if end => Some(DAY_MINUTES),
        (0..=23, _) => Some(h * 60 + m),
        _ => None,
    }
}

/// Minutes after midnight as `HH:MM`.
pub fn hhmm(m: u16) -> String {
    format!("{:02}:{:02}", m / 60, m % 60)
}

/// The English name of a weekday, for sentences the model says (`Sundays`).
pub fn weekday_plural(d: Weekday) -> &'static str {
    match d {
        Weekday::Mon => "Mondays",
        Weekday::Tue => "Tuesdays",
        Weekday::Wed => "Wednesdays",
        Weekday::Thu => "Thursdays",
        Weekday::Fri => "Fridays",
        Weekday::Sat => "Saturdays",
        Weekday::Sun => "Sundays",
    }
}

/// The JSON Schema of `config.rules`, for the catalogue (the checks themselves are
/// [`BookingRules::from_config`]'s, which name every problem in the project's own words).
pub(super) fn rules_schema() -> Value {
    let time = json!({"type": "string", "pattern": "^(([01][0-9]|2[0-3]):[0-5][0-9]|24:00)$"});
    let day = json!({"type": "array", "maxItems": MAX_RANGES_PER_DAY,
                     "items": {"type": "array", "minItems": 2, "maxItems": 2, "items": time}});
    let days: Map<String, Value> = WEEKDAYS
        .iter()
        .map(|d| ((*d).to_owned(), day.clone()))
        .collect();
    json!({
        "type": "object",
        "title": "Booking rules, on the calendar's clock (time_zone)",
        "description": "Applied by every calendar action. hours: ranges per weekday (mon..sun); a weekday left out or [] is closed; without hours, working_hours on every day. closed_dates: YYYY-MM-DD. step_minutes: offered slots start every step from the opening of their range. buffer_*: free time a booking needs around it. min_notice_minutes, horizon_days: how soon and how far ahead bookings are taken. cancel_notice_minutes: how long before its start a booking may still be cancelled or moved (later: too_late_to_change).",
        "properties": {
            "hours": {"type": "object", "properties": days, "additionalProperties": false},
            "closed_dates": {"type": "array", "maxItems": MAX_CLOSED_DATES, "uniqueItems": true,
                             "items": {"type": "string", "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}$"}},
            "slot_minutes": {"type": "integer", "minimum": 5, "maximum": MAX_SLOT_MINUTES,
                             "description": "Slot length when the caller names none (default: 30, or default_event_duration for bookings)"},
            "step_minutes": {"type": "integer", "minimum": 5, "maximum": MAX_STEP_MINUTES, "default": 15},
            "buffer_before_minutes": {"type": "integer", "minimum": 0, "maximum": MAX_BUFFER_MINUTES, "default": 0},
            "buffer_after_minutes": {"type": "integer", "minimum": 0, "maximum": MAX_BUFFER_MINUTES, "default": 0},
            "min_notice_minutes": {"type": "integer", "minimum": 0, "maximum": MAX_NOTICE_MINUTES, "default": 0},
            "horizon_days": {"type": "integer", "minimum": 1, "maximum": MAX_HORIZON_DAYS,
                             "description": "How many days ahead bookings are taken (default: no limit)"},
            "cancel_notice_minutes": {"type": "integer", "minimum": 0, "maximum": MAX_NOTICE_MINUTES, "default": 0,
                             "description": "How long before its start a booking may still be cancelled or moved (default: until it starts)"}
        },
        "additionalProperties": false
    })
}

fn problem(pointer: &str, message: &str, fix: &str) -> Diagnostic {
    Diagnostic {
        pointer: pointer.to_owned(),
        message: message.to_owned(),
        fix: Some(fix.to_owned()),
    }
}

/// A key as a JSON Pointer segment (RFC 6901).
fn escape(k: &str) -> String {
    clip(k).replace('~', "~0").replace('/', "~1")
}

fn clip(s: &str) -> String {
    match s.char_indices().nth(64) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pointers(config: Value) -> Vec<String> {
        let mut p: Vec<String> = BookingRules::from_config(&config, "/tools/0/config")
            .unwrap_err()
            .into_iter()
            .map(|d| d.pointer)
            .collect();
        p.sort();
        p
    }

    #[test]
    fn no_rules_are_working_hours_on_every_day() {
        let r = BookingRules::from_config(&json!({}), "").unwrap();
        assert_eq!(r, BookingRules::default());
        let r = BookingRules::from_config(
            &json!({"working_hours": {"start": "08:30", "end": "12:00"}}),
            "",
        )
        .unwrap();
        let sunday = NaiveDate::from_ymd_opt(2030, 1, 6).unwrap();
        assert_eq!(r.ranges_on(sunday)[0].label(), "08:30-12:00");
    }

    #[test]
    fn rules_are_read_with_closed_days_and_dates() {
        let r = BookingRules::from_config(
            &json!({"rules": {
                "hours": {"mon": [["13:00", "17:00"], ["09:00", "12:00"]], "fri": [["09:00", "24:00"]], "sat": []},
                "closed_dates": ["2030-01-07"], "slot_minutes": 45, "step_minutes": 10,
                "buffer_before_minutes": 5, "buffer_after_minutes": 10,
                "min_notice_minutes": 120, "horizon_days": 60, "cancel_notice_minutes": 1440}}),
            "",
        )
        .unwrap();
        assert_eq!(
            r.hours[0].iter().map(OpenRange::label).collect::<Vec<_>>(),
            ["09:00-12:00", "13:00-17:00"]
        );
        assert_eq!(r.hours[4][0].end, DAY_MINUTES);
        assert!(r.hours[1].is_empty() && r.hours[5].is_empty() && r.hours[6].is_empty());
        let closed_monday = NaiveDate::from_ymd_opt(2030, 1, 7).unwrap();
        assert!(r.ranges_on(closed_monday).is_empty());
        assert_eq!(r.ranges_on(closed_monday + chrono::Days::new(7)).len(), 2);
        assert_eq!(
            (r.slot_minutes, r.step_minutes, r.horizon_days),
            (Some(45), 10, Some(60))
        );
        assert_eq!(r.cancel_notice_minutes, 1440);
    }

    #[test]
    fn every_problem_is_named_at_its_pointer() {
        let many: Vec<String> = (1..=8)
            .map(|d| format!("2030-01-{d:02}"))
            .cycle()
            .take(MAX_CLOSED_DATES + 1)
            .collect();
        assert_eq!(
            pointers(json!({"rules": {"closed_dates": many}})),
            ["/tools/0/config/rules/closed_dates"]
        );
        let seven = vec![json!(["08:00", "09:00"]); MAX_RANGES_PER_DAY + 1];
        assert_eq!(
            pointers(json!({
                "working_hours": {"start": "18:00", "end": "09:00"},
                "rules": {
                    "hours": {"mon": [["09:00", "12:00"], ["11:00", "13:00"]], "tue": [["25:00", "12:00"]],
                              "wed": [["12:00", "09:00"]], "thu": "9-5", "funday": [],
                              "fri": seven},
                    "closed_dates": ["2030-02-30", "2030-01-01", "2030-01-01"],
                    "slot_minutes": 0, "step_minutes": 1.5, "buffer_after_minutes": -1,
                    "min_notice_minutes": 99999999, "horizon_days": 0, "colour": "red",
                    "cancel_notice_minutes": "a day"}})),
            [
                "/tools/0/config/rules/buffer_after_minutes",
                "/tools/0/config/rules/cancel_notice_minutes",
                "/tools/0/config/rules/closed_dates/0",
                "/tools/0/config/rules/closed_dates/2",
                "/tools/0/config/rules/colour",
                "/tools/0/config/rules/horizon_days",
                "/tools/0/config/rules/hours",
                "/tools/0/config/rules/hours/fri",
                "/tools/0/config/rules/hours/funday",
                "/tools/0/config/rules/hours/mon/1",
                "/tools/0/config/rules/hours/thu",
                "/tools/0/config/rules/hours/tue/0/0",
                "/tools/0/config/rules/hours/wed/0/1",
                "/tools/0/config/rules/min_notice_minutes",
                "/tools/0/config/rules/slot_minutes",
                "/tools/0/config/rules/step_minutes",
                "/tools/0/config/working_hours/end",
            ]
        );
        assert_eq!(pointers(json!({"rules": []})), ["/tools/0/config/rules"]);
        let junk: serde_json::Map<String, Value> =
            (0..500).map(|i| (format!("k{i}"), json!(1))).collect();
        let found = BookingRules::from_config(&json!({ "rules": junk }), "").unwrap_err();
        assert_eq!(found.len(), MAX_PROBLEMS + 1);
        assert!(found[MAX_PROBLEMS].message.starts_with("450 more problems"));
    }

    #[test]
    fn times_are_read_strictly() {
        assert_eq!(minutes("09:30", false), Some(570));
        assert_eq!(minutes("24:00", true), Some(DAY_MINUTES));
        for bad in [
            "24:00", "9:30", "09:60", "0930", "+9:30", "09:3x", "", "09:30:00",
        ] {
            assert_eq!(minutes(bad, false), None, "{bad}");
        }
    }
}
