//! The operators' console at `/console`: server-rendered pages (minijinja templates, htmx for
//! the parts that update in place), with every asset compiled into the binary.
//!
//! Sign-in takes a tenant key or the admin key; the session is a cookie (`HttpOnly`,
//! `SameSite=Strict`, path `/console`) holding a random token, which the database keeps (as its
//! hash) with the key that signed in. Every console request looks the session up, so a
//! sign-out, a revoked key or a deleted tenant ends it at its next request on any node, and a
//! tenant's pages and streams count against the tenant's request rate like the REST API.
//! Every state-changing request carries a CSRF token derived from the cookie (the
//! `X-CSRF-Token` header htmx sends), and must come from this origin. Every answer has a strict
//! Content-Security-Policy: scripts, styles and connections from this origin only, no inline
//! script or style.
//!
//! Pages read through the same store queries as the API, scoped by the signed-in tenant: another
//! tenant's tool or call is "not found". Records shown are redacted as the API's call views are.
//! An admin session sees only the admin pages (`/console/admin/…`: the tenants), never a
//! tenant's pages; a tenant's session gets "not found" on the admin pages.

use std::sync::LazyLock;

use axum::Router;
use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use minijinja::Environment;
use serde::Serialize;

use crate::state::AppState;

mod admin;
mod agent_edit;
mod alerts;
mod connect;
mod events;
mod health;
mod pages;
mod place;
mod publishing;
mod session;

pub use events::{ConsoleLimits, StreamSlots};
pub use session::{AnySession, COOKIE, ConsoleAdmin, Operator, Refusal, SessionToken};
pub(crate) use session::{
    cleared_cookie, cookie_named, is_htmx, open_session, same_origin, to_signin_htmx,
};

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
const SOURCES: [(&str, &str); 32] = [
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
    (
        "confirm_publish.html",
        include_str!("templates/confirm_publish.html"),
    ),
    ("agents.html", include_str!("templates/agents.html")),
    ("agent.html", include_str!("templates/agent.html")),
    ("connect.html", include_str!("templates/connect.html")),
    ("connection.html", include_str!("templates/connection.html")),
    ("calls.html", include_str!("templates/calls.html")),
    ("calls_rows.html", include_str!("templates/calls_rows.html")),
    ("rows.html", include_str!("templates/rows.html")),
    ("earlier.html", include_str!("templates/earlier.html")),
    ("call.html", include_str!("templates/call.html")),
    ("row.html", include_str!("templates/row.html")),
    ("health.html", include_str!("templates/health.html")),
    ("alerts.html", include_str!("templates/alerts.html")),
    ("alert.html", include_str!("templates/alert.html")),
    (
        "alert_history.html",
        include_str!("templates/alert_history.html"),
    ),
    (
        "alert_created.html",
        include_str!("templates/alert_created.html"),
    ),
    (
        "alert_deleted.html",
        include_str!("templates/alert_deleted.html"),
    ),
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
        .route("/favicon.ico", get(favicon))
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
        .route("/console/tools/{name}/publish", post(publishing::publish))
        .route("/console/tools/{name}/rollback", post(publishing::rollback))
        .route("/console/tools/{name}/diff", get(pages::diff))
        .route("/console/agents", get(pages::agents))
        .route("/console/agents/{name}", get(pages::agent))
        .route("/console/agents/{name}/save", post(agent_edit::save))
        .route("/console/calls", get(pages::calls))
        .route("/console/calls-live", get(events::calls_events))
        .route("/console/calls/{id}", get(pages::call))
        .route(
            "/console/agents/{name}/connections/{toolkit}",
            get(connect::connect_page).post(connect::connect_start),
        )
        .route("/console/calls/{id}/events", get(events::call_events))
        .route("/console/calls/{id}/rows", get(pages::call_rows))
        .route("/console/health", get(health::health))
        .route(
            "/console/alerts",
            get(alerts::alerts).post(alerts::create_rule),
        )
        .route("/console/alerts/{id}", get(alerts::alert))
        .route("/console/alerts/{id}/delete", post(alerts::delete_rule))
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
        "favicon.svg" => (include_bytes!("assets/favicon.svg"), "image/svg+xml"),
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

/// `/favicon.ico`, for browsers that ask for it whatever the page's `<link rel="icon">` says.
async fn favicon() -> Response {
    (
        [
            (header::CONTENT_TYPE, "image/x-icon"),
            (header::CACHE_CONTROL, "public, max-age=86400"),
        ],
        &include_bytes!("assets/favicon.ico")[..],
    )
        .into_response()
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

    #[test]
    fn a_diff_folds_unchanged_runs_away_from_its_changes() {
        let a: String = (1..=20).map(|i| format!("line {i}\n")).collect();
        let b = a.replace("line 10\n", "line ten\n");
        let runs = super::pages::diff_runs(super::pages::line_diff(&a, &b));
        let shape: Vec<(bool, usize)> = runs
            .iter()
            .map(|r| (r["hidden"] == true, r["lines"].as_array().unwrap().len()))
            .collect();
        // Lines 1-6 folded; 7-9, the change (two lines), 11-13 shown; 14-20 folded.
        assert_eq!(shape, [(true, 6), (false, 8), (true, 7)]);
        let shown = &runs[1]["lines"];
        assert_eq!(shown[0]["text"], "line 7");
        assert_eq!(shown[3]["tag"], "removed");
        assert_eq!(shown[4]["tag"], "added");
        // A short run between two changes stays whole.
        let c = b.replace("line 14\n", "line fourteen\n");
        let runs = super::pages::diff_runs(super::pages::line_diff(&a, &c));
        assert_eq!(runs.iter().filter(|r| r["hidden"] == true).count(), 2);
        // Nothing changed: one folded run.
        let runs = super::pages::diff_runs(super::pages::line_diff(&a, &a));
        assert_eq!(runs.len(), 1);
        assert_eq!(runs[0]["hidden"], true);
    }

    #[test]
    fn sign_in_returns_only_to_a_page_of_this_console() {
        for (next, kept) in [
            ("/console/agents/a/connections/google_calendar", true),
            ("/console/tools?x=1", true),
            ("/console/signin", false),
            ("/console/signin?next=/console/tools", false),
            ("https://evil.example/console/", false),
            ("//evil.example/console/", false),
            ("/console//evil.example", false),
            ("/console/\\evil.example", false),
            ("/console/a b", false),
            ("/v1/tools", false),
            ("", false),
        ] {
            assert_eq!(super::pages::safe_next(next).is_some(), kept, "{next:?}");
        }
        assert!(super::pages::safe_next(&format!("/console/{}", "a".repeat(600))).is_none());
    }
}
