//! Console sessions: the session cookie (a random token; the database keeps its hash and the
//! key that signed in), the CSRF token derived from it, the same-origin check, the per-tenant
//! request rate, and the extractors that admit a tenant's session ([`Operator`]), the admin's
//! ([`ConsoleAdmin`]) or either ([`AnySession`]), sending each elsewhere as it must.

use std::time::{SystemTime, UNIX_EPOCH};

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Redirect, Response};
use sha2::{Digest, Sha256};
use switchboard_store::{Principal, StoreError};

use crate::state::AppState;

/// The session cookie's name.
pub const COOKIE: &str = "sb_console";
/// How long a session lasts.
const SESSION_SECS: u64 = 12 * 60 * 60;

/// Now, in epoch milliseconds.
pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Opens a session for the key that just signed in; the answer is the `Set-Cookie` value.
pub(crate) async fn open_session(
    state: &AppState,
    principal: &Principal,
) -> Result<String, StoreError> {
    let now = now_ms();
    let until = now + i64::try_from(SESSION_SECS * 1000).unwrap_or(i64::MAX);
    let token = state
        .store
        .open_console_session(&principal.key_id, now, until)
        .await?;
    Ok(format!(
        "{COOKIE}={token}; Path=/console; HttpOnly; SameSite=Strict; Max-Age={SESSION_SECS}"
    ))
}

/// The cookie that ends a session.
pub(crate) fn cleared_cookie() -> String {
    format!("{COOKIE}=; Path=/console; HttpOnly; SameSite=Strict; Max-Age=0")
}

/// The value of the cookie `name` in a request, if it has one that is not empty.
pub(crate) fn cookie_named(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(n, _)| *n == name)
        .map(|(_, value)| value.to_owned())
        .filter(|v| !v.is_empty())
}

/// The CSRF token of a session: derived from the (secret, HttpOnly) cookie, so a page of this
/// origin can know it and another site cannot.
fn csrf_of(cookie: &str) -> String {
    let digest = Sha256::digest(format!("csrf:{cookie}").as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// A session's token, as the cookie carries it: what a sign-out ends and what a stream looks
/// up again at each poll. Never shown.
#[derive(Clone)]
pub struct SessionToken(String);

impl std::fmt::Debug for SessionToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SessionToken(…)")
    }
}

impl SessionToken {
    /// Whether the session is still open and still the tenant's (not signed out, not expired,
    /// its key not revoked); `Err` when the database could not say.
    pub(crate) async fn still_open(
        &self,
        state: &AppState,
        tenant: &str,
    ) -> Result<bool, StoreError> {
        let principal = state.store.console_session(&self.0, now_ms()).await?;
        Ok(principal.is_some_and(|p| p.tenant_id.as_deref() == Some(tenant)))
    }

    /// A short name for the session in per-session bounds (a hash of the token, never the
    /// token itself).
    pub(crate) fn id(&self) -> String {
        let digest = Sha256::digest(format!("id:{}", self.0).as_bytes());
        digest.iter().take(12).map(|b| format!("{b:02x}")).collect()
    }
}

/// A signed-in tenant, admitted by the tenant's request rate like a REST request.
#[derive(Debug, Clone)]
pub struct Operator {
    pub tenant: String,
    /// The token every form and htmx request must carry.
    pub csrf: String,
    /// The session, for what checks it again later (a timeline's stream, at each poll).
    pub session: SessionToken,
    /// The id of the API key the session was opened with (never the key): who publishes.
    pub key_id: String,
}

/// Why a console request was refused.
#[derive(Debug)]
pub enum Refusal {
    /// No session, or an ended, expired or revoked one: to the sign-in page.
    SignIn,
    /// The same, to an htmx request: `HX-Redirect` on a 200, since the browser would follow a
    /// 303 itself and htmx would swap the sign-in page into the panel.
    SignInHtmx,
    /// A state-changing request without the session's CSRF token, or from another origin.
    Forgery,
    /// An admin session on a tenant's page: to the admin pages.
    Admin,
    /// The same, to an htmx request.
    AdminHtmx,
    /// A tenant's session on an admin page.
    NotFound,
    /// The tenant is over its request rate (the REST API's, shared with it): retry after
    /// this many seconds.
    RateLimited(u64),
    /// The database could not say whether the session is open.
    Unavailable,
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        match self {
            Refusal::SignIn => Redirect::to("/console/signin").into_response(),
            Refusal::SignInHtmx => to_signin_htmx(),
            Refusal::Admin => Redirect::to(ADMIN_HOME).into_response(),
            Refusal::AdminHtmx => (
                [("HX-Redirect", HeaderValue::from_static(ADMIN_HOME))],
                StatusCode::OK,
            )
                .into_response(),
            Refusal::NotFound => (
                StatusCode::NOT_FOUND,
                Html("<p class=\"error\">No such console page.</p>"),
            )
                .into_response(),
            Refusal::Forgery => (
                StatusCode::FORBIDDEN,
                Html("<p class=\"error\">This request did not come from a console page of this server (missing or wrong CSRF token). Reload the page and try again.</p>"),
            )
                .into_response(),
            Refusal::RateLimited(retry_after) => (
                StatusCode::TOO_MANY_REQUESTS,
                [(header::RETRY_AFTER, retry_after.to_string())],
                Html(format!(
                    "<p class=\"error\" id=\"rate-limited\">Too many requests for this tenant (the console and the API share the tenant's request rate); retry in {retry_after} s.</p>"
                )),
            )
                .into_response(),
            Refusal::Unavailable => (
                StatusCode::SERVICE_UNAVAILABLE,
                [(header::RETRY_AFTER, "1".to_owned())],
                Html("<p class=\"error\">The console cannot check your session: the database did not answer. Try again in a moment.</p>".to_owned()),
            )
                .into_response(),
        }
    }
}

impl FromRequestParts<AppState> for Operator {
    type Rejection = Refusal;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        let (principal, csrf, session) = session(parts, state)
            .await
            .map_err(|r| for_htmx(r, parts))?;
        let Some(tenant) = principal.tenant_id else {
            return Err(for_htmx(Refusal::Admin, parts));
        };
        state
            .limits
            .check_rate(&tenant)
            .map_err(Refusal::RateLimited)?;
        Ok(Operator {
            tenant,
            csrf,
            session,
            key_id: principal.key_id,
        })
    }
}

/// Any signed-in session, a tenant's or the admin's (signing out needs only this).
#[derive(Debug)]
pub struct AnySession {
    /// The session, which a sign-out ends.
    pub session: SessionToken,
}

impl FromRequestParts<AppState> for AnySession {
    type Rejection = Refusal;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        session(parts, state)
            .await
            .map(|(_, _, session)| AnySession { session })
            .map_err(|r| for_htmx(r, parts))
    }
}

impl AnySession {
    /// Ends the session in the database: its cookie opens nothing any more, on any node.
    pub(crate) async fn end(&self, state: &AppState) -> Result<bool, StoreError> {
        state.store.end_console_session(&self.session.0).await
    }
}

/// A signed-in admin: the admin pages' extractor. A tenant's session is refused as "not found",
/// so the admin pages' existence tells a tenant nothing.
#[derive(Debug, Clone)]
pub struct ConsoleAdmin {
    /// The token every form and htmx request must carry.
    pub csrf: String,
}

impl FromRequestParts<AppState> for ConsoleAdmin {
    type Rejection = Refusal;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        let (principal, csrf, _) = session(parts, state)
            .await
            .map_err(|r| for_htmx(r, parts))?;
        match principal.tenant_id {
            None => Ok(ConsoleAdmin { csrf }),
            Some(_) => Err(Refusal::NotFound),
        }
    }
}

/// Whether a request comes from htmx (it sends `HX-Request: true`).
pub(crate) fn is_htmx(headers: &HeaderMap) -> bool {
    headers.get("hx-request").is_some_and(|v| v == "true")
}

/// An htmx request sent to the sign-in page: the whole page goes there.
pub(crate) fn to_signin_htmx() -> Response {
    (
        [("HX-Redirect", HeaderValue::from_static("/console/signin"))],
        StatusCode::OK,
    )
        .into_response()
}

/// The admin pages' home.
const ADMIN_HOME: &str = "/console/admin/tenants";

/// A refusal that sends the browser elsewhere, in the form an htmx request needs.
fn for_htmx(refusal: Refusal, parts: &Parts) -> Refusal {
    match refusal {
        Refusal::SignIn if is_htmx(&parts.headers) => Refusal::SignInHtmx,
        Refusal::Admin if is_htmx(&parts.headers) => Refusal::AdminHtmx,
        other => other,
    }
}

/// The signed-in key of a request, its CSRF token and its session, checking the token when
/// the request changes state. The session is looked up in the database on every request, so
/// one ended on any node (a sign-out, a revoked key, a deleted tenant) opens nothing here.
async fn session(
    parts: &Parts,
    state: &AppState,
) -> Result<(Principal, String, SessionToken), Refusal> {
    let cookie = cookie_named(&parts.headers, COOKIE).ok_or(Refusal::SignIn)?;
    let principal = state
        .store
        .console_session(&cookie, now_ms())
        .await
        .map_err(|e| {
            tracing::warn!(name: "console_session_unavailable", error = %e, "console_session_unavailable");
            Refusal::Unavailable
        })?
        .ok_or(Refusal::SignIn)?;
    let csrf = csrf_of(&cookie);
    if parts.method != axum::http::Method::GET && parts.method != axum::http::Method::HEAD {
        if !same_origin(&parts.headers) {
            return Err(Refusal::Forgery);
        }
        let given = parts
            .headers
            .get("x-csrf-token")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        if !constant_time_eq(given.as_bytes(), csrf.as_bytes()) {
            return Err(Refusal::Forgery);
        }
    }
    Ok((principal, csrf, SessionToken(cookie)))
}

/// Whether a state-changing request comes from this origin: `Sec-Fetch-Site` (browsers send
/// it) must be `same-origin` when present, and `Origin`, when present, must name this host.
pub(crate) fn same_origin(headers: &HeaderMap) -> bool {
    let site_ok = headers
        .get("sec-fetch-site")
        .and_then(|v| v.to_str().ok())
        .is_none_or(|s| s == "same-origin" || s == "none");
    let host = headers.get(header::HOST).and_then(|v| v.to_str().ok());
    let origin_ok = match headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()) {
        None => true,
        Some(origin) => host.is_some_and(|h| {
            origin
                .split_once("://")
                .is_some_and(|(_, authority)| authority == h)
        }),
    };
    site_ok && origin_ok
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
