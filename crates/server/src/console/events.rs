//! A call's live timeline: a server-sent event stream that polls the database (which every
//! node commits to) and sends each new record as a rendered row.
//!
//! Each poll checks the session again (a sign-out, a revoked key or a deleted tenant ends the
//! stream with `signedout`) and then only the call's cursor — its status, its record count
//! and its context's version, no record and no context — so an idle stream costs one small
//! query or two; records are read only when the count moved, and the context (sent whole,
//! redacted, as a `context` event) only when its version did. Streams are bounded per session and per tenant on each
//! node ([`ConsoleLimits`]); one past a bound is answered with a `refused` event saying which.
//!
//! The calls list follows the tenant's calls the same way, in the same slots (a list stream
//! counts as one of the session's and the tenant's streams): each poll checks the session, then
//! the list's cursor (`Store::calls_cursor`: the newest call and the live count, two small
//! reads); the page is read again only when that moved, or every [`LIST_REFRESH`] (a failure
//! or a handoff in a live call moves neither), and sent as rendered rows only when they changed.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;
use switchboard_store::CallStatus;

use super::Operator;
use super::pages::{TIMELINE_RECORDS, context_text, error_page, list_rows, row};
use super::session::SessionToken;
use crate::error::ApiError;
use crate::routes::calls::{CallQuery, CallsWanted, call_list};
use crate::state::AppState;

/// How long a call's live timeline stream stays open.
const STREAM_FOR: Duration = Duration::from_secs(30 * 60);
/// How often a stream looks at the call's cursor.
const POLL: Duration = Duration::from_millis(500);
/// How often a calls list looks at the list's cursor.
const LIST_POLL: Duration = Duration::from_secs(1);
/// How often a calls list reads its page again although the cursor did not move.
const LIST_REFRESH: Duration = Duration::from_secs(15);
/// How long a browser waits before reconnecting a stream that ended without being told why.
const RECONNECT_AFTER: Duration = Duration::from_secs(60);

/// Bounds on the console's live timelines, on each node.
#[derive(Debug, Clone, Copy)]
pub struct ConsoleLimits {
    /// Timelines one session may follow at once.
    pub streams_per_session: usize,
    /// Timelines one tenant's sessions may follow at once on a node.
    pub streams_per_tenant: usize,
}

impl Default for ConsoleLimits {
    fn default() -> Self {
        ConsoleLimits {
            streams_per_session: 8,
            streams_per_tenant: 100,
        }
    }
}

/// The open timeline streams of this node, counted per session and per tenant.
#[derive(Debug, Clone)]
pub struct StreamSlots {
    limits: ConsoleLimits,
    open: Arc<Mutex<Open>>,
}

#[derive(Debug, Default)]
struct Open {
    by_session: HashMap<String, usize>,
    by_tenant: HashMap<String, usize>,
}

/// One open stream's place; dropping it (the stream ends or its client leaves) frees it.
#[derive(Debug)]
pub(crate) struct StreamSlot {
    open: Arc<Mutex<Open>>,
    session: String,
    tenant: String,
}

/// Why a stream was not opened: the bound it met.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StreamRefusal {
    Session(usize),
    Tenant(usize),
}

impl StreamRefusal {
    fn list_message(self) -> String {
        match self {
            StreamRefusal::Session(n) => format!(
                "This list does not update itself: your session already follows {n} pages live, the most one session may. Close another calls or call page, then reload this one."
            ),
            StreamRefusal::Tenant(n) => format!(
                "This list does not update itself: this tenant's sessions already follow {n} pages live on this server, the most a tenant may. Close pages you are not watching, then reload this one."
            ),
        }
    }

    fn message(self) -> String {
        match self {
            StreamRefusal::Session(n) => format!(
                "This page is not following the call live: your session already follows {n} calls live, the most one session may. Close another call's page, then reload this one."
            ),
            StreamRefusal::Tenant(n) => format!(
                "This page is not following the call live: this tenant's sessions already follow {n} calls live on this server, the most a tenant may. Close call pages you are not watching, then reload this one."
            ),
        }
    }
}

fn lock(open: &Mutex<Open>) -> MutexGuard<'_, Open> {
    // The counts stay consistent under a panic elsewhere: every change is one statement.
    open.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl StreamSlots {
    /// No stream open yet, under `limits`.
    pub fn new(limits: ConsoleLimits) -> Self {
        StreamSlots {
            limits,
            open: Arc::default(),
        }
    }

    /// A place for one more stream of `session` (of `tenant`), if both bounds allow it.
    pub(crate) fn take(&self, tenant: &str, session: &str) -> Result<StreamSlot, StreamRefusal> {
        let mut open = lock(&self.open);
        let of_session = open.by_session.get(session).copied().unwrap_or(0);
        if of_session >= self.limits.streams_per_session {
            return Err(StreamRefusal::Session(self.limits.streams_per_session));
        }
        let of_tenant = open.by_tenant.get(tenant).copied().unwrap_or(0);
        if of_tenant >= self.limits.streams_per_tenant {
            return Err(StreamRefusal::Tenant(self.limits.streams_per_tenant));
        }
        open.by_session.insert(session.to_owned(), of_session + 1);
        open.by_tenant.insert(tenant.to_owned(), of_tenant + 1);
        Ok(StreamSlot {
            open: Arc::clone(&self.open),
            session: session.to_owned(),
            tenant: tenant.to_owned(),
        })
    }
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        let mut open = lock(&self.open);
        let open = &mut *open;
        release(&mut open.by_session, &self.session);
        release(&mut open.by_tenant, &self.tenant);
    }
}

/// One place fewer under `key`; a key with none left is forgotten, so the maps hold only
/// sessions and tenants with open streams.
fn release(map: &mut HashMap<String, usize>, key: &str) {
    match map.get_mut(key) {
        Some(n) if *n > 1 => *n -= 1,
        _ => {
            map.remove(key);
        }
    }
}

#[derive(Debug, Deserialize)]
pub struct After {
    /// How many of the call's records the page has.
    #[serde(default)]
    after: u64,
    /// The version of the context the page shows; without it the stream sends the context
    /// at once.
    context: Option<i64>,
}

/// Server-sent events: each new record of the call as a rendered timeline row (`record`, its id
/// the record's ordinal in the call), the call's context (`context`, redacted) whenever it
/// changes, then `ended` when the call ends. A browser that
/// reconnects sends the last id it saw (`Last-Event-ID`) and gets only the records after it.
/// `signedout` ends a stream whose session ended; `refused` answers one past a bound.
pub async fn call_events(
    State(state): State<AppState>,
    op: Operator,
    Path(id): Path<String>,
    Query(a): Query<After>,
    headers: HeaderMap,
) -> Response {
    match state.store.get_call(&op.tenant, &id).await {
        Ok(Some(_)) => {}
        Ok(None) => return error_page(&ApiError::not_found(format!("call `{id}`"))),
        Err(e) => return error_page(&e.into()),
    }
    let slot = match state.console_streams.take(&op.tenant, &op.session.id()) {
        Ok(slot) => slot,
        Err(refusal) => {
            tracing::info!(name: "console_stream_refused", tenant_id = %op.tenant, bound = ?refusal, "console_stream_refused");
            return notice("refused", refusal.message());
        }
    };
    let resumed = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    let follow = Follow {
        state,
        tenant: op.tenant,
        id,
        session: op.session,
        _slot: slot,
    };
    Sse::new(stream(follow, resumed.unwrap_or(0).max(a.after), a.context))
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response()
}

/// A stream of one event, after which the browser is told not to come back soon.
fn notice(event: &'static str, message: String) -> Response {
    let once = futures_util::stream::once(async move {
        Ok::<_, Infallible>(
            Event::default()
                .event(event)
                .retry(RECONNECT_AFTER)
                .data(message),
        )
    });
    Sse::new(once).into_response()
}

/// What a stream follows, and the place it holds while it lives.
struct Follow {
    state: AppState,
    tenant: String,
    id: String,
    session: SessionToken,
    _slot: StreamSlot,
}

/// What one poll found.
enum Poll {
    /// Events to send (possibly none), and whether the stream ends after them.
    Events(Vec<Event>, bool),
    /// The stream ends now (the call is gone, or the database failed: the browser reconnects,
    /// and its new request is checked like any other).
    Stop,
}

/// Where a timeline stream stands: how many of the call's records it sent, and the version of
/// the context it last sent (or the page showed).
#[derive(Debug, Clone, Copy)]
struct Sent {
    records: u64,
    context: Option<i64>,
}

fn stream(
    follow: Follow,
    seen: u64,
    context: Option<i64>,
) -> impl futures_util::Stream<Item = Result<Event, Infallible>> {
    let deadline = tokio::time::Instant::now() + STREAM_FOR;
    // What was sent lives in the stream's state, so each record (and each context) is sent
    // once however many events one poll yields. The queue pops from its end.
    let seen = Sent {
        records: seen,
        context,
    };
    futures_util::stream::unfold(
        (follow, Vec::<Event>::new(), false, seen),
        move |(follow, mut queue, mut done, mut seen)| async move {
            loop {
                if let Some(e) = queue.pop() {
                    return Some((Ok(e), (follow, queue, done, seen)));
                }
                // The server's shutdown ends the stream too (it would hold the shutdown up).
                let shutdown = &follow.state.mcp.shutdown;
                if done || tokio::time::Instant::now() >= deadline || shutdown.is_cancelled() {
                    return None;
                }
                match poll(&follow, &mut seen).await {
                    Poll::Stop => return None,
                    Poll::Events(events, ends) => {
                        done = ends;
                        if events.is_empty() && !ends {
                            tokio::select! {
                                () = tokio::time::sleep(POLL) => {}
                                () = shutdown.cancelled() => return None,
                            }
                        }
                        queue = events;
                        queue.reverse();
                    }
                }
            }
        },
    )
}

/// One look at the session and the call: the events it makes, oldest first.
async fn poll(f: &Follow, seen: &mut Sent) -> Poll {
    match f.session.still_open(&f.state, &f.tenant).await {
        Ok(true) => {}
        Ok(false) => {
            tracing::info!(name: "console_stream_signed_out", tenant_id = %f.tenant, "console_stream_signed_out");
            let event = Event::default()
                .event("signedout")
                .retry(RECONNECT_AFTER)
                .data("Your console session ended (signed out, expired, or its key was revoked): this page no longer follows the call. Sign in again to see it.");
            return Poll::Events(vec![event], true);
        }
        Err(_) => return Poll::Stop,
    }
    let Ok(Some(cursor)) = f.state.store.call_cursor(&f.tenant, &f.id).await else {
        return Poll::Stop;
    };
    let mut events = Vec::new();
    if cursor.records > seen.records {
        match records_after(f, seen.records, cursor.records).await {
            Some((rows, now_total)) => {
                events = rows;
                seen.records = now_total;
            }
            None => return Poll::Stop,
        }
    }
    if seen.context != Some(cursor.context_version) {
        let Some(event) = context_event(f).await else {
            return Poll::Stop;
        };
        events.push(event);
        seen.context = Some(cursor.context_version);
    }
    let ended = cursor.status == CallStatus::Ended;
    if ended {
        events.push(Event::default().event("ended").data("ended"));
    }
    Poll::Events(events, ended)
}

/// The records after the first `seen` (at most the newest [`TIMELINE_RECORDS`]) as events,
/// and the count they bring the stream to.
async fn records_after(f: &Follow, seen: u64, total: u64) -> Option<(Vec<Event>, u64)> {
    let (state, tenant, id) = (&f.state, f.tenant.as_str(), f.id.as_str());
    let wanted = usize::try_from(total - seen)
        .unwrap_or(usize::MAX)
        .min(TIMELINE_RECORDS);
    let (records, now_total) = state
        .store
        .recent_invocations(tenant, id, wanted)
        .await
        .ok()?;
    let call = state.store.get_call(tenant, id).await.ok()??;
    let live = state.calls.get(tenant, id);
    // No redactor, no rows: a record is never shown unredacted.
    let redactor = crate::calls::view_redactor(state, tenant, live.as_deref(), &call.context)
        .await
        .ok()?;
    // `records` is oldest first and ends with the call's newest, whose ordinal is `now_total`.
    let newest = u64::try_from(records.len()).unwrap_or(u64::MAX);
    let events = records
        .into_iter()
        .enumerate()
        .filter_map(|(i, r)| {
            let ordinal = now_total.saturating_sub(newest - 1 - u64::try_from(i).ok()?);
            (ordinal > seen).then(|| {
                Event::default()
                    .event("record")
                    .id(ordinal.to_string())
                    .data(render_row(&row(&redactor, r)))
            })
        })
        .collect();
    Some((events, now_total.max(seen)))
}

/// The call's context as the page's Context box shows it (redacted), as a `context` event.
async fn context_event(f: &Follow) -> Option<Event> {
    let (state, tenant, id) = (&f.state, f.tenant.as_str(), f.id.as_str());
    let call = state.store.get_call(tenant, id).await.ok()??;
    let live = state.calls.get(tenant, id);
    // No redactor, no context: it is never shown unredacted.
    let redactor = crate::calls::view_redactor(state, tenant, live.as_deref(), &call.context)
        .await
        .ok()?;
    // An event's data cannot carry a carriage return; the JSON text escapes those in strings.
    let text = context_text(&redactor, &call.context).replace('\r', "");
    Some(Event::default().event("context").data(text))
}

fn render_row(row: &serde_json::Value) -> String {
    super::TEMPLATES
        .get_template("row.html")
        .and_then(|t| t.render(minijinja::value::Serde(json!({"r": row}))))
        .unwrap_or_default()
        .replace(['\n', '\r'], " ")
}

/// Server-sent events: the calls list's rows (`rows`, the rendered rows of the page the query
/// names) whenever they change. `signedout` ends a stream whose session ended; `refused`
/// answers one past a bound. A query the page would refuse is refused here too (400).
pub async fn calls_events(
    State(state): State<AppState>,
    op: Operator,
    q: Result<Query<CallQuery>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let wanted = match q.map_err(ApiError::from).and_then(|Query(q)| q.wanted()) {
        Ok(w) => w,
        Err(e) => return error_page(&e),
    };
    let slot = match state.console_streams.take(&op.tenant, &op.session.id()) {
        Ok(slot) => slot,
        Err(refusal) => {
            tracing::info!(name: "console_stream_refused", tenant_id = %op.tenant, bound = ?refusal, "console_stream_refused");
            return notice("refused", refusal.list_message());
        }
    };
    let watch = Watch {
        state,
        tenant: op.tenant,
        session: op.session,
        wanted,
        _slot: slot,
    };
    Sse::new(list_stream(watch))
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response()
}

/// What a list stream follows, and the place it holds while it lives.
struct Watch {
    state: AppState,
    tenant: String,
    session: SessionToken,
    wanted: CallsWanted,
    _slot: StreamSlot,
}

/// Where a list stream stands: the cursor it last read the page at, when, and what it sent.
#[derive(Default)]
struct Seen {
    cursor: Option<(Option<(String, String)>, i64)>,
    read_at: Option<tokio::time::Instant>,
    rows: String,
}

fn list_stream(watch: Watch) -> impl futures_util::Stream<Item = Result<Event, Infallible>> {
    let deadline = tokio::time::Instant::now() + STREAM_FOR;
    futures_util::stream::unfold(
        (watch, Seen::default(), false),
        move |(watch, mut seen, done)| async move {
            let shutdown = watch.state.mcp.shutdown.clone();
            let mut first = true;
            loop {
                if done || tokio::time::Instant::now() >= deadline || shutdown.is_cancelled() {
                    return None;
                }
                if !first {
                    tokio::select! {
                        () = tokio::time::sleep(LIST_POLL) => {}
                        () = shutdown.cancelled() => return None,
                    }
                }
                first = false;
                match poll_list(&watch, &mut seen).await {
                    ListPoll::Quiet => {}
                    ListPoll::Stop => return None,
                    ListPoll::Send(event, ends) => return Some((Ok(event), (watch, seen, ends))),
                }
            }
        },
    )
}

/// What one look at the session and the list found.
enum ListPoll {
    /// Nothing to send.
    Quiet,
    /// An event, and whether the stream ends after it.
    Send(Event, bool),
    /// The stream ends now (the browser reconnects, and its new request is checked).
    Stop,
}

async fn poll_list(w: &Watch, seen: &mut Seen) -> ListPoll {
    match w.session.still_open(&w.state, &w.tenant).await {
        Ok(true) => {}
        Ok(false) => {
            tracing::info!(name: "console_stream_signed_out", tenant_id = %w.tenant, "console_stream_signed_out");
            let event = Event::default()
                .event("signedout")
                .retry(RECONNECT_AFTER)
                .data("Your console session ended (signed out, expired, or its key was revoked): this list no longer updates itself. Sign in again to see it.");
            return ListPoll::Send(event, true);
        }
        Err(_) => return ListPoll::Stop,
    }
    let Ok(cursor) = w.state.store.calls_cursor(&w.tenant).await else {
        return ListPoll::Stop;
    };
    let due = seen.read_at.is_none_or(|at| at.elapsed() >= LIST_REFRESH);
    if seen.cursor.as_ref() == Some(&cursor) && !due {
        return ListPoll::Quiet;
    }
    let Ok(list) = call_list(&w.state, &w.tenant, &w.wanted).await else {
        return ListPoll::Stop;
    };
    seen.cursor = Some(cursor);
    seen.read_at = Some(tokio::time::Instant::now());
    let rows = super::TEMPLATES
        .get_template("calls_rows.html")
        .and_then(|t| {
            t.render(minijinja::value::Serde(
                json!({"calls": list_rows(&w.state, &w.tenant, &list)}),
            ))
        })
        .unwrap_or_default()
        .replace(['\n', '\r'], " ");
    if rows.is_empty() || rows == seen.rows {
        return ListPoll::Quiet;
    }
    seen.rows = rows.clone();
    ListPoll::Send(Event::default().event("rows").data(rows), false)
}
