//! CalDAV (RFC 4791) calendars: Nextcloud, Radicale, iCloud-style servers.
//!
//! `list_events` and `check_availability` are a `REPORT` calendar-query with a time range that
//! asks the server to expand recurrences into UTC instances (a server that ignores `expand`
//! and answers local times is read right too: `TZID=` times in their IANA zone, floating times
//! in the configured `time_zone`, else UTC); `create_event` is a `PUT` of one
//! VEVENT whose UID comes from the idempotency key, named after the slot's start, with
//! `If-None-Match: *`, so a retried booking finds its own event instead of making a second one,
//! and of two bookings of one slot made at once the server lets exactly one; bookings that
//! overlap with different starts are settled after the `PUT` (see `CalDav::settle`). Basic auth
//! comes from the agent tool's `sensitive_config` (`username`, `password`).

use std::time::Duration as StdDuration;

use chrono::{
    DateTime, Duration, FixedOffset, NaiveDateTime, NaiveTime, Offset, SecondsFormat, Utc,
};
use chrono_tz::Tz;
use icalendar::{
    Calendar, CalendarComponent, CalendarDateTime, Component, DatePerhapsTime, EventLike,
};
use quick_xml::events::Event as XmlEvent;
use reqwest::{Method, StatusCode, Url};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use switchboard_core::toolkits::calendar::BookingRules;
use switchboard_core::{ErrorCode, ToolError};
use switchboard_runtime::effects::{CalendarOp, ToolkitScope};

use crate::bookings::{self, BOOKINGS_AHEAD_DAYS, FreeSlotsAsk};
use crate::events::{Asked, Event};
use crate::failure;
use crate::holds::{Holds, calendar_key};
use crate::slots::{self, Interval, Zone};

/// Largest response body read from a calendar server.
const MAX_BODY_BYTES: usize = 4 * 1024 * 1024;
/// Most events read from one response (past it the rest are ignored).
const MAX_EVENTS: usize = 2_000;
/// Each request's deadline.
const REQUEST_TIMEOUT: StdDuration = StdDuration::from_secs(10);
/// The VEVENT property naming the call that booked it.
const CALL_PROPERTY: &str = "X-SWITCHBOARD-CALL";
/// The VEVENT property naming the caller (number or user id) of that call.
const CALLER_PROPERTY: &str = "X-SWITCHBOARD-CALLER";

/// The CalDAV handler: one HTTP client with the outbound guard.
#[derive(Debug)]
pub struct CalDav {
    client: Option<reqwest::Client>,
    allow_private: bool,
    /// Set by [`crate::Calendars::new`]: the store's slot holds.
    holds: Option<Holds>,
}

/// The agent tool's settings, read once per operation.
struct Settings {
    url: Url,
    username: Option<String>,
    password: Option<String>,
    default_duration: i64,
    /// The booking rules (`rules`, or the legacy `working_hours`), checked at save.
    rules: BookingRules,
    /// The configured `time_zone`: working hours are read in it, and times the server sends
    /// without a zone are in it.
    zone: Option<Tz>,
}

impl Settings {
    /// The zone working hours are read in: the configured one, else the offset asked.
    fn zone(&self, asked: FixedOffset) -> Zone {
        self.zone.map_or(Zone::Fixed(asked), Zone::Iana)
    }

    /// A slot asked about now, with this calendar's rules and zone.
    fn asked(&self, start: DateTime<FixedOffset>, len: Duration) -> Asked<'_> {
        Asked {
            start,
            len,
            rules: &self.rules,
            zone: self.zone(*start.offset()),
            now: Utc::now(),
        }
    }
}

impl CalDav {
    /// `allow_private`: whether calendars on loopback and private networks may be reached
    /// (tests and local development only), the same switch as `api_call`'s guard.
    pub fn new(allow_private: bool) -> Self {
        let client = switchboard_runtime::http::guarded_client_builder(allow_private)
            .user_agent(format!("switchboard/{}", env!("CARGO_PKG_VERSION")))
            .timeout(REQUEST_TIMEOUT)
            .connect_timeout(StdDuration::from_secs(5))
            .build()
            .inspect_err(|e| tracing::error!(name: "caldav_http_client_failed", error = %e, "caldav_http_client_failed"))
            .ok();
        CalDav {
            client,
            allow_private,
            holds: None,
        }
    }

    pub(crate) fn holding(mut self, holds: Holds) -> Self {
        self.holds = Some(holds);
        self
    }

    /// Performs one calendar operation for a CalDAV-configured tool.
    pub async fn call(
        &self,
        scope: &ToolkitScope<'_>,
        op: &CalendarOp,
    ) -> Result<Value, ToolError> {
        let s = self.settings(scope)?;
        match op {
            CalendarOp::ListEvents {
                time_min,
                time_max,
                max_results,
            } => {
                let from = parse_time("time_min", time_min)?;
                let to = match time_max {
                    Some(t) => parse_time("time_max", t)?,
                    None => from + Duration::days(1),
                };
                if to <= from {
                    return Err(failure::invalid(format!(
                        "time_max {} is not after time_min {}; ask for a range that ends after it starts",
                        rfc3339(to),
                        rfc3339(from)
                    )));
                }
                let mut events = self.events(&s, from.to_utc(), to.to_utc()).await?;
                let max = usize::try_from(max_results.unwrap_or(10).clamp(1, 100)).unwrap_or(10);
                events.truncate(max);
                let tz = *from.offset();
                Ok(json!({"events": events.iter().map(|e| e.json(&tz)).collect::<Vec<_>>()}))
            }
            CalendarOp::CheckAvailability {
                date,
                duration_minutes,
            } => {
                let start = parse_time("date", date)?;
                let minutes = duration_minutes.or(s.rules.slot_minutes).unwrap_or(30);
                let len = Duration::minutes(i64::from(minutes).clamp(1, 1440));
                self.availability(&s, start, len).await
            }
            CalendarOp::CreateEvent {
                title,
                start_time,
                duration_minutes,
                attendees,
                description,
            } => {
                let start = parse_time("start_time", start_time)?;
                let minutes = duration_minutes
                    .or(s.rules.slot_minutes)
                    .map_or(s.default_duration, i64::from);
                let len = Duration::minutes(minutes.clamp(1, 1440));
                let uid = event_uid(scope.tenant_id, scope.idempotency_key);
                self.create(
                    scope,
                    &s,
                    NewEvent {
                        uid: &uid,
                        title,
                        start,
                        len,
                        attendees: attendees.as_deref().unwrap_or_default(),
                        description: description.as_deref(),
                    },
                )
                .await
            }
            CalendarOp::FindBookings { email, name } => {
                self.find_bookings(scope, &s, email.as_deref(), name.as_deref())
                    .await
            }
            CalendarOp::CancelEvent { event_id } => self.cancel(scope, &s, event_id).await,
            CalendarOp::RescheduleEvent {
                event_id,
                new_start_time,
                duration_minutes,
            } => {
                let start = parse_time("new_start_time", new_start_time)?;
                self.reschedule(scope, &s, event_id, start, *duration_minutes)
                    .await
            }
            CalendarOp::FindFreeSlots {
                day,
                part_of_day,
                time_min,
                time_max,
                duration_minutes,
            } => {
                let ask = FreeSlotsAsk {
                    day: day.as_deref(),
                    part_of_day: part_of_day.as_deref(),
                    time_min: time_min.as_deref(),
                    time_max: time_max.as_deref(),
                    duration_minutes: *duration_minutes,
                };
                self.free_slots(&s, &ask).await
            }
        }
    }

    fn settings(&self, scope: &ToolkitScope<'_>) -> Result<Settings, ToolError> {
        let cfg = scope.config;
        let raw = cfg.get("url").and_then(Value::as_str).ok_or_else(|| failure::misconfigured(
            "the calendar is not set up: its config has no `url`; the operator must set the CalDAV collection URL",
        ))?;
        let mut url = Url::parse(raw).map_err(|_| {
            failure::misconfigured(
                "the calendar's config.url is not a URL; the operator must fix it",
            )
        })?;
        if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
            return Err(failure::misconfigured(
                "the calendar's config.url must be an http(s) URL with a host",
            ));
        }
        if !self.allow_private
            && let Some(ip) = url
                .host_str()
                .and_then(|h| h.trim_start_matches('[').trim_end_matches(']').parse().ok())
            && switchboard_runtime::http::is_forbidden_address(ip)
        {
            return Err(failure::misconfigured(format!(
                "the calendar at {} is on a loopback, private or metadata address, which this server does not call",
                host_label(&url)
            )));
        }
        if !url.path().ends_with('/') {
            let path = format!("{}/", url.path());
            url.set_path(&path);
        }
        let text = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
        Ok(Settings {
            url,
            username: text(scope.secrets, "username"),
            password: text(scope.secrets, "password"),
            default_duration: cfg
                .get("default_event_duration")
                .and_then(Value::as_i64)
                .unwrap_or(30),
            rules: BookingRules::from_config(cfg, "/config").map_err(rules_broken)?,
            zone: match cfg.get("time_zone").and_then(Value::as_str) {
                None => None,
                Some(name) => Some(name.parse::<Tz>().map_err(|_| {
                    failure::misconfigured(format!(
                        "the calendar's config.time_zone `{}` is not an IANA time zone; the operator must fix it (e.g. Europe/Berlin)",
                        clip(name)
                    ))
                })?),
            },
        })
    }

    async fn availability(
        &self,
        s: &Settings,
        start: DateTime<FixedOffset>,
        len: Duration,
    ) -> Result<Value, ToolError> {
        let asked = s.asked(start, len);
        let (from, to) = asked.reading();
        let events = self.events(s, from, to).await?;
        let tz = *start.offset();
        let conflicts: Vec<Value> = events
            .iter()
            .filter(|e| asked.blocked_by(e.interval()))
            .map(|e| e.json(&tz))
            .collect();
        let busy: Vec<Interval> = events.iter().map(Event::interval).collect();
        asked.availability(conflicts, &busy)
    }

    /// Books a slot: checks the attendees, holds the slot in the store, looks at the calendar
    /// (this booking made before: it is the booking; someone else's event in the slot, or a
    /// time outside the hours: a refusal with free times), then `PUT`s the event under its
    /// UID's name with `If-None-Match: *` (a 412 is this booking stored by an earlier try).
    /// Nothing is written without the hold, so two bookings of one slot never both store.
    async fn create(
        &self,
        scope: &ToolkitScope<'_>,
        s: &Settings,
        new: NewEvent<'_>,
    ) -> Result<Value, ToolError> {
        for a in new.attendees {
            if !plausible_email(a) {
                return Err(failure::invalid_attendee(format!(
                    "attendee `{}` is not an email address; ask the caller for it again",
                    clip(a)
                )));
            }
        }
        let holds = self.holds.as_ref().ok_or_else(|| {
            failure::unavailable(
                "bookings cannot be secured on this server (no booking database); nothing was booked",
            )
        })?;
        let slot = (new.start.to_utc(), (new.start + new.len).to_utc());
        let key = calendar_key(&["caldav", scope.tenant_id, s.url.as_str()]);
        let Some(hold) = holds
            .take(scope.tenant_id, &key, scope.idempotency_key, slot)
            .await?
        else {
            let asked = s.asked(new.start, new.len);
            let (from, to) = asked.reading();
            let events = self.events(s, from, to).await?;
            let mut busy: Vec<Interval> = events.iter().map(Event::interval).collect();
            busy.push(slot);
            return Err(asked.taken("is being booked by another caller", &busy));
        };
        let result = self.create_held(scope, s, &new).await;
        match &result {
            Err(e) if e.code == ErrorCode::Timeout => hold.keep(),
            _ => hold.release().await,
        }
        result
    }

    async fn create_held(
        &self,
        scope: &ToolkitScope<'_>,
        s: &Settings,
        new: &NewEvent<'_>,
    ) -> Result<Value, ToolError> {
        let end = new.start + new.len;
        let tz = *new.start.offset();
        let asked = s.asked(new.start, new.len);
        let (from, to) = asked.reading();
        let events = self.events(s, from, to).await?;
        if let Some(own) = events.iter().find(|e| e.id == new.uid) {
            let mut v = own.json(&tz);
            if let Value::Object(m) = &mut v {
                m.insert("created".into(), json!(false));
            }
            return Ok(v);
        }
        let busy: Vec<Interval> = events.iter().map(Event::interval).collect();
        asked.judge(&busy, false)?;
        let mut event = icalendar::Event::new();
        event
            .uid(new.uid)
            .summary(new.title)
            .starts(new.start.to_utc())
            .ends(end.to_utc())
            .add_property(CALL_PROPERTY, scope.call_id);
        if let Some(c) = scope.caller {
            event.add_property(CALLER_PROPERTY, c);
        }
        if let Some(d) = new.description {
            event.description(d);
        }
        for a in new.attendees {
            event.append_multi_property(
                icalendar::Property::new("ATTENDEE", format!("mailto:{a}")).done(),
            );
        }
        let mut cal = Calendar::new();
        cal.push(event.done());
        let ics = cal.done().to_string();
        let name = resource_name(new.uid);
        let created = self.put_new(s, &name, &ics).await?;
        let mut answer = json!({
            "id": new.uid,
            "title": new.title,
            "start": rfc3339(new.start),
            "end": rfc3339(end),
            "created": created,
        });
        with_link(&mut answer, self.resource_url(s, &name).ok());
        Ok(answer)
    }

    /// `PUT`s a new resource with `If-None-Match: *`: `false` when one of that name exists.
    async fn put_new(&self, s: &Settings, name: &str, ics: &str) -> Result<bool, ToolError> {
        let url = s.url.join(&format!("{name}.ics")).map_err(|_| {
            failure::misconfigured("the calendar's config.url cannot take an event name")
        })?;
        let resp = self
            .request(s, Method::PUT, url)?
            .header("Content-Type", "text/calendar; charset=utf-8")
            .header("If-None-Match", "*")
            .body(ics.to_owned())
            .send()
            .await
            .map_err(|e| unreachable(&s.url, &e))?;
        match resp.status() {
            st if st.is_success() => Ok(true),
            StatusCode::PRECONDITION_FAILED => Ok(false),
            st => Err(refused(&s.url, st, "store the event")),
        }
    }

    /// The zone hours and days are read in: the configured one, else UTC.
    fn day_zone(s: &Settings) -> Zone {
        s.zone.map_or(Zone::Fixed(chrono::Utc.fix()), Zone::Iana)
    }

    /// The caller's own upcoming bookings: those whose `X-SWITCHBOARD-CALLER` is the call's
    /// caller.
    async fn find_bookings(
        &self,
        scope: &ToolkitScope<'_>,
        s: &Settings,
        email: Option<&str>,
        name: Option<&str>,
    ) -> Result<Value, ToolError> {
        let caller = bookings::caller(scope)?;
        let now = Utc::now();
        let events = self
            .events(s, now, now + Duration::days(BOOKINGS_AHEAD_DAYS))
            .await?;
        let found = events
            .iter()
            .filter(|e| bookings::owned(e, caller) && bookings::narrowed(e, email, name))
            .collect();
        Ok(bookings::bookings_answer(found, Self::day_zone(s)))
    }

    /// One of the caller's own bookings (stored under its UID's name), with its text and
    /// `ETag`; anything else is `not_found`.
    async fn own_event(
        &self,
        scope: &ToolkitScope<'_>,
        s: &Settings,
        uid: &str,
    ) -> Result<OwnEvent, ToolError> {
        let caller = bookings::caller(scope)?;
        let name = resource_name(uid);
        if uid.len() > 256 || name.is_empty() || !uid.starts_with("sb-") {
            return Err(bookings::not_yours(uid));
        }
        let url = self.resource_url(s, &name)?;
        let resp = self
            .request(s, Method::GET, url)?
            .send()
            .await
            .map_err(|e| unreachable(&s.url, &e))?;
        match resp.status() {
            StatusCode::NOT_FOUND | StatusCode::GONE => return Err(bookings::not_yours(uid)),
            st if !st.is_success() => return Err(refused(&s.url, st, "read the booking")),
            _ => {}
        }
        let etag = resp
            .headers()
            .get("etag")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let ics = read_capped(resp).await.map_err(|e| match e {
            ReadError::TooLarge => failure::unavailable("the booking is too large to read"),
            ReadError::Transport(e) => unreachable(&s.url, &e),
        })?;
        let event = parse_events(&ics, s.zone)
            .into_iter()
            .find(|e| e.id == uid && bookings::owned(e, caller))
            .ok_or_else(|| bookings::not_yours(uid))?;
        Ok(OwnEvent {
            name,
            etag,
            ics,
            event,
        })
    }

    fn resource_url(&self, s: &Settings, name: &str) -> Result<Url, ToolError> {
        s.url.join(&format!("{name}.ics")).map_err(|_| {
            failure::misconfigured("the calendar's config.url cannot take an event name")
        })
    }

    async fn cancel(
        &self,
        scope: &ToolkitScope<'_>,
        s: &Settings,
        uid: &str,
    ) -> Result<Value, ToolError> {
        let own = self.own_event(scope, s, uid).await?;
        bookings::changeable(
            &own.event,
            &s.rules,
            Self::day_zone(s),
            Utc::now(),
            "cancelled",
        )?;
        let mut req = self.request(s, Method::DELETE, self.resource_url(s, &own.name)?)?;
        if let Some(tag) = &own.etag {
            req = req.header("If-Match", tag);
        }
        let resp = req.send().await.map_err(|e| unreachable(&s.url, &e))?;
        match resp.status() {
            st if st.is_success() || st == StatusCode::NOT_FOUND => {}
            StatusCode::PRECONDITION_FAILED => return Err(changed_meanwhile()),
            st => return Err(refused(&s.url, st, "cancel the booking")),
        }
        Ok(json!({
            "id": uid,
            "title": own.event.title,
            "start": rfc3339(Self::day_zone(s).show(own.event.start)),
            "cancelled": true,
        }))
    }

    /// Moves one of the caller's bookings: the new slot is held and checked, then the same
    /// resource is rewritten with the new times (`If-Match`), so the old slot is given up only
    /// in the write that takes the new one.
    async fn reschedule(
        &self,
        scope: &ToolkitScope<'_>,
        s: &Settings,
        uid: &str,
        start: DateTime<FixedOffset>,
        minutes: Option<u32>,
    ) -> Result<Value, ToolError> {
        let own = self.own_event(scope, s, uid).await?;
        let event = &own.event;
        let len = minutes.map_or(event.end - event.start, |m| {
            Duration::minutes(i64::from(m).clamp(1, 1440))
        });
        let slot = (start.to_utc(), (start + len).to_utc());
        let moved = |moved: bool| {
            json!({"id": uid, "title": event.title, "start": rfc3339(start),
                   "end": rfc3339(start + len), "moved": moved})
        };
        if (event.start, event.end) == slot {
            return Ok(moved(false));
        }
        bookings::changeable(event, &s.rules, Self::day_zone(s), Utc::now(), "moved")?;
        let holds = self.holds.as_ref().ok_or_else(|| {
            failure::unavailable("bookings cannot be secured on this server (no booking database); nothing was changed")
        })?;
        let key = calendar_key(&["caldav", scope.tenant_id, s.url.as_str()]);
        let asked = s.asked(start, len);
        let (from, to) = asked.reading();
        let Some(hold) = holds
            .take(scope.tenant_id, &key, scope.idempotency_key, slot)
            .await?
        else {
            let events = self.events(s, from, to).await?;
            let mut busy: Vec<Interval> = events.iter().map(Event::interval).collect();
            busy.push(slot);
            return Err(asked.taken(
                "is being booked by another caller; the booking was not moved",
                &busy,
            ));
        };
        let result = async {
            let events = self.events(s, from, to).await?;
            let busy: Vec<Interval> = events
                .iter()
                .filter(|e| e.id != uid)
                .map(Event::interval)
                .collect();
            asked.judge(&busy, true)?;
            let ics = moved_ics(&own.ics, uid, slot)
                .ok_or_else(|| failure::unavailable("the booking could not be read to move it"))?;
            let mut req = self
                .request(s, Method::PUT, self.resource_url(s, &own.name)?)?
                .header("Content-Type", "text/calendar; charset=utf-8")
                .body(ics);
            if let Some(tag) = &own.etag {
                req = req.header("If-Match", tag);
            }
            let resp = req.send().await.map_err(|e| unreachable(&s.url, &e))?;
            match resp.status() {
                st if st.is_success() => {
                    let mut answer = moved(true);
                    with_link(&mut answer, self.resource_url(s, &own.name).ok());
                    Ok(answer)
                }
                StatusCode::PRECONDITION_FAILED => Err(changed_meanwhile()),
                st => Err(refused(&s.url, st, "move the booking")),
            }
        }
        .await;
        match &result {
            Err(e) if e.code == ErrorCode::Timeout => hold.keep(),
            _ => hold.release().await,
        }
        result
    }

    async fn free_slots(&self, s: &Settings, ask: &FreeSlotsAsk<'_>) -> Result<Value, ToolError> {
        let now = Utc::now();
        let zone = Self::day_zone(s);
        let window = ask.window(zone, now)?;
        let busy: Vec<Interval> = if window.0 < window.1 {
            let (from, to) = bookings::reading(window, &s.rules);
            self.events(s, from, to)
                .await?
                .iter()
                .map(Event::interval)
                .collect()
        } else {
            Vec::new()
        };
        Ok(bookings::free_slots_answer(
            window,
            ask.len(&s.rules),
            &busy,
            &s.rules,
            zone,
            now,
        ))
    }

    /// The events overlapping `[from, to)`, ordered by start.
    async fn events(
        &self,
        s: &Settings,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<Vec<Event>, ToolError> {
        let (a, b) = (ical_utc(from), ical_utc(to));
        let body = format!(
            r#"<?xml version="1.0" encoding="utf-8"?>
<C:calendar-query xmlns:D="DAV:" xmlns:C="urn:ietf:params:xml:ns:caldav">
  <D:prop><C:calendar-data><C:expand start="{a}" end="{b}"/></C:calendar-data></D:prop>
  <C:filter><C:comp-filter name="VCALENDAR"><C:comp-filter name="VEVENT"><C:time-range start="{a}" end="{b}"/></C:comp-filter></C:comp-filter></C:filter>
</C:calendar-query>"#
        );
        let report = Method::from_bytes(b"REPORT")
            .map_err(|e| failure::unavailable(format!("cannot form a REPORT request ({e})")))?;
        let resp = self
            .request(s, report, s.url.clone())?
            .header("Depth", "1")
            .header("Content-Type", "application/xml; charset=utf-8")
            .body(body)
            .send()
            .await
            .map_err(|e| unreachable(&s.url, &e))?;
        let status = resp.status();
        if status != StatusCode::MULTI_STATUS && !status.is_success() {
            return Err(refused(&s.url, status, "list its events"));
        }
        let text = read_capped(resp).await.map_err(|e| match e {
            ReadError::TooLarge => failure::invalid(format!(
                "the calendar at {} answered more than {} MiB; ask for a shorter time range",
                host_label(&s.url),
                MAX_BODY_BYTES / (1024 * 1024)
            )),
            ReadError::Transport(e) => unreachable(&s.url, &e),
        })?;
        let mut events: Vec<Event> = calendar_data(&text)
            .map_err(|e| {
                failure::unavailable(format!(
                    "the calendar at {} answered a response that is not CalDAV XML ({e})",
                    host_label(&s.url)
                ))
            })?
            .iter()
            .flat_map(|ics| parse_events(ics, s.zone))
            .filter(|e| slots::overlaps((from, to), e.interval()))
            .take(MAX_EVENTS)
            .collect();
        events.sort_by(|a, b| a.start.cmp(&b.start).then_with(|| a.id.cmp(&b.id)));
        Ok(events)
    }

    fn request(
        &self,
        s: &Settings,
        method: Method,
        url: Url,
    ) -> Result<reqwest::RequestBuilder, ToolError> {
        let client = self.client.as_ref().ok_or_else(|| {
            failure::unavailable("the calendar client could not be built on this server; the operators have the details in its log")
        })?;
        let mut req = client.request(method, url);
        if let Some(user) = &s.username {
            req = req.basic_auth(user, s.password.as_deref());
        }
        Ok(req)
    }
}

/// What `create_event` books.
struct NewEvent<'a> {
    uid: &'a str,
    title: &'a str,
    start: DateTime<FixedOffset>,
    len: Duration,
    attendees: &'a [String],
    description: Option<&'a str>,
}

/// One of the caller's bookings as stored: its resource name, `ETag` and text.
struct OwnEvent {
    name: String,
    etag: Option<String>,
    ics: String,
    event: Event,
}

/// Adds the event's resource URL (without any user name or password in it) to a booking's
/// answer: the record of the call keeps it, and the console links the booking from the call's
/// timeline.
fn with_link(answer: &mut Value, url: Option<Url>) {
    if let (Some(mut url), Value::Object(m)) = (url, answer) {
        // A URL that cannot lose its credentials is not shown.
        if url.set_username("").is_ok() && url.set_password(None).is_ok() {
            url.set_query(None);
            url.set_fragment(None);
            m.insert("link".into(), json!(url.as_str()));
        }
    }
}

/// A saved config whose booking rules do not read (they are checked at save; this is a config
/// written around that check): the operator must fix it.
pub(crate) fn rules_broken(problems: Vec<switchboard_core::Diagnostic>) -> ToolError {
    let first = problems.first().map_or_else(String::new, |d| {
        format!(" (at {}: {})", d.pointer, d.message)
    });
    failure::misconfigured(format!(
        "the calendar's booking rules cannot be read{first}; the operator must fix the agent's calendar config. Tell the caller you cannot book by phone right now"
    ))
}

/// A write refused because the booking changed since it was read (`If-Match`: 412).
pub(crate) fn changed_meanwhile() -> ToolError {
    failure::unavailable(
        "the booking was changed by someone else a moment ago; nothing was changed. Look it up again with find_bookings",
    )
}

/// The iCalendar text of a booking with its event `uid` moved to `slot`.
fn moved_ics(ics: &str, uid: &str, slot: Interval) -> Option<String> {
    let mut cal = ics.parse::<Calendar>().ok()?;
    let mut found = false;
    for c in cal.components.iter_mut() {
        if let CalendarComponent::Event(e) = c
            && e.get_uid() == Some(uid)
        {
            e.remove_property("DURATION");
            e.starts(slot.0).ends(slot.1);
            found = true;
        }
    }
    found.then(|| cal.to_string())
}

/// The event's UID: the same for every retry of one booking (the idempotency key names the
/// call, the function call and the action), and never the same across tenants.
fn event_uid(tenant: &str, idempotency_key: &str) -> String {
    let digest = Sha256::digest(format!("{tenant}\u{0}{idempotency_key}").as_bytes());
    let hex: String = digest.iter().take(16).map(|b| format!("{b:02x}")).collect();
    format!("sb-{hex}@switchboard")
}

/// The resource name for a UID: its safe characters only.
fn resource_name(uid: &str) -> String {
    uid.chars()
        .take_while(|c| *c != '@')
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
        .collect()
}

/// Every `calendar-data` text of a multistatus body.
fn calendar_data(xml: &str) -> Result<Vec<String>, String> {
    let mut reader = quick_xml::Reader::from_str(xml);
    let mut out = Vec::new();
    let mut inside = false;
    let mut current = String::new();
    loop {
        match reader.read_event().map_err(|e| e.to_string())? {
            XmlEvent::Start(e) if e.local_name().as_ref() == "calendar-data" => {
                inside = true;
                current.clear();
            }
            XmlEvent::End(e) if e.local_name().as_ref() == "calendar-data" => {
                inside = false;
                if out.len() < MAX_EVENTS {
                    out.push(std::mem::take(&mut current));
                }
            }
            XmlEvent::Text(t) if inside => current.push_str(&t.xml10_content()),
            XmlEvent::CData(t) if inside => current.push_str(&t.xml10_content()),
            XmlEvent::GeneralRef(r) if inside => {
                match r.resolve_char_ref().map_err(|e| e.to_string())? {
                    Some(c) => current.push(c),
                    None => {
                        let name = r.xml10_content();
                        let text = quick_xml::escape::resolve_predefined_entity(&name)
                            .ok_or_else(|| format!("unknown entity &{name};"))?;
                        current.push_str(text);
                    }
                }
            }
            XmlEvent::Eof => break,
            _ => {}
        }
    }
    Ok(out)
}

/// The VEVENTs of one iCalendar object. Times with a `TZID=` are read in that zone (an IANA
/// name, also as the tail of a longer id such as `/example.com/20200101/Europe/Berlin`);
/// floating times, dates and unknown zones in `floating` (the configured zone), else as UTC.
fn parse_events(ics: &str, floating: Option<Tz>) -> Vec<Event> {
    let Ok(cal) = ics.parse::<Calendar>() else {
        return Vec::new();
    };
    cal.components
        .iter()
        .filter_map(|c| match c {
            CalendarComponent::Event(e) => Some(e),
            _ => None,
        })
        .filter(|e| {
            e.property_value("STATUS")
                .is_none_or(|s| !s.eq_ignore_ascii_case("CANCELLED"))
        })
        .filter_map(|e| {
            let (start, all_day) = to_utc(e.get_start()?, floating)?;
            let end = match e.get_end().and_then(|t| to_utc(t, floating)) {
                Some((end, _)) => end,
                None if all_day => start + Duration::days(1),
                None => start,
            };
            Some(Event {
                id: e.get_uid().unwrap_or_default().to_owned(),
                created: None,
                title: e.get_summary().unwrap_or_default().to_owned(),
                start,
                end: end.max(start),
                description: e.get_description().map(str::to_owned),
                call: e.property_value(CALL_PROPERTY).map(str::to_owned),
                caller: e.property_value(CALLER_PROPERTY).map(str::to_owned),
                attendees: e
                    .multi_properties()
                    .get("ATTENDEE")
                    .into_iter()
                    .flatten()
                    .take(100)
                    .map(|p| p.value().to_owned())
                    .collect(),
            })
        })
        .collect()
}

fn to_utc(t: DatePerhapsTime, floating: Option<Tz>) -> Option<(DateTime<Utc>, bool)> {
    let in_zone = |local: NaiveDateTime, zone: Option<Tz>| match zone {
        Some(z) => Zone::Iana(z).instant(local),
        None => Some(local.and_utc()),
    };
    match t {
        DatePerhapsTime::DateTime(CalendarDateTime::Utc(t)) => Some((t, false)),
        DatePerhapsTime::DateTime(CalendarDateTime::Floating(t)) => {
            Some((in_zone(t, floating)?, false))
        }
        DatePerhapsTime::DateTime(CalendarDateTime::WithTimezone { date_time, tzid }) => {
            Some((in_zone(date_time, zone_named(&tzid).or(floating))?, false))
        }
        DatePerhapsTime::Date(d) => Some((in_zone(d.and_time(NaiveTime::MIN), floating)?, true)),
    }
}

/// The IANA zone a `TZID` names: the whole id, or its longest tail that is a zone name.
fn zone_named(tzid: &str) -> Option<Tz> {
    let id = tzid.trim().trim_matches('"');
    if id.len() > 128 {
        return None;
    }
    std::iter::once(id)
        .chain(id.match_indices('/').map(|(i, _)| &id[i + 1..]))
        .find_map(|tail| tail.parse::<Tz>().ok())
}

pub(crate) fn parse_time(field: &str, s: &str) -> Result<DateTime<FixedOffset>, ToolError> {
    DateTime::parse_from_rfc3339(s).map_err(|_| {
        failure::invalid(format!(
            "{field} `{}` is not an RFC 3339 time; write it like 2030-01-07T14:00:00Z or 2030-01-07T09:00:00-05:00",
            clip(s)
        ))
    })
}

pub(crate) fn rfc3339(t: DateTime<FixedOffset>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

fn ical_utc(t: DateTime<Utc>) -> String {
    t.format("%Y%m%dT%H%M%SZ").to_string()
}

/// `scheme://host:port` of the calendar: what errors name (never the path or credentials).
pub(crate) fn host_label(url: &Url) -> String {
    format!(
        "{}://{}:{}",
        url.scheme(),
        url.host_str().unwrap_or_default(),
        url.port_or_known_default().unwrap_or_default()
    )
}

fn unreachable(url: &Url, e: &reqwest::Error) -> ToolError {
    let host = host_label(url);
    if e.is_timeout() {
        return failure::timeout(format!(
            "the calendar at {host} did not answer in time; tell the caller the calendar is slow right now and offer to try again"
        ));
    }
    let why = if e.is_connect() {
        "could not be reached"
    } else {
        "failed while answering"
    };
    failure::unavailable(format!(
        "the calendar at {host} {why}; tell the caller the calendar is unavailable right now and offer to call back"
    ))
}

fn refused(url: &Url, status: StatusCode, what: &str) -> ToolError {
    let host = host_label(url);
    match status {
        StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => failure::not_connected(format!(
            "the calendar at {host} refused the credentials ({status}); the operator must fix the agent's calendar username and password"
        )),
        StatusCode::NOT_FOUND => failure::not_connected(format!(
            "the calendar at {host} has no calendar at the configured URL (404); the operator must fix config.url"
        )),
        StatusCode::TOO_MANY_REQUESTS => failure::rate_limited(format!(
            "the calendar at {host} asks for fewer requests right now (429); nothing was changed. Try again in a few seconds"
        )),
        _ => failure::unavailable(format!(
            "the calendar at {host} did not {what} ({status}); tell the caller the calendar is unavailable right now and offer to call back"
        )),
    }
}

pub(crate) enum ReadError {
    TooLarge,
    Transport(reqwest::Error),
}

pub(crate) async fn read_capped(mut resp: reqwest::Response) -> Result<String, ReadError> {
    let mut buf = Vec::new();
    while let Some(chunk) = resp.chunk().await.map_err(ReadError::Transport)? {
        if buf.len() + chunk.len() > MAX_BODY_BYTES {
            return Err(ReadError::TooLarge);
        }
        buf.extend_from_slice(&chunk);
    }
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

/// `local@domain.tld`, no spaces or angle brackets: enough to catch a misheard address.
pub(crate) fn plausible_email(a: &str) -> bool {
    let Some((local, domain)) = a.rsplit_once('@') else {
        return false;
    };
    !local.is_empty()
        && domain.contains('.')
        && !domain.starts_with('.')
        && !domain.ends_with('.')
        && a.len() <= 254
        && !a
            .chars()
            .any(|c| c.is_whitespace() || "<>,;:\"()[]\\".contains(c))
}

pub(crate) fn clip(s: &str) -> String {
    match s.char_indices().nth(80) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uids_are_stable_per_booking_and_apart_per_tenant() {
        let a = event_uid("acme", "c1-fc1-0");
        assert_eq!(a, event_uid("acme", "c1-fc1-0"));
        assert_ne!(a, event_uid("other", "c1-fc1-0"));
        assert_ne!(a, event_uid("acme", "c1-fc2-0"));
        assert_eq!(resource_name(&a).len(), 35);
    }

    #[test]
    fn calendar_data_is_read_from_a_multistatus() {
        let xml = r#"<?xml version="1.0"?><multistatus xmlns="DAV:" xmlns:C="urn:ietf:params:xml:ns:caldav"><response><href>/a/b/x.ics</href><propstat><prop><C:calendar-data>BEGIN:VCALENDAR&#13;
VERSION:2.0&#13;
BEGIN:VEVENT&#13;
UID:x1&#13;
SUMMARY:Dentist &amp; co&#13;
DTSTART:20300107T100000Z&#13;
DTEND:20300107T103000Z&#13;
END:VEVENT&#13;
END:VCALENDAR&#13;
</C:calendar-data></prop></propstat></response></multistatus>"#;
        let data = calendar_data(xml).unwrap();
        let events = parse_events(&data[0], None);
        assert_eq!(events.len(), 1, "{data:?}");
        assert_eq!(events[0].title, "Dentist & co");
        assert_eq!(
            rfc3339(events[0].start.fixed_offset()),
            "2030-01-07T10:00:00Z"
        );
    }

    /// A server that ignores `expand` answers local times: each is read in its own zone.
    /// (DTSTART as sent, the configured zone, the instant it is.)
    #[test]
    fn local_times_are_read_in_their_zone() {
        let berlin: Option<Tz> = "Europe/Berlin".parse().ok();
        let cases: &[(&str, Option<Tz>, &str)] = &[
            (
                "DTSTART;TZID=America/New_York:20300310T090000",
                None,
                "2030-03-10T13:00:00Z",
            ),
            (
                "DTSTART;TZID=America/New_York:20300309T090000",
                None,
                "2030-03-09T14:00:00Z",
            ),
            (
                "DTSTART;TZID=\"/example.org/2020/Europe/Berlin\":20300707T090000",
                None,
                "2030-07-07T07:00:00Z",
            ),
            (
                "DTSTART;TZID=Nowhere/Special:20300707T090000",
                berlin,
                "2030-07-07T07:00:00Z",
            ),
            ("DTSTART:20300107T090000", berlin, "2030-01-07T08:00:00Z"),
            ("DTSTART:20300107T090000", None, "2030-01-07T09:00:00Z"),
            ("DTSTART:20300107T090000Z", berlin, "2030-01-07T09:00:00Z"),
        ];
        for (start, zone, want) in cases {
            let ics = format!(
                "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nBEGIN:VEVENT\r\nUID:x\r\nSUMMARY:s\r\n{start}\r\nDURATION:PT1H\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n"
            );
            let events = parse_events(&ics, *zone);
            assert_eq!(events.len(), 1, "{start}");
            assert_eq!(rfc3339(events[0].start.fixed_offset()), *want, "{start}");
        }
    }
}
