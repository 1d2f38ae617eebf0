//! The operators' console at `/console`: server-rendered pages (minijinja templates, htmx for
//! the parts that update in place), with every asset compiled into the binary.
//!
//! Sign-in takes a tenant key or the admin key; the session is a cookie (`HttpOnly`, `SameSite=Strict`, path
//! `/console`) holding the key sealed under the master key, so any node can read it and a
//! revoked key ends the session at its next request. Every state-changing request carries a
//! CSRF token derived from the cookie (a form field, or the `X-CSRF-Token` header htmx sends),
//! and must come from this origin. Every answer has a strict Content-Security-Policy: scripts,
//! styles and connections from this origin only, no inline script or style.
//!
//! Pages read through the same store queries as the API, scoped by the signed-in tenant: another
//! tenant's tool or call is "not found". Records shown are redacted as the API's call views are.
//! An admin session sees only the admin pages (`/console/admin/…`: the tenants), never a
//! tenant's pages; a tenant's session gets "not found" on the admin pages.

use std::sync::LazyLock;
use std::time::{SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::extract::{FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use minijinja::Environment;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use switchboard_store::Principal;

use crate::state::AppState;

mod admin;
mod health;
mod pages;
mod place;

/// The session cookie's name.
pub const COOKIE: &str = "sb_console";
/// How long a session lasts.
const SESSION_SECS: u64 = 12 * 60 * 60;
/// What the cookie's sealed value is bound to.
const PURPOSE: &str = "console-session-v1";

/// Every answer of the console carries this policy.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

static TEMPLATES: LazyLock<Environment<'static>> = LazyLock::new(|| {
    let mut env = Environment::new();
    env.set_undefined_behavior(minijinja::UndefinedBehavior::SemiStrict);
    for (name, text) in SOURCES {
        // The templates are part of the binary and checked by the tests: one that does not
        // compile shows as an error page, never a panic.
        if let Err(e) = env.add_template(name, text) {
            tracing::error!(name: "console_template_invalid", template = name, error = %e, "console_template_invalid");
        }
    }
    env
});

/// The templates, compiled into the binary.
const SOURCES: [(&str, &str); 21] = [
    ("layout.html", include_str!("templates/layout.html")),
    ("signin.html", include_str!("templates/signin.html")),
    ("tools.html", include_str!("templates/tools.html")),
    ("tool.html", include_str!("templates/tool.html")),
    (
        "diagnostics.html",
        include_str!("templates/diagnostics.html"),
    ),
    ("dryrun.html", include_str!("templates/dryrun.html")),
    ("replay.html", include_str!("templates/replay.html")),
    ("diff.html", include_str!("templates/diff.html")),
    ("published.html", include_str!("templates/published.html")),
    ("agents.html", include_str!("templates/agents.html")),
    ("agent.html", include_str!("templates/agent.html")),
    ("calls.html", include_str!("templates/calls.html")),
    ("call.html", include_str!("templates/call.html")),
    ("row.html", include_str!("templates/row.html")),
    ("health.html", include_str!("templates/health.html")),
    ("error.html", include_str!("templates/error.html")),
    ("tenants.html", include_str!("templates/tenants.html")),
    (
        "tenants_panel.html",
        include_str!("templates/tenants_panel.html"),
    ),
    (
        "tenant_delete.html",
        include_str!("templates/tenant_delete.html"),
    ),
    (
        "tenant_deleted.html",
        include_str!("templates/tenant_deleted.html"),
    ),
    (
        "error_fragment.html",
        include_str!("templates/error_fragment.html"),
    ),
];

/// Renders a template; a rendering error becomes a 500 page naming the template.
pub(crate) fn render(name: &str, ctx: impl Serialize) -> Response {
    let result = TEMPLATES
        .get_template(name)
        .and_then(|t| t.render(minijinja::value::Serde(&ctx)));
    match result {
        Ok(html) => Html(html).into_response(),
        Err(e) => {
            tracing::error!(name: "console_render_failed", template = name, error = %e, "console_render_failed");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                Html(format!(
                    "<p>The console could not show this page (template {name}). The server's log has the details.</p>"
                )),
            )
                .into_response()
        }
    }
}

/// The console's routes, with their security headers.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/console", get(|| async { Redirect::to("/console/tools") }))
        .route(
            "/console/",
            get(|| async { Redirect::to("/console/tools") }),
        )
        .route("/console/assets/{file}", get(asset))
        .route(
            "/console/signin",
            get(pages::signin_page).post(pages::signin),
        )
        .route("/console/signout", post(pages::signout))
        .route("/console/tools", get(pages::tools))
        .route("/console/tools/{name}", get(pages::tool))
        .route("/console/tools/{name}/validate", post(pages::validate))
        .route("/console/tools/{name}/dry-run", post(pages::dry_run))
        .route("/console/tools/{name}/replay", post(pages::replay))
        .route("/console/tools/{name}/publish", post(pages::publish))
        .route("/console/tools/{name}/diff", get(pages::diff))
        .route("/console/agents", get(pages::agents))
        .route("/console/agents/{name}", get(pages::agent))
        .route("/console/calls", get(pages::calls))
        .route("/console/calls/{id}", get(pages::call))
        .route("/console/calls/{id}/events", get(pages::call_events))
        .route("/console/health", get(health::health))
        .route(
            "/console/admin",
            get(|| async { Redirect::to("/console/admin/tenants") }),
        )
        .route(
            "/console/admin/tenants",
            get(admin::tenants).post(admin::create),
        )
        .route(
            "/console/admin/tenants/{id}/delete",
            get(admin::confirm_delete).post(admin::delete),
        )
        .layer(axum::middleware::from_fn(headers))
}

/// Security headers on every console answer.
async fn headers(req: Request, next: Next) -> Response {
    let mut resp = next.run(req).await;
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    // `same-origin`, not `no-referrer`: under `no-referrer` a browser sends `Origin: null` on
    // the console's own form posts and htmx requests, which the same-origin check must refuse.
    // Other sites still get no referrer.
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    if !h.contains_key(header::CACHE_CONTROL) {
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    resp
}

/// The embedded assets.
async fn asset(axum::extract::Path(file): axum::extract::Path<String>) -> Response {
    let (body, kind): (&'static [u8], &str) = match file.as_str() {
        "htmx.min.js" => (
            include_bytes!("assets/htmx.min.js"),
            "text/javascript; charset=utf-8",
        ),
        "console.js" => (
            include_bytes!("assets/console.js"),
            "text/javascript; charset=utf-8",
        ),
        "console.css" => (
            include_bytes!("assets/console.css"),
            "text/css; charset=utf-8",
        ),
        _ => return (StatusCode::NOT_FOUND, "no such asset").into_response(),
    };
    (
        [
            (header::CONTENT_TYPE, kind),
            (header::CACHE_CONTROL, "public, max-age=3600"),
        ],
        body,
    )
        .into_response()
}

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

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::panic)]
mod tests {
    use super::TEMPLATES;

    #[test]
    fn every_template_compiles_and_the_list_renders() {
        for (name, text) in super::SOURCES {
            let mut env = minijinja::Environment::new();
            if let Err(e) = env.add_template(name, text) {
                panic!("{name}: {e:#}");
            }
        }
        let nav = serde_json::json!({"tenant": "t", "csrf": "c", "active": "tools"});
        let ctx = serde_json::json!({"nav": nav, "tools": [{"name": "a", "version": 1, "created_at": "x", "description": "d"}], "more": false});
        if let Err(e) = TEMPLATES
            .get_template("tools.html")
            .and_then(|t| t.render(minijinja::value::Serde(&ctx)))
        {
            panic!("{e:#}");
        }
    }
}
