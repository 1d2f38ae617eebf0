//! Google Calendar (API v3) behind the same `Calendar` handler as CalDAV.
//!
//! `list_events` is `events.list` (single events ordered by start), `check_availability` is
//! `freeBusy` (the conflicts, and the next free slots of the asked length from `slots`, inside
//! working hours on the clock of the configured `time_zone`, else the calendar's own zone), and
//! `create_event` holds the slot in the store (see `holds`), then looks at the calendar and
//! `events.insert`s with an event id chosen from the idempotency key, the call and caller in
//! its private extended properties: a retried booking finds its own event, so no booking is
//! made twice, and none is ever taken back. A 409 on that id is answered by reading the event
//! (`events.get`, which Google answers for deleted events too): the same call's event in the
//! same slot is the booking (its real times and `htmlLink`); a cancelled one is not, and the
//! booking is made under the next id of its chain (each derived from the one before, so a
//! retry of the retry finds it too; at most [`ID_CHAIN`] ids); any other event under the id is
//! not ours, and the slot is refused as taken. Cancelling and moving send the etag they read
//! (`If-Match`): an event changed in between is not overwritten (412: the caller hears it
//! changed, nothing was changed). Each
//! request carries the agent's access token from [`Tokens`]; a 401 renews it once and tries
//! again. Failures are typed (`failure`): a 403 or 429 whose reason is `rateLimitExceeded` or
//! `userRateLimitExceeded` is `rate_limited`, any other 403 `not_connected`.

use std::time::Duration as StdDuration;

use chrono::{DateTime, Duration, FixedOffset, NaiveTime, Offset, Utc};
use reqwest::{Method, StatusCode, Url};
use secrecy::{ExposeSecret, SecretString};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use switchboard_runtime::effects::{CalendarOp, ToolkitScope};

use switchboard_core::ToolError;
use switchboard_core::toolkits::calendar::BookingRules;

use crate::bookings::{self, BOOKINGS_AHEAD_DAYS, FreeSlotsAsk};
use crate::caldav::{clip, host_label, parse_time, plausible_email, read_capped, rfc3339};
use crate::events::{self, Asked, Event};
use crate::failure;
use crate::holds::{Holds, calendar_key};
use crate::oauth::{TokenError, Tokens};
use crate::slots::{Interval, Zone};

/// The toolkit whose connection this handler uses.
pub const TOOLKIT: &str = "google_calendar";
/// The key of an agent tool's config under which the server names the connection to use
/// (`{"agent": "<name>"}`); tenants cannot set it (the toolkit's config schema has no such field).
pub const CONNECTION_KEY: &str = "oauth_connection";
/// Google's Calendar API.
pub const API_BASE: &str = "https://www.googleapis.com/calendar/v3/";

/// Most ids one booking tries when the earlier ones' events were cancelled.
pub const ID_CHAIN: usize = 3;

/// Largest response body read (the same cap as CalDAV's).
const MAX_EVENTS: usize = 2_000;
const REQUEST_TIMEOUT: StdDuration = StdDuration::from_secs(10);

/// The handler: an HTTP client with the outbound guard, the API base, and the token source.
#[derive(Debug)]
pub struct GoogleCalendar {
    http: reqwest::Client,
    api_base: Url,
    tokens: Tokens,
    /// Set by [`crate::Calendars::with_google`]: the store's slot holds.
    holds: Option<Holds>,
}

/// An HTTP client for Google (API and token endpoint) with the outbound guard.
pub fn client(allow_private: bool) -> Result<reqwest::Client, String> {
    switchboard_runtime::http::guarded_client_builder(allow_private)
        .user_agent(format!("switchboard/{}", env!("CARGO_PKG_VERSION")))
        .timeout(REQUEST_TIMEOUT)
        .connect_timeout(StdDuration::from_secs(5))
        .build()
        .map_err(|e| format!("cannot build the Google HTTP client: {e}"))
}

/// Which connection and calendar an operation uses, read once.
struct Target<'a> {
    tenant: &'a str,
    agent: String,
    calendar_id: String,
    default_duration: i64,
    /// The booking rules (`rules`, or the legacy `working_hours`), checked at save.
    rules: BookingRules,
    /// The configured `time_zone` (an IANA name, checked at save), over the calendar's own.
    time_zone: Option<String>,
}

/// Why one API request failed.
enum ApiError {
    /// The token was refused: renew once and retry.
    Unauthorized,
    /// A typed failure for the model.
    Failed(ToolError),
}

fn not_connected() -> ToolError {
    failure::not_connected(
        "the calendar is not connected: this agent's Google Calendar connection is missing or was revoked, and the operator must connect it again. Tell the caller you cannot book by phone right now and offer another way",
    )
}

fn token_error(e: TokenError) -> ToolError {
    match e {
        TokenError::NotConnected(_) => not_connected(),
        TokenError::Unavailable(why) => failure::unavailable(format!(
            "the calendar is unavailable right now ({why}); tell the caller and offer to call back"
        )),
    }
}

/// Whether a Google error body gives a rate limit as its reason.
fn rate_limit_reason(body: &Value) -> bool {
    body.pointer("/error/errors")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .take(16)
        .filter_map(|e| e.get("reason").and_then(Value::as_str))
        .any(|r| r == "rateLimitExceeded" || r == "userRateLimitExceeded")
}

/// The Google event id of a booking: base32hex characters (`0-9a-v`), the same for every
/// retry of one booking, never the same across tenants.
pub fn event_id(tenant: &str, idempotency_key: &str) -> String {
    let digest = Sha256::digest(format!("{tenant}\u{0}{idempotency_key}").as_bytes());
    let hex: String = digest.iter().take(16).map(|b| format!("{b:02x}")).collect();
    format!("sb{hex}")
}

/// The ids one booking may be made under, first [`event_id`]: each next one is derived from
/// the one before, for a booking whose event under that id was cancelled.
fn id_chain(first: &str) -> Vec<String> {
    let mut ids = vec![first.to_owned()];
    while ids.len() < ID_CHAIN {
        let prev = ids.last().map(String::as_str).unwrap_or(first);
        let digest = Sha256::digest(format!("{prev}\u{0}rebooked").as_bytes());
        let hex: String = digest.iter().take(16).map(|b| format!("{b:02x}")).collect();
        ids.push(format!("sb{hex}"));
    }
    ids
}

/// What an event found under one of a booking's ids is.
enum Existing {
    /// This booking, made by an earlier try: the answer to give.
    Ours(Value),
    /// Cancelled since: not a booking.
    Cancelled,
    /// Another call's event, or at another time: not this booking.
    Other,
}

impl GoogleCalendar {
    pub fn new(http: reqwest::Client, api_base: Url, tokens: Tokens) -> Self {
        GoogleCalendar {
            http,
            api_base,
            tokens,
            holds: None,
        }
    }

    pub(crate) fn holding(mut self, holds: Holds) -> Self {
        self.holds = Some(holds);
        self
    }

    /// Whether an agent tool is served by this handler: the server named its connection.
    pub fn serves(scope: &ToolkitScope<'_>) -> bool {
        scope.config.get(CONNECTION_KEY).is_some()
    }

    /// Performs one calendar operation.
    pub async fn call(
        &self,
        scope: &ToolkitScope<'_>,
        op: &CalendarOp,
    ) -> Result<Value, ToolError> {
        let t = target(scope)?;
        match op {
            CalendarOp::ListEvents {
                time_min,
                time_max,
                max_results,
            } => {
                let from = parse_time("time_min", time_min)?;
                let to = match time_max {
                    Some(x) => parse_time("time_max", x)?,
                    None => from + Duration::days(1),
                };
                if to <= from {
                    return Err(failure::invalid(format!(
                        "time_max {} is not after time_min {}; ask for a range that ends after it starts",
                        rfc3339(to),
                        rfc3339(from)
                    )));
                }
                let max = max_results.unwrap_or(10).clamp(1, 100);
                let events = self.events(&t, from.to_utc(), to.to_utc(), max).await?;
                let tz = *from.offset();
                Ok(json!({"events": events.iter().map(|e| e.json(&tz)).collect::<Vec<_>>()}))
            }
            CalendarOp::CheckAvailability {
                date,
                duration_minutes,
            } => {
                let start = parse_time("date", date)?;
                let minutes = duration_minutes.or(t.rules.slot_minutes).unwrap_or(30);
                let len = Duration::minutes(i64::from(minutes).clamp(1, 1440));
                self.availability(&t, start, len).await
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
                    .or(t.rules.slot_minutes)
                    .map_or(t.default_duration, i64::from);
                let len = Duration::minutes(minutes.clamp(1, 1440));
                let new = NewBooking {
                    id: event_id(scope.tenant_id, scope.idempotency_key),
                    title,
                    start,
                    len,
                    attendees: attendees.as_deref().unwrap_or_default(),
                    description: description.as_deref(),
                };
                self.create(scope, &t, &new).await
            }
            CalendarOp::FindBookings { email, name } => {
                self.find_bookings(scope, &t, email.as_deref(), name.as_deref())
                    .await
            }
            CalendarOp::CancelEvent { event_id } => self.cancel(scope, &t, event_id).await,
            CalendarOp::RescheduleEvent {
                event_id,
                new_start_time,
                duration_minutes,
            } => {
                let start = parse_time("new_start_time", new_start_time)?;
                self.reschedule(scope, &t, event_id, start, *duration_minutes)
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
                self.free_slots(&t, &ask).await
            }
        }
    }

    fn calendar_url(&self, t: &Target<'_>, tail: &str) -> Result<Url, ToolError> {
        let mut url = self.api_base.clone();
        {
            let mut seg = url.path_segments_mut().map_err(|_| {
                failure::misconfigured("the Google API base is not a URL with a path")
            })?;
            seg.pop_if_empty().push("calendars").push(&t.calendar_id);
            for s in tail.split('/').filter(|s| !s.is_empty()) {
                seg.push(s);
            }
        }
        Ok(url)
    }

    /// Sends one request with a fresh token; a 401 renews the token once and sends it again.
    async fn send(
        &self,
        t: &Target<'_>,
        method: Method,
        url: Url,
        body: Option<&Value>,
    ) -> Result<(StatusCode, Value), ToolError> {
        self.send_if(t, method, url, body, None).await
    }

    /// [`Self::send`] with `If-Match: etag` when one is given: a 412 is answered as such.
    async fn send_if(
        &self,
        t: &Target<'_>,
        method: Method,
        url: Url,
        body: Option<&Value>,
        if_match: Option<&str>,
    ) -> Result<(StatusCode, Value), ToolError> {
        let mut refused: Option<SecretString> = None;
        for _ in 0..2 {
            let token = self
                .tokens
                .access_token(t.tenant, &t.agent, TOOLKIT, refused.as_ref())
                .await
                .map_err(token_error)?;
            match self.once(&method, &url, body, if_match, &token).await {
                Ok(answer) => return Ok(answer),
                Err(ApiError::Unauthorized) => refused = Some(token),
                Err(ApiError::Failed(m)) => return Err(m),
            }
        }
        Err(not_connected())
    }

    async fn once(
        &self,
        method: &Method,
        url: &Url,
        body: Option<&Value>,
        if_match: Option<&str>,
        token: &SecretString,
    ) -> Result<(StatusCode, Value), ApiError> {
        let host = host_label(url);
        let mut req = self
            .http
            .request(method.clone(), url.clone())
            .bearer_auth(token.expose_secret());
        if let Some(b) = body {
            req = req.json(b);
        }
        if let Some(tag) = if_match {
            req = req.header(reqwest::header::IF_MATCH, tag);
        }
        let resp = req.send().await.map_err(|e| {
            ApiError::Failed(if e.is_timeout() {
                failure::timeout(format!(
                    "Google Calendar at {host} did not answer in time; tell the caller the calendar is slow right now and offer to try again"
                ))
            } else {
                failure::unavailable(format!(
                    "Google Calendar at {host} could not be reached; tell the caller the calendar is unavailable right now and offer to call back"
                ))
            })
        })?;
        let status = resp.status();
        if status == StatusCode::UNAUTHORIZED {
            return Err(ApiError::Unauthorized);
        }
        let text = read_capped(resp).await.map_err(|_| {
            ApiError::Failed(failure::unavailable(format!(
                "Google Calendar at {host} sent an answer too large or cut off"
            )))
        })?;
        let value = serde_json::from_str(&text).unwrap_or(Value::Null);
        let limited = || {
            failure::rate_limited(format!(
                "Google Calendar at {host} asks for fewer requests right now ({status}); nothing was changed. Try again in a few seconds"
            ))
        };
        match status {
            s if s.is_success() || s == StatusCode::CONFLICT => Ok((s, value)),
            // Whether a missing thing is the calendar or one event, the caller knows.
            StatusCode::NOT_FOUND | StatusCode::GONE => Ok((status, value)),
            // The etag sent is not the event's any more: the caller decides.
            StatusCode::PRECONDITION_FAILED if if_match.is_some() => Ok((status, value)),
            StatusCode::TOO_MANY_REQUESTS => Err(ApiError::Failed(limited())),
            StatusCode::FORBIDDEN if rate_limit_reason(&value) => Err(ApiError::Failed(limited())),
            StatusCode::FORBIDDEN => Err(ApiError::Failed(failure::not_connected(format!(
                "Google Calendar at {host} refused access to the calendar (403); the operator must connect an account that can edit it, or fix config.calendar_id"
            )))),
            s => Err(ApiError::Failed(failure::unavailable(format!(
                "Google Calendar at {host} failed ({s}); tell the caller the calendar is unavailable right now and offer to call back"
            )))),
        }
    }

    /// [`Self::send`] for a request on the calendar itself: a 404 means the calendar is not
    /// there.
    async fn send_calendar(
        &self,
        t: &Target<'_>,
        method: Method,
        url: Url,
        body: Option<&Value>,
    ) -> Result<(StatusCode, Value), ToolError> {
        let host = host_label(&url);
        let (status, value) = self.send(t, method, url, body).await?;
        if status == StatusCode::NOT_FOUND || status == StatusCode::GONE {
            return Err(calendar_missing(&host));
        }
        Ok((status, value))
    }

    async fn events(
        &self,
        t: &Target<'_>,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        max: u32,
    ) -> Result<Vec<Event>, ToolError> {
        Ok(self.events_in(t, from, to, max).await?.0)
    }

    /// The events of a window and the calendar's own time zone (IANA name), which Google
    /// sends with every list.
    async fn events_in(
        &self,
        t: &Target<'_>,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        max: u32,
    ) -> Result<(Vec<Event>, Option<String>), ToolError> {
        let mut url = self.calendar_url(t, "events")?;
        url.query_pairs_mut()
            .append_pair("timeMin", &rfc3339(from.fixed_offset()))
            .append_pair("timeMax", &rfc3339(to.fixed_offset()))
            .append_pair("maxResults", &max.to_string())
            .append_pair("singleEvents", "true")
            .append_pair("orderBy", "startTime");
        let (_, body) = self.send_calendar(t, Method::GET, url, None).await?;
        let items = body.get("items").and_then(Value::as_array);
        let zone = body
            .get("timeZone")
            .and_then(Value::as_str)
            .filter(|z| z.len() <= 64)
            .map(str::to_owned);
        // All-day events begin at midnight on the calendar's clock.
        let days = Zone::pick(t.time_zone.as_deref(), zone.as_deref(), Utc.fix());
        let events = items
            .into_iter()
            .flatten()
            .take(MAX_EVENTS)
            .filter(|e| e.get("status").and_then(Value::as_str) != Some("cancelled"))
            .filter_map(|e| parse_event(e, days))
            .collect();
        Ok((events, zone))
    }

    async fn busy(
        &self,
        t: &Target<'_>,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<Vec<Interval>, ToolError> {
        let mut url = self.api_base.clone();
        url.path_segments_mut()
            .map_err(|_| failure::misconfigured("the Google API base is not a URL with a path"))?
            .pop_if_empty()
            .push("freeBusy");
        let body = json!({
            "timeMin": rfc3339(from.fixed_offset()),
            "timeMax": rfc3339(to.fixed_offset()),
            "items": [{"id": t.calendar_id}],
        });
        let (_, answer) = self
            .send_calendar(t, Method::POST, url, Some(&body))
            .await?;
        let cal = answer
            .pointer(&format!(
                "/calendars/{}",
                t.calendar_id.replace('~', "~0").replace('/', "~1")
            ))
            .cloned()
            .unwrap_or(Value::Null);
        if cal
            .get("errors")
            .and_then(Value::as_array)
            .is_some_and(|e| !e.is_empty())
        {
            return Err(failure::not_connected(
                "Google Calendar could not tell the calendar's busy times (the calendar is not found or not shared); the operator must fix config.calendar_id",
            ));
        }
        Ok(cal
            .get("busy")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .take(MAX_EVENTS)
            .filter_map(|b| {
                let s = b.get("start").and_then(Value::as_str)?;
                let e = b.get("end").and_then(Value::as_str)?;
                Some((
                    DateTime::parse_from_rfc3339(s).ok()?.to_utc(),
                    DateTime::parse_from_rfc3339(e).ok()?.to_utc(),
                ))
            })
            .collect())
    }

    async fn availability(
        &self,
        t: &Target<'_>,
        start: DateTime<FixedOffset>,
        len: Duration,
    ) -> Result<Value, ToolError> {
        let tz = *start.offset();
        let zone = match &t.time_zone {
            Some(z) => Zone::pick(Some(z.as_str()), None, tz),
            // `freeBusy` does not say the calendar's zone; the smallest list does.
            None => {
                let probe = start.to_utc();
                let (_, calendar) = self
                    .events_in(t, probe, probe + Duration::minutes(1), 1)
                    .await?;
                Zone::pick(None, calendar.as_deref(), tz)
            }
        };
        let asked = Asked {
            start,
            len,
            rules: &t.rules,
            zone,
            now: Utc::now(),
        };
        let (from, to) = asked.reading();
        let busy = self.busy(t, from, to).await?;
        let conflicts: Vec<Value> = busy
            .iter()
            .filter(|b| asked.blocked_by(**b))
            .map(|(a, b)| json!({"start": rfc3339(a.with_timezone(&tz)), "end": rfc3339(b.with_timezone(&tz))}))
            .collect();
        asked.availability(conflicts, &busy)
    }

    /// Books a slot: checks the attendees, holds the slot in the store, looks
    /// at the calendar (this booking made before: it is the booking; someone else's event in
    /// the slot: `slot_taken`), then inserts the event. Nothing is written to the calendar
    /// without the hold, so two bookings of one slot never both insert.
    async fn create(
        &self,
        scope: &ToolkitScope<'_>,
        t: &Target<'_>,
        new: &NewBooking<'_>,
    ) -> Result<Value, ToolError> {
        for a in new.attendees {
            if !plausible_email(a) {
                return Err(failure::invalid_attendee(format!(
                    "attendee `{}` is not an email address; ask the caller for it again",
                    clip(a)
                )));
            }
        }
        let holds = self
            .holds
            .as_ref()
            .ok_or_else(|| failure::unavailable("bookings cannot be secured on this server (no booking database); nothing was booked"))?;
        let tz = *new.start.offset();
        let slot = (new.start.to_utc(), (new.start + new.len).to_utc());
        let now = Utc::now();
        let span = events::reading(slot, &t.rules, now);
        let Some(hold) = holds
            .take(t.tenant, &Self::hold_key(t), scope.idempotency_key, slot)
            .await?
        else {
            let (events, zone) = self.events_in(t, span.0, span.1, 250).await?;
            let asked = self.asked(t, new, zone.as_deref(), now);
            let mut busy: Vec<Interval> = events.iter().map(Event::interval).collect();
            busy.push(slot);
            return Err(asked.taken("is being booked by another caller", &busy));
        };
        let result = self.create_held(scope, t, new, span, now, tz).await;
        match &result {
            Err(e) if e.code == switchboard_core::ErrorCode::Timeout => hold.keep(),
            _ => hold.release().await,
        }
        result
    }

    /// The slot a booking asked for at `now`, with the calendar's rules and zone.
    fn asked<'a>(
        &self,
        t: &'a Target<'_>,
        new: &NewBooking<'_>,
        calendar_zone: Option<&str>,
        now: DateTime<Utc>,
    ) -> Asked<'a> {
        Asked {
            start: new.start,
            len: new.len,
            rules: &t.rules,
            zone: Zone::pick(t.time_zone.as_deref(), calendar_zone, *new.start.offset()),
            now,
        }
    }

    async fn create_held(
        &self,
        scope: &ToolkitScope<'_>,
        t: &Target<'_>,
        new: &NewBooking<'_>,
        span: Interval,
        now: DateTime<Utc>,
        tz: FixedOffset,
    ) -> Result<Value, ToolError> {
        let (events, calendar_zone) = self.events_in(t, span.0, span.1, 250).await?;
        let asked = self.asked(t, new, calendar_zone.as_deref(), now);
        let mut busy: Vec<Interval> = events.iter().map(Event::interval).collect();
        let chain = id_chain(&new.id);
        // An earlier try of this booking made its event: read it whole (its link) and check it.
        if let Some(own) = events.iter().find(|e| chain.contains(&e.id)) {
            match self
                .existing(scope, t, new, &own.id, calendar_zone.as_deref(), tz)
                .await?
            {
                Existing::Ours(v) => return Ok(v),
                Existing::Cancelled => {}
                Existing::Other => {
                    busy.push(asked.slot());
                    return Err(asked.taken(NOT_THIS_BOOKING, &busy));
                }
            }
        }
        asked.judge(&busy, false)?;
        let end = new.start + new.len;
        let mut private = serde_json::Map::new();
        private.insert("switchboard_call".into(), json!(scope.call_id));
        if let Some(c) = scope.caller {
            private.insert("switchboard_caller".into(), json!(c));
        }
        let mut body = json!({
            "summary": new.title,
            "start": {"dateTime": rfc3339(new.start)},
            "end": {"dateTime": rfc3339(end)},
            "extendedProperties": {"private": private},
        });
        // The instant is fixed by the offset; the calendar's zone makes the event read (and
        // repeat) in that zone's local time.
        if let Some(z) = &calendar_zone {
            body["start"]["timeZone"] = json!(z);
            body["end"]["timeZone"] = json!(z);
        }
        if let Value::Object(m) = &mut body {
            if let Some(d) = new.description {
                m.insert("description".into(), json!(d));
            }
            if !new.attendees.is_empty() {
                m.insert(
                    "attendees".into(),
                    new.attendees.iter().map(|a| json!({"email": a})).collect(),
                );
            }
        }
        for id in &chain {
            body["id"] = json!(id);
            let url = self.calendar_url(t, "events")?;
            let (status, stored) = self
                .send_calendar(t, Method::POST, url, Some(&body))
                .await?;
            if status != StatusCode::CONFLICT {
                let mut answer = json!({
                    "id": id,
                    "title": new.title,
                    "start": rfc3339(new.start),
                    "end": rfc3339(end),
                    "created": true,
                });
                with_link(&mut answer, &stored);
                return Ok(answer);
            }
            // 409: an event has this id (Google keeps deleted ones): see whose it is.
            match self
                .existing(scope, t, new, id, calendar_zone.as_deref(), tz)
                .await?
            {
                Existing::Ours(v) => return Ok(v),
                Existing::Cancelled => {}
                Existing::Other => {
                    busy.push(asked.slot());
                    return Err(asked.taken(NOT_THIS_BOOKING, &busy));
                }
            }
        }
        Err(failure::unavailable(format!(
            "this booking was made and then cancelled {ID_CHAIN} times; nothing was booked. Ask the caller whether they still want the appointment, then book it as a new request"
        )))
    }

    /// The event under one of a booking's ids, read by id (Google answers a deleted one as
    /// `cancelled`): ours when it carries this call and is in the slot asked, with its real
    /// times and link.
    async fn existing(
        &self,
        scope: &ToolkitScope<'_>,
        t: &Target<'_>,
        new: &NewBooking<'_>,
        id: &str,
        calendar_zone: Option<&str>,
        tz: FixedOffset,
    ) -> Result<Existing, ToolError> {
        let url = self.calendar_url(t, &format!("events/{id}"))?;
        let (status, body) = self.send(t, Method::GET, url, None).await?;
        if status == StatusCode::NOT_FOUND || status == StatusCode::GONE {
            return Ok(Existing::Cancelled);
        }
        if body.get("status").and_then(Value::as_str) == Some("cancelled") {
            return Ok(Existing::Cancelled);
        }
        let days = Zone::pick(t.time_zone.as_deref(), calendar_zone, Utc.fix());
        let Some(event) = parse_event(&body, days).filter(|e| e.id == id) else {
            return Ok(Existing::Other);
        };
        let slot = (new.start.to_utc(), (new.start + new.len).to_utc());
        if event.call.as_deref() != Some(scope.call_id) || event.interval() != slot {
            return Ok(Existing::Other);
        }
        let mut v = event.json(&tz);
        if let Value::Object(m) = &mut v {
            m.insert("created".into(), json!(false));
        }
        with_link(&mut v, &body);
        Ok(Existing::Ours(v))
    }

    /// The store's key of this calendar's slot holds.
    fn hold_key(t: &Target<'_>) -> String {
        calendar_key(&["google", t.tenant, &t.agent, &t.calendar_id])
    }

    /// The zone the calendar's hours are read in: the configured one, else the calendar's own
    /// (the smallest list says it), else UTC.
    async fn zone(&self, t: &Target<'_>, at: DateTime<Utc>) -> Result<Zone, ToolError> {
        if let Some(z) = &t.time_zone {
            return Ok(Zone::pick(Some(z.as_str()), None, Utc.fix()));
        }
        let (_, calendar) = self.events_in(t, at, at + Duration::minutes(1), 1).await?;
        Ok(Zone::pick(None, calendar.as_deref(), Utc.fix()))
    }

    /// The caller's own upcoming bookings: those whose private `switchboard_caller` is the
    /// call's caller (asked of Google as `privateExtendedProperty`, and checked again here).
    async fn find_bookings(
        &self,
        scope: &ToolkitScope<'_>,
        t: &Target<'_>,
        email: Option<&str>,
        name: Option<&str>,
    ) -> Result<Value, ToolError> {
        let caller = bookings::caller(scope)?;
        let now = Utc::now();
        let mut url = self.calendar_url(t, "events")?;
        url.query_pairs_mut()
            .append_pair("timeMin", &rfc3339(now.fixed_offset()))
            .append_pair(
                "timeMax",
                &rfc3339((now + Duration::days(BOOKINGS_AHEAD_DAYS)).fixed_offset()),
            )
            .append_pair("maxResults", "250")
            .append_pair("singleEvents", "true")
            .append_pair("orderBy", "startTime")
            .append_pair(
                "privateExtendedProperty",
                &format!("switchboard_caller={caller}"),
            );
        let (_, body) = self.send_calendar(t, Method::GET, url, None).await?;
        let calendar_zone = body.get("timeZone").and_then(Value::as_str);
        let zone = Zone::pick(t.time_zone.as_deref(), calendar_zone, Utc.fix());
        let events: Vec<Event> = body
            .get("items")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .take(MAX_EVENTS)
            .filter(|e| e.get("status").and_then(Value::as_str) != Some("cancelled"))
            .filter_map(|e| parse_event(e, zone))
            .collect();
        let found = events
            .iter()
            .filter(|e| bookings::owned(e, caller) && bookings::narrowed(e, email, name))
            .collect();
        Ok(bookings::bookings_answer(found, zone))
    }

    /// One of the caller's own bookings, whether it is cancelled already, and its etag;
    /// anything else (missing, another caller's, an id that is not an event id) is `not_found`.
    async fn own_event(
        &self,
        scope: &ToolkitScope<'_>,
        t: &Target<'_>,
        id: &str,
    ) -> Result<(Event, bool, Option<String>), ToolError> {
        let caller = bookings::caller(scope)?;
        if id.is_empty()
            || id.len() > 1024
            || !id.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            return Err(bookings::not_yours(id));
        }
        let url = self.calendar_url(t, &format!("events/{id}"))?;
        let (status, body) = self.send(t, Method::GET, url, None).await?;
        if status == StatusCode::NOT_FOUND || status == StatusCode::GONE {
            return Err(bookings::not_yours(id));
        }
        let zone = Zone::pick(t.time_zone.as_deref(), None, Utc.fix());
        let cancelled = body.get("status").and_then(Value::as_str) == Some("cancelled");
        let etag = body
            .get("etag")
            .and_then(Value::as_str)
            .filter(|e| e.len() <= 256)
            .map(str::to_owned);
        match parse_event(&body, zone) {
            Some(e) if e.id == id && bookings::owned(&e, caller) => Ok((e, cancelled, etag)),
            _ => Err(bookings::not_yours(id)),
        }
    }

    async fn cancel(
        &self,
        scope: &ToolkitScope<'_>,
        t: &Target<'_>,
        id: &str,
    ) -> Result<Value, ToolError> {
        let (event, cancelled, etag) = self.own_event(scope, t, id).await?;
        let zone = Zone::pick(t.time_zone.as_deref(), None, Utc.fix());
        if !cancelled {
            bookings::changeable(&event, &t.rules, zone, Utc::now(), "cancelled")?;
            let url = self.calendar_url(t, &format!("events/{id}"))?;
            // 404/410: gone already (a retry of this cancellation).
            let (status, _) = self
                .send_if(t, Method::DELETE, url, None, etag.as_deref())
                .await?;
            if status == StatusCode::PRECONDITION_FAILED {
                return Err(crate::caldav::changed_meanwhile());
            }
        }
        Ok(json!({
            "id": id,
            "title": event.title,
            "start": rfc3339(zone.show(event.start)),
            "cancelled": true,
        }))
    }

    /// Moves one of the caller's bookings: the new slot is held, checked and then the event
    /// itself is patched to it, so the old slot is given up only in the same write that takes
    /// the new one. A new slot that cannot be had leaves the booking where it was.
    async fn reschedule(
        &self,
        scope: &ToolkitScope<'_>,
        t: &Target<'_>,
        id: &str,
        start: DateTime<FixedOffset>,
        minutes: Option<u32>,
    ) -> Result<Value, ToolError> {
        let (event, cancelled, etag) = self.own_event(scope, t, id).await?;
        if cancelled {
            return Err(bookings::not_yours(id));
        }
        let len = minutes.map_or(event.end - event.start, |m| {
            Duration::minutes(i64::from(m).clamp(1, 1440))
        });
        let slot = (start.to_utc(), (start + len).to_utc());
        let moved = |moved: bool| {
            json!({"id": id, "title": event.title, "start": rfc3339(start),
                   "end": rfc3339(start + len), "moved": moved})
        };
        if (event.start, event.end) == slot {
            return Ok(moved(false));
        }
        let own_zone = Zone::pick(t.time_zone.as_deref(), None, Utc.fix());
        bookings::changeable(&event, &t.rules, own_zone, Utc::now(), "moved")?;
        let holds = self.holds.as_ref().ok_or_else(|| {
            failure::unavailable("bookings cannot be secured on this server (no booking database); nothing was changed")
        })?;
        let new = NewBooking {
            id: id.to_owned(),
            title: &event.title,
            start,
            len,
            attendees: &[],
            description: None,
        };
        let now = Utc::now();
        let span = events::reading(slot, &t.rules, now);
        let Some(hold) = holds
            .take(t.tenant, &Self::hold_key(t), scope.idempotency_key, slot)
            .await?
        else {
            let (events, zone) = self.events_in(t, span.0, span.1, 250).await?;
            let mut busy: Vec<Interval> = events.iter().map(Event::interval).collect();
            busy.push(slot);
            return Err(self.asked(t, &new, zone.as_deref(), now).taken(
                "is being booked by another caller; the booking was not moved",
                &busy,
            ));
        };
        let result = async {
            let (events, zone) = self.events_in(t, span.0, span.1, 250).await?;
            let asked = self.asked(t, &new, zone.as_deref(), now);
            let busy: Vec<Interval> = events
                .iter()
                .filter(|e| e.id != id)
                .map(Event::interval)
                .collect();
            asked.judge(&busy, true)?;
            let mut body = json!({
                "start": {"dateTime": rfc3339(start)},
                "end": {"dateTime": rfc3339(start + len)},
            });
            if let Some(z) = &zone {
                body["start"]["timeZone"] = json!(z);
                body["end"]["timeZone"] = json!(z);
            }
            let url = self.calendar_url(t, &format!("events/{id}"))?;
            let (status, stored) = self
                .send_if(t, Method::PATCH, url, Some(&body), etag.as_deref())
                .await?;
            if status == StatusCode::NOT_FOUND || status == StatusCode::GONE {
                return Err(bookings::not_yours(id));
            }
            if status == StatusCode::PRECONDITION_FAILED {
                return Err(crate::caldav::changed_meanwhile());
            }
            let mut answer = moved(true);
            with_link(&mut answer, &stored);
            Ok(answer)
        }
        .await;
        match &result {
            Err(e) if e.code == switchboard_core::ErrorCode::Timeout => hold.keep(),
            _ => hold.release().await,
        }
        result
    }

    async fn free_slots(&self, t: &Target<'_>, ask: &FreeSlotsAsk<'_>) -> Result<Value, ToolError> {
        let now = Utc::now();
        let zone = self.zone(t, now).await?;
        let window = ask.window(zone, now)?;
        let busy = if window.0 < window.1 {
            let (from, to) = bookings::reading(window, &t.rules);
            self.busy(t, from, to).await?
        } else {
            Vec::new()
        };
        Ok(bookings::free_slots_answer(
            window,
            ask.len(&t.rules),
            &busy,
            &t.rules,
            zone,
            now,
        ))
    }
}

/// Adds the event's page in Google Calendar (`htmlLink`, https only) to a booking's answer:
/// the record of the call keeps it, and the console links the booking from the call's timeline.
fn with_link(answer: &mut Value, stored: &Value) {
    if let (Some(link), Value::Object(m)) = (
        stored
            .get("htmlLink")
            .and_then(Value::as_str)
            .filter(|l| l.starts_with("https://") && l.len() <= 2048),
        answer,
    ) {
        m.insert("link".into(), json!(link));
    }
}

/// How a booking refuses an event under its id that is not this booking.
const NOT_THIS_BOOKING: &str = "cannot be booked: the calendar holds an event under this booking's id that is not this booking (another call's, or at another time)";

/// What `create_event` books.
struct NewBooking<'a> {
    /// The first event id of the booking's chain, from the idempotency key.
    id: String,
    title: &'a str,
    start: DateTime<FixedOffset>,
    len: Duration,
    attendees: &'a [String],
    description: Option<&'a str>,
}

fn calendar_missing(host: &str) -> ToolError {
    failure::not_connected(format!(
        "Google Calendar at {host} has no such calendar (404); the operator must fix config.calendar_id"
    ))
}

fn target<'a>(scope: &'a ToolkitScope<'a>) -> Result<Target<'a>, ToolError> {
    let agent = scope
        .config
        .pointer(&format!("/{CONNECTION_KEY}/agent"))
        .and_then(Value::as_str)
        .ok_or_else(not_connected)?
        .to_owned();
    let cfg = scope.config;
    Ok(Target {
        tenant: scope.tenant_id,
        agent,
        calendar_id: cfg
            .get("calendar_id")
            .and_then(Value::as_str)
            .unwrap_or("primary")
            .to_owned(),
        default_duration: cfg
            .get("default_event_duration")
            .and_then(Value::as_i64)
            .unwrap_or(30),
        rules: BookingRules::from_config(cfg, "/config").map_err(crate::caldav::rules_broken)?,
        time_zone: match cfg.get("time_zone").and_then(Value::as_str) {
            None => None,
            Some(name) if name.parse::<chrono_tz::Tz>().is_ok() => Some(name.to_owned()),
            Some(name) => {
                return Err(failure::misconfigured(format!(
                    "the calendar's config.time_zone `{}` is not an IANA time zone; the operator must fix it (e.g. Europe/Berlin)",
                    clip(name)
                )));
            }
        },
    })
}

/// An `events` item with a `dateTime` (or all-day `date`) start and end.
fn parse_event(e: &Value, days: Zone) -> Option<Event> {
    let time = |k: &str| -> Option<DateTime<Utc>> {
        let t = e.get(k)?;
        if let Some(dt) = t.get("dateTime").and_then(Value::as_str) {
            return DateTime::parse_from_rfc3339(dt).ok().map(|d| d.to_utc());
        }
        let date = t.get("date").and_then(Value::as_str)?;
        let day = chrono::NaiveDate::parse_from_str(date, "%Y-%m-%d").ok()?;
        days.instant(day.and_time(NaiveTime::MIN))
    };
    let private = |k: &str| {
        e.pointer(&format!("/extendedProperties/private/{k}"))
            .and_then(Value::as_str)
            .filter(|v| v.len() <= 256)
            .map(str::to_owned)
    };
    Some(Event {
        id: e.get("id").and_then(Value::as_str)?.to_owned(),
        created: e
            .get("created")
            .and_then(Value::as_str)
            .and_then(|c| DateTime::parse_from_rfc3339(c).ok())
            .map(|c| c.to_utc()),
        title: e
            .get("summary")
            .and_then(Value::as_str)
            .unwrap_or("(busy)")
            .to_owned(),
        start: time("start")?,
        end: time("end")?,
        description: e
            .get("description")
            .and_then(Value::as_str)
            .map(str::to_owned),
        call: private("switchboard_call"),
        caller: private("switchboard_caller"),
        attendees: e
            .get("attendees")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .take(100)
            .filter_map(|a| a.get("email").and_then(Value::as_str).map(str::to_owned))
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_ids_are_base32hex_stable_and_apart_per_tenant() {
        let a = event_id("acme", "c1-fc1-0");
        assert_eq!(a, event_id("acme", "c1-fc1-0"));
        assert_ne!(a, event_id("other", "c1-fc1-0"));
        assert!(
            a.len() >= 5
                && a.chars()
                    .all(|c| c.is_ascii_digit() || ('a'..='v').contains(&c))
        );
    }
}
