//! Console sessions: the sealed cookie, the CSRF token derived from it, the same-origin check,
//! and the extractors that admit a tenant's session ([`Operator`]), the admin's
//! ([`ConsoleAdmin`]) or either ([`AnySession`]), sending each elsewhere as it must.

use std::time::{SystemTime, UNIX_EPOCH};

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Redirect, Response};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use switchboard_store::Principal;

use crate::state::AppState;

/// The session cookie's name.
pub const COOKIE: &str = "sb_console";
/// How long a session lasts.
const SESSION_SECS: u64 = 12 * 60 * 60;
/// What the cookie's sealed value is bound to.
const PURPOSE: &str = "console-session-v1";

/// What the session cookie holds (sealed).
#[derive(Debug, Serialize, Deserialize)]
struct SessionToken {
    key: String,
    exp: u64,
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The cookie value for a session of `key`.
pub(crate) fn session_cookie(state: &AppState, key: &str) -> Option<String> {
    let token = SessionToken {
        key: key.to_owned(),
        exp: now_secs() + SESSION_SECS,
    };
    let plain = serde_json::to_vec(&token).ok()?;
    let sealed = state.store.seal_token(PURPOSE, &plain).ok()?;
    let value = URL_SAFE_NO_PAD.encode(sealed);
    Some(format!(
        "{COOKIE}={value}; Path=/console; HttpOnly; SameSite=Strict; Max-Age={SESSION_SECS}"
    ))
}

/// The cookie that ends a session.
pub(crate) fn cleared_cookie() -> String {
    format!("{COOKIE}=; Path=/console; HttpOnly; SameSite=Strict; Max-Age=0")
}

fn cookie_value(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .map(|(_, value)| value.to_owned())
        .filter(|v| !v.is_empty())
}

/// The CSRF token of a session: derived from the (secret, HttpOnly) cookie, so a page of this
/// origin can know it and another site cannot.
fn csrf_of(cookie: &str) -> String {
    let digest = Sha256::digest(format!("csrf:{cookie}").as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// A signed-in tenant.
#[derive(Debug, Clone)]
pub struct Operator {
    pub tenant: String,
    /// The token every form and htmx request must carry.
    pub csrf: String,
}

/// Why a console request was refused.
#[derive(Debug)]
pub enum Refusal {
    /// No session, or an expired or revoked one: to the sign-in page.
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
        }
    }
}

impl FromRequestParts<AppState> for Operator {
    type Rejection = Refusal;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        let (principal, csrf) = session(parts, state)
            .await
            .map_err(|r| for_htmx(r, parts))?;
        match principal.tenant_id {
            Some(tenant) => Ok(Operator { tenant, csrf }),
            None => Err(for_htmx(Refusal::Admin, parts)),
        }
    }
}

/// Any signed-in session, a tenant's or the admin's (signing out needs only this).
#[derive(Debug)]
pub struct AnySession;

impl FromRequestParts<AppState> for AnySession {
    type Rejection = Refusal;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        session(parts, state)
            .await
            .map(|_| AnySession)
            .map_err(|r| for_htmx(r, parts))
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
        let (principal, csrf) = session(parts, state)
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

/// The signed-in key of a request and its CSRF token, checking the token when the request
/// changes state.
async fn session(parts: &Parts, state: &AppState) -> Result<(Principal, String), Refusal> {
    let cookie = cookie_value(&parts.headers).ok_or(Refusal::SignIn)?;
    let sealed = URL_SAFE_NO_PAD
        .decode(cookie.as_bytes())
        .map_err(|_| Refusal::SignIn)?;
    let plain = state
        .store
        .open_token(PURPOSE, &sealed)
        .map_err(|_| Refusal::SignIn)?;
    let token: SessionToken = serde_json::from_slice(&plain).map_err(|_| Refusal::SignIn)?;
    if token.exp <= now_secs() {
        return Err(Refusal::SignIn);
    }
    let principal = state
        .store
        .authenticate(&token.key)
        .await
        .ok()
        .flatten()
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
    Ok((principal, csrf))
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
