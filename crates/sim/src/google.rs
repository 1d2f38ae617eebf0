//! A simulator of Google's OAuth 2.0 endpoints and of the Calendar API v3, written from Google's
//! documentation ("Using OAuth 2.0 for Web Server Applications", the Calendar API reference for
//! `events.list`, `events.insert` and `freeBusy.query`), for tests that cannot reach Google.
//!
//! - `GET /o/oauth2/v2/auth`: checks the request (known client, registered redirect URI, `code`
//!   response type, an S256 PKCE challenge) and plays a user who consents: a 302 to the redirect
//!   URI with `code` and `state`.
//! - `POST /token` (form body): `authorization_code` (single-use code, the same redirect URI,
//!   the verifier must hash to the challenge) and `refresh_token` (rotated when rotation is on;
//!   a revoked or replaced one gets `invalid_grant`); client credentials checked on each.
//! - `/calendar/v3/…`: bearer tokens checked (unknown or expired: 401 `UNAUTHENTICATED`);
//!   `events.list` (time window as Google defines it: an event's end after `timeMin`, its
//!   start before `timeMax`; `orderBy=startTime` only with `singleEvents=true`);
//!   `events.get` (a deleted event too: Google's `get` always answers it, with `status:
//!   cancelled`), `events.patch` (start and end checked), `privateExtendedProperty` filters
//!   on lists, `events.insert` with client-chosen ids (base32hex, 5–1024 characters; a taken id: 409
//!   "The requested identifier already exists", a deleted event's id included); `events.delete`
//!   (the event kept as `cancelled`, left out of lists unless `showDeleted=true`, and of busy
//!   times); every event has an `etag` that changes with each write, and `If-Match` on patch
//!   and delete is honoured (another etag: 412 `conditionNotMet`, nothing changed); the
//!   calendar's `timeZone` in every list; `freeBusy` (busy intervals, `notFound` for an unknown
//!   calendar).
//!
//! Nothing here panics on client input; the state lock is never held across an `.await`.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Form, Json, Router};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{DateTime, FixedOffset};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// The simulated client registration.
pub const CLIENT_ID: &str = "sim-client.apps.googleusercontent.com";
/// Its secret.
pub const CLIENT_SECRET: &str = "sim-client-secret";

/// One simulated Google deployment (OAuth endpoints and Calendar API) on 127.0.0.1.
#[derive(Debug, Clone)]
pub struct GoogleSim {
    addr: SocketAddr,
    state: Arc<Mutex<GState>>,
}

#[derive(Debug, Default)]
struct GState {
    /// Redirect URIs the client registered; empty: any.
    redirect_uris: Vec<String>,
    codes: HashMap<String, Grant>,
    access: HashMap<String, Instant>,
    refresh: HashMap<String, ()>,
    access_ttl: Duration,
    rotate_refresh: bool,
    refresh_delay: Duration,
    insert_delay: Duration,
    /// Calendar API requests still to be refused with (status, reason).
    failures: Vec<(u16, String)>,
    zones: BTreeMap<String, String>,
    /// The last `created` stamp given, so stamps strictly increase.
    last_created_ms: Option<i64>,
    calendars: BTreeMap<String, Vec<Value>>,
    token_requests: Vec<String>,
    inserts: usize,
    counter: u64,
    /// Every code and token ever issued, for leak checks.
    minted: Vec<String>,
    /// Edits someone else makes right after the next read of an event: (calendar, id, fields).
    edits_after_read: Vec<(String, String, Value)>,
}

#[derive(Debug, Clone)]
struct Grant {
    challenge: String,
    redirect_uri: String,
}

fn lock(state: &Mutex<GState>) -> MutexGuard<'_, GState> {
    state.lock().unwrap_or_else(|p| p.into_inner())
}

impl GState {
    /// A new etag (Google's are opaque quoted strings that change with every write).
    fn etag(&mut self) -> Value {
        self.counter += 1;
        json!(format!("\"{}\"", 3_000_000_000_000u64 + self.counter))
    }

    /// Applies `fields` to an event as an edit in Calendar's web app would: a new etag.
    fn edit(&mut self, calendar: &str, id: &str, fields: &Value) {
        let etag = self.etag();
        if let Some(Value::Object(m)) = self.calendars.get_mut(calendar).and_then(|events| {
            events
                .iter_mut()
                .find(|e| e.get("id").and_then(Value::as_str) == Some(id))
        }) {
            if let Value::Object(f) = fields {
                for (k, v) in f {
                    m.insert(k.clone(), v.clone());
                }
            }
            m.insert("etag".into(), etag);
        }
    }

    fn mint(&mut self, kind: &str) -> String {
        self.counter += 1;
        let noise: String = std::iter::repeat_with(fastrand::alphanumeric)
            .take(24)
            .collect();
        let t = format!("{kind}.{}.{noise}", self.counter);
        if self.minted.len() < 100_000 {
            self.minted.push(t.clone());
        }
        t
    }
}

fn google_error(status: StatusCode, reason: &str, message: &str) -> Response {
    let code = status.as_u16();
    (
        status,
        Json(json!({"error": {"code": code, "message": message,
            "errors": [{"domain": "global", "reason": reason, "message": message}]}})),
    )
        .into_response()
}

fn oauth_error(status: StatusCode, error: &str, description: &str) -> Response {
    (
        status,
        Json(json!({"error": error, "error_description": description})),
    )
        .into_response()
}

impl GoogleSim {
    /// Starts the simulator on `127.0.0.1:0`; `primary` is its one calendar, empty.
    pub async fn start() -> std::io::Result<GoogleSim> {
        let mut calendars = BTreeMap::new();
        calendars.insert("primary".to_owned(), Vec::new());
        let state = Arc::new(Mutex::new(GState {
            access_ttl: Duration::from_secs(3599),
            rotate_refresh: true,
            calendars,
            ..GState::default()
        }));
        let app = Router::new()
            .route("/o/oauth2/v2/auth", get(authorize))
            .route("/token", post(token))
            .route(
                "/calendar/v3/calendars/{calendar}/events",
                get(list_events).post(insert_event),
            )
            .route(
                "/calendar/v3/calendars/{calendar}/events/{event}",
                get(get_event).patch(patch_event).delete(delete_event),
            )
            .route("/calendar/v3/freeBusy", post(free_busy))
            .with_state(Arc::clone(&state));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        tokio::spawn(async move {
            let _ = axum::serve(listener, app.into_make_service()).await;
        });
        Ok(GoogleSim { addr, state })
    }

    /// `http://127.0.0.1:port`.
    pub fn base(&self) -> String {
        format!("http://{}", self.addr)
    }
    /// The authorization endpoint.
    pub fn auth_url(&self) -> String {
        format!("{}/o/oauth2/v2/auth", self.base())
    }
    /// The token endpoint.
    pub fn token_url(&self) -> String {
        format!("{}/token", self.base())
    }
    /// The Calendar API base (ends with `/`).
    pub fn api_base(&self) -> String {
        format!("{}/calendar/v3/", self.base())
    }

    /// Accepts only this redirect URI from now on (Google checks it against the registration).
    pub fn register_redirect_uri(&self, uri: &str) {
        lock(&self.state).redirect_uris.push(uri.to_owned());
    }
    /// How long new access tokens live.
    pub fn set_access_ttl(&self, ttl: Duration) {
        lock(&self.state).access_ttl = ttl;
    }
    /// Whether a refresh issues a new refresh token and retires the old one (default on).
    pub fn set_rotation(&self, on: bool) {
        lock(&self.state).rotate_refresh = on;
    }
    /// A delay before answering each refresh (to make concurrent refreshes overlap).
    pub fn set_refresh_delay(&self, d: Duration) {
        lock(&self.state).refresh_delay = d;
    }
    /// A delay before each insert is stored (to make concurrent bookings overlap).
    pub fn set_insert_delay(&self, d: Duration) {
        lock(&self.state).insert_delay = d;
    }
    /// Refuses the next `n` Calendar API requests with `status` and a Google error whose
    /// reason is `reason` (`rateLimitExceeded`, `forbidden`, `backendError`, …).
    pub fn fail_next(&self, n: usize, status: u16, reason: &str) {
        let mut s = lock(&self.state);
        for _ in 0..n {
            s.failures.push((status, reason.to_owned()));
        }
    }
    /// The calendar's time zone (IANA name; default `UTC`), sent with every events list.
    pub fn set_time_zone(&self, calendar: &str, zone: &str) {
        lock(&self.state)
            .zones
            .insert(calendar.to_owned(), zone.to_owned());
    }
    /// Expires every access token issued so far (API calls with them get 401).
    pub fn expire_access_tokens(&self) {
        let past = Instant::now().checked_sub(Duration::from_secs(1));
        let mut s = lock(&self.state);
        for exp in s.access.values_mut() {
            if let Some(p) = past {
                *exp = p;
            }
        }
    }
    /// Revokes every grant, as a user removing the app's access: refresh tokens get
    /// `invalid_grant`, access tokens 401.
    pub fn revoke_all(&self) {
        let mut s = lock(&self.state);
        s.refresh.clear();
        s.access.clear();
    }
    /// The `grant_type` of each token request, in order.
    pub fn token_requests(&self) -> Vec<String> {
        lock(&self.state).token_requests.clone()
    }
    /// Successful `events.insert`s.
    pub fn inserts(&self) -> usize {
        lock(&self.state).inserts
    }
    /// A calendar's events as stored (Google's event resources).
    pub fn events(&self, calendar: &str) -> Vec<Value> {
        lock(&self.state)
            .calendars
            .get(calendar)
            .cloned()
            .unwrap_or_default()
    }
    /// Adds a busy event someone else made.
    pub fn add_event(&self, calendar: &str, id: &str, summary: &str, start: &str, end: &str) {
        let mut s = lock(&self.state);
        let etag = s.etag();
        s.calendars
            .entry(calendar.to_owned())
            .or_default()
            .push(json!({"kind": "calendar#event", "id": id, "etag": etag, "status": "confirmed", "summary": summary,
                "start": {"dateTime": start}, "end": {"dateTime": end}}));
    }
    /// Edits an event as someone in Calendar's web app would (`fields` replace the event's,
    /// e.g. `{"status": "cancelled"}` or a new `start` and `end`); its etag changes.
    pub fn edit_event(&self, calendar: &str, id: &str, fields: Value) {
        lock(&self.state).edit(calendar, id, &fields);
    }
    /// Edits an event right after the next `events.get` of it has been answered: someone
    /// changing it between a client's read and its write.
    pub fn edit_after_next_read(&self, calendar: &str, id: &str, fields: Value) {
        lock(&self.state)
            .edits_after_read
            .push((calendar.to_owned(), id.to_owned(), fields));
    }
    /// Whether any code or token ever issued appears in `text` (for leak checks).
    pub fn leaks_into(&self, text: &str) -> Option<String> {
        lock(&self.state)
            .minted
            .iter()
            .find(|t| text.contains(t.as_str()))
            .cloned()
    }
    /// Every code and token ever issued.
    pub fn issued(&self) -> Vec<String> {
        lock(&self.state).minted.clone()
    }
}

type Shared = State<Arc<Mutex<GState>>>;

async fn authorize(State(state): Shared, Query(q): Query<HashMap<String, String>>) -> Response {
    let get = |k: &str| q.get(k).map(String::as_str).unwrap_or_default();
    if get("client_id") != CLIENT_ID {
        return (StatusCode::UNAUTHORIZED, "Error 401: invalid_client").into_response();
    }
    let redirect = get("redirect_uri");
    let mut s = lock(&state);
    if redirect.is_empty()
        || (!s.redirect_uris.is_empty() && !s.redirect_uris.iter().any(|r| r == redirect))
    {
        return (StatusCode::BAD_REQUEST, "Error 400: redirect_uri_mismatch").into_response();
    }
    if get("response_type") != "code"
        || get("code_challenge_method") != "S256"
        || get("code_challenge").len() < 43
        || get("scope").is_empty()
    {
        return (StatusCode::BAD_REQUEST, "Error 400: invalid_request").into_response();
    }
    let code = s.mint("4/code");
    s.codes.insert(
        code.clone(),
        Grant {
            challenge: get("code_challenge").to_owned(),
            redirect_uri: redirect.to_owned(),
        },
    );
    drop(s);
    let Ok(mut to) = reqwest::Url::parse(redirect) else {
        return (StatusCode::BAD_REQUEST, "Error 400: invalid_request").into_response();
    };
    to.query_pairs_mut()
        .append_pair("state", get("state"))
        .append_pair("code", &code)
        .append_pair("scope", get("scope"));
    (StatusCode::FOUND, [(header::LOCATION, to.to_string())]).into_response()
}

async fn token(State(state): Shared, Form(f): Form<HashMap<String, String>>) -> Response {
    let get = |k: &str| f.get(k).map(String::as_str).unwrap_or_default();
    let grant_type = get("grant_type").to_owned();
    let delay = {
        let mut s = lock(&state);
        s.token_requests.push(grant_type.clone());
        s.refresh_delay
    };
    if get("client_id") != CLIENT_ID || get("client_secret") != CLIENT_SECRET {
        return oauth_error(StatusCode::UNAUTHORIZED, "invalid_client", "Unauthorized");
    }
    match grant_type.as_str() {
        "authorization_code" => {
            let mut s = lock(&state);
            let Some(grant) = s.codes.remove(get("code")) else {
                return oauth_error(
                    StatusCode::BAD_REQUEST,
                    "invalid_grant",
                    "Malformed auth code.",
                );
            };
            if grant.redirect_uri != get("redirect_uri") {
                return oauth_error(
                    StatusCode::BAD_REQUEST,
                    "redirect_uri_mismatch",
                    "Bad Request",
                );
            }
            let challenge = URL_SAFE_NO_PAD.encode(Sha256::digest(get("code_verifier").as_bytes()));
            if challenge != grant.challenge {
                return oauth_error(
                    StatusCode::BAD_REQUEST,
                    "invalid_grant",
                    "code_verifier or verifier is not needed.",
                );
            }
            let access = s.mint("ya29.access");
            let refresh = s.mint("1//refresh");
            let ttl = s.access_ttl;
            s.access.insert(access.clone(), Instant::now() + ttl);
            s.refresh.insert(refresh.clone(), ());
            Json(json!({"access_token": access, "expires_in": ttl.as_secs(), "refresh_token": refresh,
                "scope": "https://www.googleapis.com/auth/calendar.events https://www.googleapis.com/auth/calendar.readonly",
                "token_type": "Bearer"}))
            .into_response()
        }
        "refresh_token" => {
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            let mut s = lock(&state);
            if s.refresh.remove(get("refresh_token")).is_none() {
                return oauth_error(
                    StatusCode::BAD_REQUEST,
                    "invalid_grant",
                    "Token has been expired or revoked.",
                );
            }
            let access = s.mint("ya29.access");
            let ttl = s.access_ttl;
            s.access.insert(access.clone(), Instant::now() + ttl);
            let mut answer = json!({"access_token": access, "expires_in": ttl.as_secs(),
                "scope": "https://www.googleapis.com/auth/calendar.events", "token_type": "Bearer"});
            if s.rotate_refresh {
                let refresh = s.mint("1//refresh");
                s.refresh.insert(refresh.clone(), ());
                if let Value::Object(m) = &mut answer {
                    m.insert("refresh_token".into(), json!(refresh));
                }
            } else {
                s.refresh.insert(get("refresh_token").to_owned(), ());
            }
            Json(answer).into_response()
        }
        _ => oauth_error(
            StatusCode::BAD_REQUEST,
            "unsupported_grant_type",
            "Invalid grant_type",
        ),
    }
}

/// A refusal queued by [`GoogleSim::fail_next`], if any.
fn queued_failure(state: &Mutex<GState>) -> Option<Response> {
    let mut s = lock(state);
    if s.failures.is_empty() {
        return None;
    }
    let (status, reason) = s.failures.remove(0);
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    Some(google_error(status, &reason, "Simulated refusal."))
}

/// Whether the bearer token is one issued and not expired.
fn authorized(state: &Mutex<GState>, headers: &HeaderMap) -> bool {
    let token = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or_default();
    matches!(lock(state).access.get(token), Some(exp) if *exp > Instant::now())
}

/// Google's answer to a missing, unknown or expired access token.
fn unauthenticated() -> Response {
    google_error(
        StatusCode::UNAUTHORIZED,
        "authError",
        "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential.",
    )
}

fn time(v: &Value, k: &str) -> Option<DateTime<FixedOffset>> {
    DateTime::parse_from_rfc3339(v.get(k)?.get("dateTime")?.as_str()?).ok()
}

async fn list_events(
    State(state): Shared,
    Path(calendar): Path<String>,
    headers: HeaderMap,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    if !authorized(&state, &headers) {
        return unauthenticated();
    }
    if let Some(refusal) = queued_failure(&state) {
        return refusal;
    }
    let bound = |k: &'static str| -> Result<Option<DateTime<FixedOffset>>, &'static str> {
        match q.get(k) {
            None => Ok(None),
            Some(t) => DateTime::parse_from_rfc3339(t).map(Some).map_err(|_| k),
        }
    };
    let (min, max) = match (bound("timeMin"), bound("timeMax")) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(k), _) | (_, Err(k)) => {
            return google_error(
                StatusCode::BAD_REQUEST,
                "badRequest",
                &format!("Bad Request: {k}"),
            );
        }
    };
    let single = q.get("singleEvents").map(String::as_str) == Some("true");
    if q.get("orderBy").map(String::as_str) == Some("startTime") && !single {
        return google_error(
            StatusCode::BAD_REQUEST,
            "invalid",
            "The requested ordering is not available for the particular query.",
        );
    }
    let limit = match q.get("maxResults").map(|m| m.parse::<usize>()) {
        None => 250,
        Some(Ok(n)) if (1..=2500).contains(&n) => n,
        Some(_) => {
            return google_error(
                StatusCode::BAD_REQUEST,
                "invalid",
                "Invalid value for: maxResults",
            );
        }
    };
    let show_deleted = q.get("showDeleted").map(String::as_str) == Some("true");
    let s = lock(&state);
    let Some(events) = s.calendars.get(&calendar) else {
        return google_error(StatusCode::NOT_FOUND, "notFound", "Not Found");
    };
    let mut items: Vec<&Value> = events
        .iter()
        .filter(|e| show_deleted || e.get("status").and_then(Value::as_str) != Some("cancelled"))
        .filter(|e| {
            let (Some(start), Some(end)) = (time(e, "start"), time(e, "end")) else {
                return false;
            };
            min.is_none_or(|m| end > m) && max.is_none_or(|m| start < m)
        })
        .collect();
    // `privateExtendedProperty=key=value`: only events whose private property matches.
    if let Some((k, v)) = q
        .get("privateExtendedProperty")
        .and_then(|p| p.split_once('='))
    {
        items.retain(|e| {
            e.pointer(&format!("/extendedProperties/private/{k}"))
                .and_then(Value::as_str)
                == Some(v)
        });
    }
    items.sort_by_key(|e| time(e, "start"));
    items.truncate(limit);
    let zone = s.zones.get(&calendar).map_or("UTC", String::as_str);
    Json(json!({"kind": "calendar#events", "summary": calendar, "timeZone": zone, "items": items}))
        .into_response()
}

fn valid_event_id(id: &str) -> bool {
    (5..=1024).contains(&id.len())
        && id
            .chars()
            .all(|c| c.is_ascii_digit() || ('a'..='v').contains(&c))
}

async fn insert_event(
    State(state): Shared,
    Path(calendar): Path<String>,
    headers: HeaderMap,
    Json(mut event): Json<Value>,
) -> Response {
    if !authorized(&state, &headers) {
        return unauthenticated();
    }
    if let Some(refusal) = queued_failure(&state) {
        return refusal;
    }
    let (Some(start), Some(end)) = (time(&event, "start"), time(&event, "end")) else {
        return google_error(StatusCode::BAD_REQUEST, "required", "Missing end time.");
    };
    if end <= start {
        return google_error(
            StatusCode::BAD_REQUEST,
            "timeRangeEmpty",
            "The specified time range is empty.",
        );
    }
    let delay = lock(&state).insert_delay;
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    let mut s = lock(&state);
    s.counter += 1;
    let generated = format!("gen{:08}", s.counter);
    let id = match event.get("id") {
        None => generated,
        Some(Value::String(id)) if valid_event_id(id) => id.clone(),
        Some(_) => {
            return google_error(
                StatusCode::BAD_REQUEST,
                "invalid",
                "Invalid resource id value.",
            );
        }
    };
    // Google stamps `created` when it stores the event (milliseconds, strictly increasing here).
    let now_ms = chrono::Utc::now().timestamp_millis();
    let ms = s
        .last_created_ms
        .map_or(now_ms, |last| now_ms.max(last + 1));
    s.last_created_ms = Some(ms);
    let stamp = DateTime::from_timestamp_millis(ms).unwrap_or_default();
    let created = stamp.to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let etag = s.etag();
    let Some(events) = s.calendars.get_mut(&calendar) else {
        return google_error(StatusCode::NOT_FOUND, "notFound", "Not Found");
    };
    if events
        .iter()
        .any(|e| e.get("id").and_then(Value::as_str) == Some(id.as_str()))
    {
        return google_error(
            StatusCode::CONFLICT,
            "duplicate",
            "The requested identifier already exists.",
        );
    }
    if let Value::Object(m) = &mut event {
        m.insert("id".into(), json!(id));
        m.insert("etag".into(), etag);
        m.insert("kind".into(), json!("calendar#event"));
        m.insert("status".into(), json!("confirmed"));
        m.insert("created".into(), json!(created));
        // Google answers each event with its page in Calendar's web app.
        m.insert(
            "htmlLink".into(),
            json!(format!("https://www.google.com/calendar/event?eid={id}")),
        );
    }
    events.push(event.clone());
    s.inserts += 1;
    Json(event).into_response()
}

/// `events.get`: the event as stored (a deleted one with `status: cancelled`).
async fn get_event(
    State(state): Shared,
    Path((calendar, id)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    if !authorized(&state, &headers) {
        return unauthenticated();
    }
    if let Some(refusal) = queued_failure(&state) {
        return refusal;
    }
    let mut s = lock(&state);
    let found = s
        .calendars
        .get(&calendar)
        .and_then(|events| {
            events
                .iter()
                .find(|e| e.get("id").and_then(Value::as_str) == Some(id.as_str()))
        })
        .cloned();
    let Some(event) = found else {
        return google_error(StatusCode::NOT_FOUND, "notFound", "Not Found");
    };
    // An edit waiting for this read happens once it has been answered.
    if let Some(i) = s
        .edits_after_read
        .iter()
        .position(|(c, e, _)| *c == calendar && *e == id)
    {
        let (c, e, fields) = s.edits_after_read.remove(i);
        s.edit(&c, &e, &fields);
    }
    Json(event).into_response()
}

/// Whether a request's `If-Match` (if any) names the event's current etag.
fn if_match_fails(headers: &HeaderMap, event: &Value) -> bool {
    let Some(wanted) = headers.get(header::IF_MATCH).and_then(|v| v.to_str().ok()) else {
        return false;
    };
    let current = event
        .get("etag")
        .and_then(Value::as_str)
        .unwrap_or_default();
    wanted.trim() != "*" && wanted.trim() != current
}

fn precondition_failed() -> Response {
    google_error(
        StatusCode::PRECONDITION_FAILED,
        "conditionNotMet",
        "Precondition Failed",
    )
}

/// `events.patch`: the fields given replace the event's (start and end checked as on insert).
async fn patch_event(
    State(state): Shared,
    Path((calendar, id)): Path<(String, String)>,
    headers: HeaderMap,
    Json(patch): Json<Value>,
) -> Response {
    if !authorized(&state, &headers) {
        return unauthenticated();
    }
    if let Some(refusal) = queued_failure(&state) {
        return refusal;
    }
    let mut s = lock(&state);
    let etag = s.etag();
    let Some(event) = s.calendars.get_mut(&calendar).and_then(|events| {
        events
            .iter_mut()
            .find(|e| e.get("id").and_then(Value::as_str) == Some(id.as_str()))
    }) else {
        return google_error(StatusCode::NOT_FOUND, "notFound", "Not Found");
    };
    if if_match_fails(&headers, event) {
        return precondition_failed();
    }
    if event.get("status").and_then(Value::as_str) == Some("cancelled") {
        return google_error(StatusCode::GONE, "deleted", "Resource has been deleted");
    }
    let mut next = event.clone();
    if let (Value::Object(m), Value::Object(p)) = (&mut next, &patch) {
        for (k, v) in p
            .iter()
            .filter(|(k, _)| !matches!(k.as_str(), "id" | "created" | "kind" | "etag"))
        {
            m.insert(k.clone(), v.clone());
        }
        m.insert("etag".into(), etag);
    }
    match (time(&next, "start"), time(&next, "end")) {
        (Some(a), Some(b)) if b > a => {}
        _ => {
            return google_error(
                StatusCode::BAD_REQUEST,
                "timeRangeEmpty",
                "The specified time range is empty.",
            );
        }
    }
    *event = next.clone();
    Json(next).into_response()
}

/// `events.delete`: the event becomes `cancelled` (Google keeps it, so its id stays taken).
async fn delete_event(
    State(state): Shared,
    Path((calendar, id)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    if !authorized(&state, &headers) {
        return unauthenticated();
    }
    if let Some(refusal) = queued_failure(&state) {
        return refusal;
    }
    let mut s = lock(&state);
    let etag = s.etag();
    let Some(event) = s.calendars.get_mut(&calendar).and_then(|events| {
        events
            .iter_mut()
            .find(|e| e.get("id").and_then(Value::as_str) == Some(id.as_str()))
    }) else {
        return google_error(StatusCode::NOT_FOUND, "notFound", "Not Found");
    };
    if if_match_fails(&headers, event) {
        return precondition_failed();
    }
    if event.get("status").and_then(Value::as_str) == Some("cancelled") {
        return google_error(StatusCode::GONE, "deleted", "Resource has been deleted");
    }
    event["status"] = json!("cancelled");
    event["etag"] = etag;
    StatusCode::NO_CONTENT.into_response()
}

async fn free_busy(State(state): Shared, headers: HeaderMap, Json(body): Json<Value>) -> Response {
    if !authorized(&state, &headers) {
        return unauthenticated();
    }
    if let Some(refusal) = queued_failure(&state) {
        return refusal;
    }
    let bound = |k: &str| {
        body.get(k)
            .and_then(Value::as_str)
            .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
    };
    let (Some(min), Some(max)) = (bound("timeMin"), bound("timeMax")) else {
        return google_error(
            StatusCode::BAD_REQUEST,
            "required",
            "Missing timeMin or timeMax.",
        );
    };
    let s = lock(&state);
    let mut calendars = serde_json::Map::new();
    for item in body
        .get("items")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .take(50)
    {
        let Some(id) = item.get("id").and_then(Value::as_str) else {
            continue;
        };
        let entry = match s.calendars.get(id) {
            None => json!({"errors": [{"domain": "global", "reason": "notFound"}], "busy": []}),
            Some(events) => {
                let mut busy: Vec<(DateTime<FixedOffset>, DateTime<FixedOffset>)> = events
                    .iter()
                    .filter(|e| {
                        e.get("transparency").and_then(Value::as_str) != Some("transparent")
                            && e.get("status").and_then(Value::as_str) != Some("cancelled")
                    })
                    .filter_map(|e| Some((time(e, "start")?, time(e, "end")?)))
                    .filter(|(a, b)| *b > min && *a < max)
                    .collect();
                busy.sort();
                let fmt = |t: DateTime<FixedOffset>| {
                    t.to_utc()
                        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
                };
                json!({"busy": busy.iter().map(|(a, b)| json!({"start": fmt(*a), "end": fmt(*b)})).collect::<Vec<_>>()})
            }
        };
        calendars.insert(id.to_owned(), entry);
    }
    Json(json!({"kind": "calendar#freeBusy", "timeMin": body.get("timeMin"), "timeMax": body.get("timeMax"), "calendars": calendars}))
        .into_response()
}
