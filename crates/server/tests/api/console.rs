//! The console at `/console`, driven over HTTP as a browser would: sign-in, the session cookie,
//! CSRF, the security headers, the tool editor's panels, calls and their live timeline, and
//! tenant isolation.

use std::time::Duration;

use reqwest::StatusCode;
use reqwest::header::{CONTENT_SECURITY_POLICY, CONTENT_TYPE, COOKIE, LOCATION, SET_COOKIE};
use serde_json::json;

use switchboard_server::ServerConfig;
use switchboard_server::console::ConsoleLimits;

use crate::both_backends;
use crate::support::{Backend, TestApp, acme, invoke, spawn_app, spawn_app_with};

const FORM: &str = "application/x-www-form-urlencoded";

/// A form body, as a browser encodes it.
fn encode(pairs: &[(&str, &str)]) -> String {
    let enc = |s: &str| {
        s.bytes()
            .map(|b| match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'*' => {
                    (b as char).to_string()
                }
                b' ' => "+".to_owned(),
                _ => format!("%{b:02X}"),
            })
            .collect::<String>()
    };
    pairs
        .iter()
        .map(|(k, v)| format!("{}={}", enc(k), enc(v)))
        .collect::<Vec<_>>()
        .join("&")
}

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// A signed-in browser: the session cookie and the page's CSRF token.
pub(crate) struct Browser {
    pub(crate) base: String,
    pub(crate) cookie: String,
    pub(crate) csrf: String,
}

pub(crate) async fn sign_in(app: &TestApp, key: &str) -> Browser {
    sign_in_to(app, key, "/console/tools").await
}

/// Signs in with `key`, expecting to be sent to `home`, and reads the CSRF token there.
async fn sign_in_to(app: &TestApp, key: &str, home: &str) -> Browser {
    let r = client()
        .post(format!("{}/console/signin", app.base))
        .header(CONTENT_TYPE, FORM)
        .body(encode(&[("key", key)]))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert_eq!(r.headers()[LOCATION], home);
    let set = r.headers()[SET_COOKIE].to_str().unwrap().to_owned();
    for attr in ["HttpOnly", "SameSite=Strict", "Path=/console"] {
        assert!(set.contains(attr), "{set}");
    }
    assert!(!set.contains(key), "the key is sealed in the cookie: {set}");
    let cookie = set.split(';').next().unwrap().to_owned();
    let mut b = Browser {
        base: app.base.clone(),
        cookie,
        csrf: String::new(),
    };
    let (_, page) = b.get(home).await;
    let at = page
        .find("X-CSRF-Token\": \"")
        .unwrap_or_else(|| panic!("no CSRF token in the page: {page}"))
        + 16;
    b.csrf = page[at..at + 64].to_owned();
    b
}

impl Browser {
    pub(crate) async fn get(&self, path: &str) -> (StatusCode, String) {
        let r = client()
            .get(format!("{}{path}", self.base))
            .header(COOKIE, &self.cookie)
            .send()
            .await
            .unwrap();
        let csp = r.headers().get(CONTENT_SECURITY_POLICY).cloned();
        assert!(
            csp.is_some_and(|v| v.to_str().unwrap().contains("script-src 'self'")),
            "{path} has no strict CSP"
        );
        (r.status(), r.text().await.unwrap())
    }

    pub(crate) async fn post(&self, path: &str, form: &[(&str, &str)]) -> (StatusCode, String) {
        let r = self.post_response(path, form).await;
        (r.status(), r.text().await.unwrap())
    }

    /// [`Browser::post`]'s whole response, headers included.
    pub(crate) async fn post_response(
        &self,
        path: &str,
        form: &[(&str, &str)],
    ) -> reqwest::Response {
        client()
            .post(format!("{}{path}", self.base))
            .header(COOKIE, &self.cookie)
            .header("X-CSRF-Token", &self.csrf)
            .header("HX-Request", "true")
            .header(CONTENT_TYPE, FORM)
            .body(encode(form))
            .send()
            .await
            .unwrap()
    }
}

both_backends!(the_console_signs_in_edits_replays_and_publishes, |app| {
    let key = acme(&app, "acme").await;
    app.post(
        "/v1/calls",
        &key,
        json!({"call_id": "c1", "user": {"auth_token": "tok-abcdef-123"}}),
    )
    .await;
    invoke(
        &app,
        &key,
        "c1",
        "f1",
        "save_meal",
        json!({"meal_type": "lunch", "dishes": ["soup"]}),
    )
    .await;

    // Without a session: to the sign-in page. A wrong key: 401.
    let r = client()
        .get(format!("{}/console/tools", app.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert_eq!(r.headers()[LOCATION], "/console/signin");
    let r = client()
        .post(format!("{}/console/signin", app.base))
        .header(CONTENT_TYPE, FORM)
        .body(encode(&[("key", "sb_acme_wrong")]))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);

    let b = sign_in(&app, &key).await;
    let (s, tools) = b.get("/console/tools").await;
    assert_eq!(s, StatusCode::OK);
    assert!(tools.contains("/console/tools/save_meal"), "{tools}");
    let (s, editor) = b.get("/console/tools/save_meal").await;
    assert_eq!(s, StatusCode::OK);
    assert!(editor.contains("Replay the last 50 calls"));

    // A state change without the CSRF token is refused.
    let r = client()
        .post(format!("{}/console/tools/save_meal/publish", app.base))
        .header(COOKIE, &b.cookie)
        .header(CONTENT_TYPE, FORM)
        .body(encode(&[("definition", "{}")]))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN);

    // An error in the draft is shown at its place, with its fix.
    let mut def = crate::support::save_meal();
    def["actions"][0]["type"] = json!("validat");
    let text = serde_json::to_string_pretty(&def).unwrap();
    let (s, diag) = b
        .post(
            "/console/tools/save_meal/validate",
            &[("definition", &text)],
        )
        .await;
    assert_eq!(s, StatusCode::OK);
    let line = text
        .lines()
        .position(|l| l.contains("\"validat\""))
        .unwrap()
        + 1;
    assert!(diag.contains("&#x2f;actions&#x2f;0&#x2f;type"), "{diag}");
    assert!(diag.contains("did you mean `validate`"), "{diag}");
    assert!(diag.contains(&format!("line {line}, column")), "{diag}");
    assert!(diag.contains("Fix:"), "{diag}");

    // Fixed, with a new message: valid; the replay shows the recorded call would change.
    let mut fixed = crate::support::save_meal();
    fixed["on_success"] =
        json!([{"type": "respond", "message": "Noted your {{params.meal_type}}."}]);
    let text = serde_json::to_string_pretty(&fixed).unwrap();
    let (_, diag) = b
        .post(
            "/console/tools/save_meal/validate",
            &[("definition", &text)],
        )
        .await;
    assert!(diag.contains("No problems"), "{diag}");
    let (_, replay) = b
        .post("/console/tools/save_meal/replay", &[("definition", &text)])
        .await;
    assert!(replay.contains("<strong>1</strong> invocation(s) from <strong id=\"replay-calls\">1</strong> call(s) replayed"), "{replay}");
    assert!(replay.contains("1 changed"), "{replay}");
    assert!(replay.contains("Noted your lunch."), "{replay}");

    // A dry run with a mocked effect, then publish.
    let (_, dry) = b
        .post(
            "/console/tools/save_meal/dry-run",
            &[
                ("definition", &text),
                ("params", r#"{"meal_type": "dinner", "dishes": ["rice"]}"#),
            ],
        )
        .await;
    assert!(dry.contains("Noted your dinner."), "{dry}");
    let (_, published) = b
        .post("/console/tools/save_meal/publish", &[("definition", &text)])
        .await;
    assert!(published.contains("version 2"), "{published}");
    let (_, diff) = b.get("/console/tools/save_meal/diff?a=1&b=2").await;
    assert!(diff.contains("class=\"added\""), "{diff}");

    // The numbers routed to the agent, by name or as `{agent, api}`.
    let mut features = crate::support::refer();
    features["realtime"] = json!({"phone_numbers": {"+18005550100": "assistant",
        "+18005550111": {"agent": "assistant", "api": "live"}, "+18005550122": "billing"}});
    let (s, body) = app.put("/v1/features", &key, features).await;
    assert_eq!(s, StatusCode::OK, "{body}");
    let (_, agent_page) = b.get("/console/agents/assistant").await;
    assert!(
        agent_page.contains("+18005550100") && agent_page.contains("+18005550111"),
        "{agent_page}"
    );
    assert!(!agent_page.contains("+18005550122"), "{agent_page}");

    // Agents, calls, a call's timeline, health: no secret anywhere.
    let mut seen = String::new();
    for path in [
        "/console/agents",
        "/console/agents/assistant",
        "/console/calls",
        "/console/calls/c1",
        "/console/health",
    ] {
        let (s, page) = b.get(path).await;
        assert_eq!(s, StatusCode::OK, "{path}: {page}");
        seen.push_str(&page);
    }
    assert!(seen.contains("save_meal"));
    assert!(seen.contains("set (write-only)"));
    for secret in ["sk-very-secret-1", "tok-abcdef-123"] {
        assert!(!seen.contains(secret), "{secret} reached a page");
    }

    // Another tenant's session sees none of it.
    let other = app.tenant("other").await;
    let o = sign_in(&app, &other).await;
    for path in [
        "/console/tools/save_meal/diff?a=1&b=2",
        "/console/agents/assistant",
        "/console/calls/c1",
        "/console/calls/c1/events",
    ] {
        let (s, page) = o.get(path).await;
        assert!(
            s == StatusCode::NOT_FOUND || page.contains("404"),
            "{path} for another tenant: {s}"
        );
    }
    let (_, list) = o.get("/console/calls").await;
    assert!(!list.contains("/console/calls/c1\""), "{list}");

    // Signing out ends the session cookie; htmx (the header's button) is sent to the sign-in
    // page by HX-Redirect, since a 303 would be followed and swapped into the button.
    let r = client()
        .post(format!("{}/console/signout", app.base))
        .header(COOKIE, &b.cookie)
        .header("X-CSRF-Token", &b.csrf)
        .header("HX-Request", "true")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(r.headers()["HX-Redirect"], "/console/signin");
    assert!(
        r.headers()[SET_COOKIE]
            .to_str()
            .unwrap()
            .contains("Max-Age=0")
    );
    // An htmx request without a session is sent to the sign-in page the same way.
    let r = client()
        .post(format!("{}/console/tools/save_meal/validate", app.base))
        .header("HX-Request", "true")
        .header(CONTENT_TYPE, FORM)
        .body(encode(&[("definition", "{}")]))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(r.headers()["HX-Redirect"], "/console/signin");
});

both_backends!(a_calls_timeline_updates_live_while_tools_run, |app| {
    let key = acme(&app, "acme").await;
    app.post("/v1/calls", &key, json!({"call_id": "live"}))
        .await;
    let b = sign_in(&app, &key).await;
    let mut events = client()
        .get(format!("{}/console/calls/live/events?after=0", app.base))
        .header(COOKIE, &b.cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(events.status(), StatusCode::OK);
    invoke(
        &app,
        &key,
        "live",
        "f1",
        "save_meal",
        json!({"meal_type": "dinner", "dishes": ["rice"]}),
    )
    .await;
    let mut got = String::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !got.contains("fc-f1") {
        let chunk = tokio::time::timeout_at(deadline, events.chunk())
            .await
            .expect("a record event within 10 s")
            .unwrap()
            .expect("the stream stays open");
        got.push_str(&String::from_utf8_lossy(&chunk));
    }
    assert!(got.contains("event: record"), "{got}");
    app.delete("/v1/calls/live", &key).await;
    while !got.contains("event: ended") {
        let chunk = tokio::time::timeout_at(deadline, events.chunk())
            .await
            .expect("the ended event within 10 s")
            .unwrap();
        match chunk {
            Some(c) => got.push_str(&String::from_utf8_lossy(&c)),
            None => break,
        }
    }
    assert!(got.contains("event: ended"), "{got}");
    assert_eq!(
        got.matches("id=\"fc-f1\"").count(),
        1,
        "each record is sent once: {got}"
    );
    assert!(
        got.contains("id: 1\n"),
        "a record event carries its ordinal: {got}"
    );

    // A browser reconnecting with the last id it saw gets nothing it already has.
    let again = client()
        .get(format!("{}/console/calls/live/events?after=0", app.base))
        .header(COOKIE, &b.cookie)
        .header("Last-Event-ID", "1")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(!again.contains("fc-f1"), "{again}");
    assert!(again.contains("event: ended"), "{again}");
});

both_backends!(the_calls_list_filters_by_outcome, |app| {
    let key = acme(&app, "acme").await;
    for call in ["fine", "broken", "quiet"] {
        app.post("/v1/calls", &key, json!({"call_id": call})).await;
    }
    invoke(
        &app,
        &key,
        "fine",
        "f1",
        "save_meal",
        json!({"meal_type": "lunch", "dishes": ["soup"]}),
    )
    .await;
    invoke(
        &app,
        &key,
        "broken",
        "f1",
        "save_meal",
        json!({"meal_type": "lunch", "dishes": ["soup"]}),
    )
    .await;
    invoke(
        &app,
        &key,
        "broken",
        "f2",
        "save_meal",
        json!({"meal_type": "dinner", "dishes": []}),
    )
    .await;
    // Another tenant's call of the same id failing changes nothing here.
    let other = acme(&app, "other").await;
    app.post("/v1/calls", &other, json!({"call_id": "fine"}))
        .await;
    invoke(
        &app,
        &other,
        "fine",
        "f1",
        "save_meal",
        json!({"meal_type": "lunch", "dishes": []}),
    )
    .await;

    let b = sign_in(&app, &key).await;
    let listed = |page: &str| {
        ["fine", "broken", "quiet"]
            .into_iter()
            .filter(|c| page.contains(&format!("href=\"/console/calls/{c}\"")))
            .collect::<Vec<_>>()
    };
    let (s, failed) = b.get("/console/calls?outcome=failed").await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(listed(&failed), ["broken"], "{failed}");
    assert!(
        failed.contains("<option value=\"failed\" selected>"),
        "{failed}"
    );
    let (_, ok) = b.get("/console/calls?outcome=ok").await;
    let mut ok_calls = listed(&ok);
    ok_calls.sort_unstable();
    assert_eq!(ok_calls, ["fine", "quiet"], "{ok}");
    let (_, any) = b.get("/console/calls?outcome=").await;
    assert_eq!(listed(&any).len(), 3, "{any}");
    let (s, bad) = b.get("/console/calls?outcome=maybe").await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert!(bad.contains("use `ok`"), "{bad}");

    let o = sign_in(&app, &other).await;
    let (_, theirs) = o.get("/console/calls?outcome=failed").await;
    assert_eq!(listed(&theirs), ["fine"], "{theirs}");
    let (_, none) = o.get("/console/calls?outcome=ok").await;
    assert!(none.contains("No calls match."), "{none}");
});

/// A request's status and `Location` or `HX-Redirect`, without following it.
async fn where_to(b: &Browser, path: &str, htmx: bool) -> (StatusCode, String) {
    let mut req = client()
        .get(format!("{}{path}", b.base))
        .header(COOKIE, &b.cookie);
    if htmx {
        req = req.header("HX-Request", "true");
    }
    let r = req.send().await.unwrap();
    let to = r
        .headers()
        .get(LOCATION)
        .or_else(|| r.headers().get("hx-redirect"))
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    (r.status(), to)
}

/// The key a page shows once, from its `<code class="secret">`.
fn shown_key(page: &str) -> String {
    let at = page
        .find("<code class=\"secret\">")
        .unwrap_or_else(|| panic!("no key shown: {page}"))
        + "<code class=\"secret\">".len();
    let end = at + page[at..].find("</code>").unwrap();
    page[at..end].to_owned()
}

both_backends!(
    the_admin_console_manages_tenants_and_sees_nothing_else,
    |app| {
        let key = acme(&app, "acme").await;
        app.post("/v1/calls", &key, json!({"call_id": "c1"})).await;
        invoke(
            &app,
            &key,
            "c1",
            "f1",
            "save_meal",
            json!({"meal_type": "lunch", "dishes": ["soup"]}),
        )
        .await;

        // The admin key opens the tenants, with the same cookie design; nothing of a tenant's
        // tools or calls is on the page.
        let admin = sign_in_to(&app, &app.admin, "/console/admin/tenants").await;
        let (s, list) = admin.get("/console/admin/tenants").await;
        assert_eq!(s, StatusCode::OK);
        assert!(list.contains("<code>acme</code>"), "{list}");
        assert!(
            !list.contains("save_meal") && !list.contains("/console/calls"),
            "{list}"
        );

        // An admin session never reaches a tenant's pages.
        for path in [
            "/console/tools",
            "/console/tools/save_meal",
            "/console/calls/c1",
            "/console/health",
        ] {
            assert_eq!(
                where_to(&admin, path, false).await,
                (StatusCode::SEE_OTHER, "/console/admin/tenants".to_owned()),
                "{path}"
            );
            assert_eq!(
                where_to(&admin, path, true).await,
                (StatusCode::OK, "/console/admin/tenants".to_owned()),
                "{path}"
            );
        }
        let (s, body) = admin
            .post("/console/tools/save_meal/publish", &[("definition", "{}")])
            .await;
        assert_eq!((s, body.as_str()), (StatusCode::OK, ""));

        // A form without the CSRF token, or from another site, creates nothing.
        let forged = client()
            .post(format!("{}/console/admin/tenants", app.base))
            .header(COOKIE, &admin.cookie)
            .header(CONTENT_TYPE, FORM)
            .body(encode(&[("id", "forged")]))
            .send()
            .await
            .unwrap();
        assert_eq!(forged.status(), StatusCode::FORBIDDEN);
        let cross = client()
            .post(format!("{}/console/admin/tenants", app.base))
            .header(COOKIE, &admin.cookie)
            .header("X-CSRF-Token", &admin.csrf)
            .header("Origin", "https://evil.example")
            .header(CONTENT_TYPE, FORM)
            .body(encode(&[("id", "forged")]))
            .send()
            .await
            .unwrap();
        assert_eq!(cross.status(), StatusCode::FORBIDDEN);
        assert_eq!(
            app.get("/v1/tenants/forged", &app.admin).await.0,
            StatusCode::NOT_FOUND
        );

        // A bad id is named with its fix; a good one creates the tenant and shows its key once.
        let (_, bad) = admin
            .post("/console/admin/tenants", &[("id", "Not Valid")])
            .await;
        assert!(bad.contains("must be 1-63 lowercase letters"), "{bad}");
        let (_, bad) = admin
            .post("/console/admin/tenants", &[("name", "No Id")])
            .await;
        assert!(bad.contains("must be 1-63 lowercase letters"), "{bad}");
        let long = "n".repeat(201);
        let (_, bad) = admin
            .post(
                "/console/admin/tenants",
                &[("id", "longname"), ("name", &long)],
            )
            .await;
        assert!(bad.contains("at most 200 characters"), "{bad}");
        let (s, made) = admin
            .post(
                "/console/admin/tenants",
                &[("id", "beta"), ("name", "Beta & Co")],
            )
            .await;
        assert_eq!(s, StatusCode::OK);
        assert!(made.contains("Beta &amp; Co"), "{made}");
        let beta_key = shown_key(&made);
        assert!(beta_key.starts_with("sb_beta_"), "{beta_key}");
        let (_, again) = admin
            .post("/console/admin/tenants", &[("id", "beta")])
            .await;
        assert!(again.contains("409"), "{again}");
        assert!(!again.contains(&beta_key), "{again}");
        for path in [
            "/console/admin/tenants",
            "/console/admin/tenants/beta/delete",
        ] {
            let (s, page) = admin.get(path).await;
            assert_eq!(s, StatusCode::OK, "{path}");
            assert!(page.contains("beta"), "{path}: {page}");
            assert!(
                !page.contains(&beta_key),
                "the key is shown once only: {path}"
            );
        }

        // The key works, and its session never reaches the admin pages.
        let beta = sign_in(&app, &beta_key).await;
        let (s, tools) = beta.get("/console/tools").await;
        assert_eq!(s, StatusCode::OK);
        assert!(tools.contains("<code>beta</code>"), "{tools}");
        for path in [
            "/console/admin/tenants",
            "/console/admin/tenants/acme/delete",
            "/console/admin",
        ] {
            let (s, page) = beta.get(path).await;
            if path == "/console/admin" {
                // The bare path only redirects, to a page that refuses the tenant.
                assert_eq!(s, StatusCode::SEE_OTHER);
                continue;
            }
            assert_eq!(s, StatusCode::NOT_FOUND, "{path}");
            assert!(!page.contains("acme"), "{page}");
        }
        let (s, _) = beta
            .post("/console/admin/tenants", &[("id", "gamma")])
            .await;
        assert_eq!(s, StatusCode::NOT_FOUND);
        let (s, _) = beta
            .post("/console/admin/tenants/acme/delete", &[("confirm", "acme")])
            .await;
        assert_eq!(s, StatusCode::NOT_FOUND);
        assert_eq!(
            app.get("/v1/tenants/gamma", &app.admin).await.0,
            StatusCode::NOT_FOUND
        );
        assert_eq!(
            app.get("/v1/tenants/acme", &app.admin).await.0,
            StatusCode::OK
        );

        // Deleting asks for the id typed again; then the tenant, its keys and its session go.
        let (_, kept) = admin
            .post("/console/admin/tenants/beta/delete", &[("confirm", "bet")])
            .await;
        assert!(kept.contains("nothing was deleted"), "{kept}");
        assert_eq!(
            app.get("/v1/tenants/beta", &app.admin).await.0,
            StatusCode::OK
        );
        let (s, gone) = admin
            .post("/console/admin/tenants/beta/delete", &[("confirm", "beta")])
            .await;
        assert_eq!(s, StatusCode::OK);
        assert!(gone.contains("was deleted"), "{gone}");
        assert_eq!(
            app.get("/v1/tenants/beta", &app.admin).await.0,
            StatusCode::NOT_FOUND
        );
        assert_eq!(
            where_to(&beta, "/console/tools", false).await,
            (StatusCode::SEE_OTHER, "/console/signin".to_owned())
        );
        let (_, list) = admin.get("/console/admin/tenants").await;
        assert!(
            !list.contains("<code>beta</code>") && list.contains("<code>acme</code>"),
            "{list}"
        );
        let (s, missing) = admin.get("/console/admin/tenants/beta/delete").await;
        assert_eq!(s, StatusCode::NOT_FOUND);
        // Its way back leads to the session's own home, not a tenant's page.
        assert!(
            missing.contains("tenant `beta` does not exist")
                && missing.contains("href=\"/console\""),
            "{missing}"
        );

        // Revoking an admin key ends its session at the next request.
        let (second, secret) = app
            .state
            .store
            .create_api_key(None, "second admin")
            .await
            .unwrap();
        let other_admin = sign_in_to(
            &app,
            secrecy::ExposeSecret::expose_secret(&secret),
            "/console/admin/tenants",
        )
        .await;
        assert!(
            app.state
                .store
                .revoke_api_key(None, &second.id)
                .await
                .unwrap()
        );
        assert_eq!(
            where_to(&other_admin, "/console/admin/tenants", false).await,
            (StatusCode::SEE_OTHER, "/console/signin".to_owned())
        );

        // Signing out ends the admin session.
        let r = client()
            .post(format!("{}/console/signout", app.base))
            .header(COOKIE, &admin.cookie)
            .header("X-CSRF-Token", &admin.csrf)
            .header("HX-Request", "true")
            .send()
            .await
            .unwrap();
        assert_eq!(r.headers()["hx-redirect"], "/console/signin");
        assert!(
            r.headers()[SET_COOKIE]
                .to_str()
                .unwrap()
                .contains("Max-Age=0")
        );
    }
);

both_backends!(
    health_charts_latency_per_minute_and_live_calls_per_node,
    |app| {
        let key = acme(&app, "acme").await;
        let other = acme(&app, "other").await;
        for call in ["here", "moved", "stranded"] {
            app.post("/v1/calls", &key, json!({"call_id": call})).await;
        }
        app.post("/v1/calls", &other, json!({"call_id": "theirs"}))
            .await;
        for (call, id) in [("here", "f1"), ("here", "f2")] {
            invoke(
                &app,
                &key,
                call,
                id,
                "save_meal",
                json!({"meal_type": "lunch", "dishes": ["soup"]}),
            )
            .await;
        }
        // Two more nodes: one alive, one whose lease has run out; a call of each tenant moves to
        // the live one, and one of acme's to the dead one.
        let store = &app.state.store;
        let lease = Duration::from_secs(600);
        store
            .register_node("node-b", Some("http://127.0.0.1:9"), lease)
            .await
            .unwrap();
        store.register_node("node-gone", None, lease).await.unwrap();
        store.retire_node("node-gone").await.unwrap();
        for (tenant, call, node) in [
            ("acme", "moved", "node-b"),
            ("other", "theirs", "node-b"),
            ("acme", "stranded", "node-gone"),
        ] {
            let fence = store.call_owner(tenant, call).await.unwrap().unwrap().fence;
            let taken = store
                .take_over_call(tenant, call, node, fence)
                .await
                .unwrap();
            assert!(taken.is_some(), "{call}");
        }

        let b = sign_in(&app, &key).await;
        let (s, page) = b.get("/console/health").await;
        assert_eq!(s, StatusCode::OK);
        let here = format!("{} (this node): 1", app.state.node.id);
        assert!(page.contains(&here), "{here}: {page}");
        // The other tenant's call on node-b is not counted here.
        assert!(page.contains(">node-b: 1</text>"), "{page}");
        assert!(page.contains("node-gone (lease expired): 1"), "{page}");
        assert!(page.contains("class=\"dead\""), "{page}");
        assert!(
            page.contains("aria-label=\"p95 latency per minute\""),
            "{page}"
        );
        assert!(page.contains("<polyline points=\"3,"), "{page}");
        assert!(
            page.contains("p95 ") && page.contains("<circle cx=\"3\""),
            "{page}"
        );
        assert!(page.contains("2 invocations"), "{page}");
        assert!(
            !page.contains("style="),
            "no inline style under the CSP: {page}"
        );

        let o = sign_in(&app, &other).await;
        let (_, theirs) = o.get("/console/health").await;
        assert!(theirs.contains(">node-b: 1</text>"), "{theirs}");
        assert!(!theirs.contains("node-gone"), "{theirs}");
        assert!(theirs.contains("No invocations yet."), "{theirs}");
    }
);

/// Reads a server-sent event stream until `want` is in it or the stream ends (at most 10 s):
/// what was read, and whether the stream ended.
async fn read_stream(events: &mut reqwest::Response, want: &str) -> (String, bool) {
    let mut got = String::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !got.contains(want) {
        match tokio::time::timeout_at(deadline, events.chunk()).await {
            Err(_) => return (got, false),
            Ok(chunk) => match chunk.unwrap() {
                Some(c) => got.push_str(&String::from_utf8_lossy(&c)),
                None => return (got, true),
            },
        }
    }
    (got, false)
}

impl Browser {
    /// Opens a call's timeline stream.
    async fn events(&self, call: &str) -> reqwest::Response {
        client()
            .get(format!("{}/console/calls/{call}/events?after=0", self.base))
            .header(COOKIE, &self.cookie)
            .send()
            .await
            .unwrap()
    }

    async fn sign_out(&self) {
        let r = client()
            .post(format!("{}/console/signout", self.base))
            .header(COOKIE, &self.cookie)
            .header("X-CSRF-Token", &self.csrf)
            .header("HX-Request", "true")
            .send()
            .await
            .unwrap();
        assert_eq!(r.headers()["hx-redirect"], "/console/signin");
    }

    /// The same browser, at another node of the deployment.
    fn at(&self, base: &str) -> Browser {
        Browser {
            base: base.to_owned(),
            cookie: self.cookie.clone(),
            csrf: self.csrf.clone(),
        }
    }
}

both_backends!(signing_out_ends_the_session_on_every_node, |app| {
    let key = acme(&app, "acme").await;
    app.post("/v1/calls", &key, json!({"call_id": "c1"})).await;
    let (other_base, other_state, stop, server) =
        crate::support::start_on(&app.url, app.key.clone()).await;
    let here = sign_in(&app, &key).await;
    let there = here.at(&other_base);
    let kept = sign_in(&app, &key).await;
    assert_eq!(there.get("/console/tools").await.0, StatusCode::OK);

    // Signed out on the other node: the cookie, kept and replayed, opens nothing on either.
    there.sign_out().await;
    for b in [&here, &there] {
        for htmx in [false, true] {
            let to = where_to(b, "/console/tools", htmx).await;
            let expected = if htmx {
                (StatusCode::OK, "/console/signin".to_owned())
            } else {
                (StatusCode::SEE_OTHER, "/console/signin".to_owned())
            };
            assert_eq!(to, expected, "{} htmx={htmx}", b.base);
        }
        let r = b.events("c1").await;
        assert_eq!(r.status(), StatusCode::SEE_OTHER, "{}", b.base);
        let (s, _) = b
            .post("/console/tools/save_meal/publish", &[("definition", "{}")])
            .await;
        assert_eq!(s, StatusCode::OK);
        assert_eq!(
            app.get("/v1/tools/save_meal", &key).await.1["version"],
            1,
            "a signed-out session publishes nothing"
        );
    }
    // Another session of the same key is not ended by it.
    assert_eq!(kept.get("/console/tools").await.0, StatusCode::OK);

    let _ = stop.send(());
    let _ = server.await;
    other_state.store.close().await;
});

both_backends!(a_timeline_stream_ends_when_its_session_ends, |app| {
    let key = acme(&app, "acme").await;
    app.post("/v1/calls", &key, json!({"call_id": "watched"}))
        .await;
    // A second key of the tenant, whose session follows the call until the key is revoked.
    let (s, second) = app
        .post("/v1/api-keys", &key, json!({"label": "watcher"}))
        .await;
    assert_eq!(s, StatusCode::CREATED, "{second}");
    let watcher = sign_in(&app, second["key"].as_str().unwrap()).await;
    let mut revoked = watcher.events("watched").await;
    assert_eq!(revoked.status(), StatusCode::OK);
    let signer = sign_in(&app, &key).await;
    let mut signed_out = signer.events("watched").await;
    assert_eq!(signed_out.status(), StatusCode::OK);
    let args = json!({"meal_type": "lunch", "dishes": ["soup"]});
    invoke(&app, &key, "watched", "before", "save_meal", args.clone()).await;
    for stream in [&mut revoked, &mut signed_out] {
        let (got, _) = read_stream(stream, "fc-before").await;
        assert!(got.contains("event: record"), "{got}");
    }

    // The key is revoked, the other session signs out: each stream says so and ends, and
    // what the call records next reaches neither.
    let id = second["id"].as_str().unwrap();
    assert_eq!(
        app.delete(&format!("/v1/api-keys/{id}"), &key).await.0,
        StatusCode::NO_CONTENT
    );
    signer.sign_out().await;
    invoke(&app, &key, "watched", "after", "save_meal", args).await;
    for stream in [&mut revoked, &mut signed_out] {
        let (got, ended) = read_stream(stream, "never-sent").await;
        assert!(ended, "the stream ends: {got}");
        assert!(got.contains("event: signedout"), "{got}");
        assert!(got.contains("Sign in again"), "{got}");
        assert!(
            !got.contains("fc-after"),
            "nothing after the session ended: {got}"
        );
    }
    // And the browser, reconnecting, is sent to sign in.
    assert_eq!(
        watcher.events("watched").await.status(),
        StatusCode::SEE_OTHER
    );
});

/// An app whose console allows 2 timelines per session and 3 per tenant.
async fn bounded_streams(backend: Backend) {
    let app = spawn_app_with(
        backend,
        ServerConfig {
            tenant_rate_per_s: 10_000,
            console: ConsoleLimits {
                streams_per_session: 2,
                streams_per_tenant: 3,
            },
            ..ServerConfig::default()
        },
    )
    .await;
    let key = acme(&app, "acme").await;
    let other = acme(&app, "other").await;
    for call in ["c1", "c2", "c3"] {
        app.post("/v1/calls", &key, json!({"call_id": call})).await;
    }
    app.post("/v1/calls", &other, json!({"call_id": "c1"}))
        .await;
    let first = sign_in(&app, &key).await;
    let second = sign_in(&app, &key).await;

    // A session follows two calls; a third is refused, saying why, in the page's terms.
    let mut open = vec![first.events("c1").await, first.events("c2").await];
    let mut refused = first.events("c3").await;
    assert_eq!(refused.status(), StatusCode::OK);
    let (said, ended) = read_stream(&mut refused, "\n\n").await;
    assert!(said.contains("event: refused"), "{said}");
    assert!(
        said.contains("your session already follows 2 calls live"),
        "{said}"
    );
    let (_, ended_after) = read_stream(&mut refused, "never-sent").await;
    assert!(ended || ended_after, "a refusal ends its stream");

    // The tenant's third stream is another session's; its fourth is refused.
    open.push(second.events("c3").await);
    let mut refused = second.events("c1").await;
    let (said, _) = read_stream(&mut refused, "\n\n").await;
    assert!(
        said.contains("this tenant's sessions already follow 3 calls live"),
        "{said}"
    );
    // Another tenant is not held back by it.
    let theirs = sign_in(&app, &other).await;
    let mut streams = theirs.events("c1").await;
    let (said, _) = read_stream(&mut streams, "event: ").await;
    assert!(!said.contains("refused"), "{said}");

    // A stream whose browser left frees its place.
    drop(open.remove(0));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let mut again = first.events("c1").await;
        let (said, _) = read_stream(&mut again, "event: ").await;
        if !said.contains("refused") {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the place of a closed stream is freed: {said}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    drop((open, streams));
    app.stop().await;
}

#[tokio::test]
async fn timeline_streams_are_bounded_per_session_and_per_tenant_sqlite() {
    bounded_streams(Backend::Sqlite).await;
}

#[tokio::test]
async fn timeline_streams_are_bounded_per_session_and_per_tenant_postgres() {
    bounded_streams(Backend::Postgres).await;
}

/// Every console page and stream is checked as a REST request is: a session (else to the
/// sign-in page), the tenant's own resources (else not found), and the tenant's request rate,
/// shared with the API (else 429 with `Retry-After`).
async fn checked_like_rest(backend: Backend) {
    let setup = spawn_app(backend).await;
    let key = acme(&setup, "acme").await;
    let other = setup.tenant("other").await;
    setup
        .post("/v1/calls", &key, json!({"call_id": "c1"}))
        .await;
    // A node of the same deployment allowing each tenant one request a second (a burst of 2).
    let (base, state, stop, server) = crate::support::start_with(
        &setup.url,
        setup.key.clone(),
        ServerConfig {
            tenant_rate_per_s: 1,
            ..ServerConfig::default()
        },
    )
    .await;
    let app = TestApp::view(&setup, base);
    let pages = [
        "/console/tools",
        "/console/tools/save_meal",
        "/console/tools/save_meal/diff?a=1&b=1",
        "/console/agents",
        "/console/agents/assistant",
        "/console/calls",
        "/console/calls/c1",
        "/console/calls/c1/events",
        "/console/health",
    ];
    for path in pages {
        let r = client()
            .get(format!("{}{path}", app.base))
            .send()
            .await
            .unwrap();
        assert_eq!(
            r.status(),
            StatusCode::SEE_OTHER,
            "{path} without a session"
        );
        assert_eq!(r.headers()[LOCATION], "/console/signin", "{path}");
    }
    let theirs = sign_in(&app, &other).await;
    for path in [
        "/console/tools/save_meal/diff?a=1&b=1",
        "/console/agents/assistant",
        "/console/calls/c1",
        "/console/calls/c1/events",
    ] {
        // The other tenant's budget is its own: a second apart, each request is admitted.
        tokio::time::sleep(Duration::from_millis(1100)).await;
        let (s, page) = theirs.get(path).await;
        assert!(
            s == StatusCode::NOT_FOUND || page.contains("404"),
            "{path} for another tenant: {s} {page}"
        );
    }

    // Past the tenant's rate, every page and the stream answer 429 with when to retry.
    let b = sign_in(&app, &key).await;
    for path in pages {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        loop {
            let r = client()
                .get(format!("{}{path}", app.base))
                .header(COOKIE, &b.cookie)
                .send()
                .await
                .unwrap();
            if r.status() == StatusCode::TOO_MANY_REQUESTS {
                assert!(r.headers().contains_key("retry-after"), "{path}");
                let text = r.text().await.unwrap();
                assert!(text.contains("Too many requests for this tenant"), "{text}");
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{path} never met the tenant's rate"
            );
        }
    }
    // The API and the console share the tenant's budget.
    let mut limited = false;
    for _ in 0..20 {
        if app.get("/v1/tools", &key).await.0 == StatusCode::TOO_MANY_REQUESTS {
            limited = true;
            break;
        }
    }
    assert!(limited, "the API meets the same rate");
    let _ = stop.send(());
    let _ = server.await;
    state.store.close().await;
    setup.stop().await;
}

#[tokio::test]
async fn console_pages_and_streams_are_checked_like_rest_requests_sqlite() {
    checked_like_rest(Backend::Sqlite).await;
}

#[tokio::test]
async fn console_pages_and_streams_are_checked_like_rest_requests_postgres() {
    checked_like_rest(Backend::Postgres).await;
}

both_backends!(the_calls_page_searches_and_pages_like_the_api, |app| {
    let key = acme(&app, "acme").await;
    for i in 0..5 {
        let body = json!({"call_id": format!("c{i}"), "from": format!("+1415555000{}", i % 2), "user": {"id": format!("u{i}")}});
        assert_eq!(
            app.post("/v1/calls", &key, body).await.0,
            StatusCode::CREATED
        );
        tokio::time::sleep(Duration::from_millis(3)).await;
    }
    // A call id that is markup is shown as text.
    let body = json!({"call_id": "<i>x</i>", "from": "+14155550009"});
    assert_eq!(
        app.post("/v1/calls", &key, body).await.0,
        StatusCode::CREATED
    );
    let b = sign_in(&app, &key).await;
    let listed = |page: &str| {
        (0..5)
            .map(|i| format!("c{i}"))
            .filter(|c| page.contains(&format!("href=\"/console/calls/{c}\"")))
            .collect::<Vec<_>>()
    };

    let (s, by_number) = b.get("/console/calls?number=%2B14155550001").await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(listed(&by_number), ["c1", "c3"], "{by_number}");
    assert!(
        by_number.contains("value=\"+14155550001\""),
        "the form keeps the search: {by_number}"
    );
    let (_, by_user) = b.get("/console/calls?user_id=u4").await;
    assert_eq!(listed(&by_user), ["c4"], "{by_user}");
    let (_, by_id) = b.get("/console/calls?id=c2").await;
    assert_eq!(listed(&by_id), ["c2"], "{by_id}");

    let (_, markup) = b.get("/console/calls?number=%2B14155550009").await;
    assert!(
        markup.contains("&lt;i&gt;x&lt;&#x2f;i&gt;") || markup.contains("&lt;i&gt;x&lt;/i&gt;"),
        "{markup}"
    );
    assert!(!markup.contains("<i>x</i>"), "{markup}");

    // Two at a time: older pages through `next`, back through `previous`, the search kept.
    let (_, first) = b.get("/console/calls?number=%2B14155550000&limit=2").await;
    assert_eq!(listed(&first), ["c2", "c4"], "{first}");
    assert!(!first.contains("id=\"calls-previous\""), "{first}");
    let next = link(&first, "calls-next");
    assert!(
        next.contains("number=%2B14155550000") && next.contains("limit=2"),
        "{next}"
    );
    let (_, second) = b.get(&next).await;
    assert_eq!(listed(&second), ["c0"], "{second}");
    assert!(!second.contains("id=\"calls-next\""), "{second}");
    let (_, back) = b.get(&link(&second, "calls-previous")).await;
    assert_eq!(listed(&back), ["c2", "c4"], "{back}");

    // A bad Since value: the page again, the form as typed, and what to write instead.
    let (s, bad) = b
        .get("/console/calls?since=last%20tuesday&number=%2B14155550001")
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert!(bad.contains("id=\"calls-error\""), "{bad}");
    assert!(
        bad.contains("`since` is `last tuesday`, not a time"),
        "{bad}"
    );
    assert!(bad.contains("2026-11-24T09:00:00Z"), "{bad}");
    assert!(bad.contains("value=\"last tuesday\""), "{bad}");
    assert!(
        !bad.contains("No calls match"),
        "no empty list for a bad search: {bad}"
    );
    let (s, bad) = b.get("/console/calls?since=%3Cscript%3E").await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert!(!bad.contains("<script>"), "{bad}");

    // Another tenant's session finds none of these, whatever it searches.
    let other = acme(&app, "other").await;
    let o = sign_in(&app, &other).await;
    for q in ["", "?number=%2B14155550001", "?user_id=u4", "?id=c2"] {
        let (_, theirs) = o.get(&format!("/console/calls{q}")).await;
        assert!(
            listed(&theirs).is_empty() && theirs.contains("No calls match."),
            "{q}: {theirs}"
        );
    }
    let (_, theirs) = o.get(&format!("/{}", next.trim_start_matches('/'))).await;
    assert!(listed(&theirs).is_empty(), "acme's cursor: {theirs}");
});

/// The `href` of the link with this id in a page (its `&amp;`s read back).
fn link(page: &str, id: &str) -> String {
    let at = page
        .find(&format!("id=\"{id}\""))
        .unwrap_or_else(|| panic!("no {id} in {page}"));
    let href = &page[at..];
    let start = href.find("href=\"").unwrap() + 6;
    let end = start + href[start..].find('"').unwrap();
    href[start..end]
        .replace("&amp;", "&")
        .replace("&#x2f;", "/")
}

both_backends!(the_calls_list_shows_new_and_ended_calls_live, |app| {
    let key = acme(&app, "acme").await;
    app.post("/v1/calls", &key, json!({"call_id": "first"}))
        .await;
    let b = sign_in(&app, &key).await;
    let (_, page) = b.get("/console/calls").await;
    assert!(
        page.contains("data-events=\"&#x2f;console&#x2f;calls-live?\""),
        "{page}"
    );
    let mut live = b.list_events("").await;
    assert_eq!(live.status(), StatusCode::OK);
    let (got, _) = read_stream(&mut live, "first").await;
    assert!(got.contains("event: rows"), "{got}");

    // A call starts: its row comes; it ends: its row says so.
    app.post("/v1/calls", &key, json!({"call_id": "second"}))
        .await;
    let (got, _) = read_stream(&mut live, "href=\"/console/calls/second\"").await;
    assert!(got.contains("href=\"/console/calls/second\""), "{got}");
    assert_eq!(app.delete("/v1/calls/second", &key).await.0, StatusCode::OK);
    let (got, _) = read_stream(&mut live, ">ended</td>").await;
    assert!(got.contains(">ended</td>"), "{got}");

    // A search's stream sends only its calls; a bad one is refused like the page.
    let mut searched = b.list_events("id=first").await;
    let (got, _) = read_stream(&mut searched, "event: rows").await;
    assert!(
        got.contains("/console/calls/first") && !got.contains("/console/calls/second"),
        "{got}"
    );
    assert_eq!(
        b.list_events("since=soon").await.status(),
        StatusCode::BAD_REQUEST
    );

    // Another tenant's stream never carries these calls.
    let other = acme(&app, "other").await;
    let o = sign_in(&app, &other).await;
    let mut theirs = o.list_events("").await;
    let (got, _) = read_stream(&mut theirs, "No calls match.").await;
    assert!(!got.contains("first") && !got.contains("second"), "{got}");

    // The session signs out: the stream says so and ends.
    b.sign_out().await;
    let (got, ended) = read_stream(&mut live, "never-sent").await;
    assert!(ended && got.contains("event: signedout"), "{got}");
    assert_eq!(b.list_events("").await.status(), StatusCode::SEE_OTHER);
});

/// A calls list stream takes a place among the session's and the tenant's live streams.
async fn list_streams_share_the_bounds(backend: Backend) {
    let app = spawn_app_with(
        backend,
        ServerConfig {
            tenant_rate_per_s: 10_000,
            console: ConsoleLimits {
                streams_per_session: 1,
                streams_per_tenant: 2,
            },
            ..ServerConfig::default()
        },
    )
    .await;
    let key = acme(&app, "acme").await;
    app.post("/v1/calls", &key, json!({"call_id": "c1"})).await;
    let first = sign_in(&app, &key).await;
    let _timeline = first.events("c1").await;
    let mut refused = first.list_events("").await;
    let (said, _) = read_stream(&mut refused, "\n\n").await;
    assert!(said.contains("event: refused"), "{said}");
    assert!(
        said.contains("your session already follows 1 pages live"),
        "{said}"
    );
    let second = sign_in(&app, &key).await;
    let _list = second.list_events("").await;
    let third = sign_in(&app, &key).await;
    let mut refused = third.list_events("").await;
    let (said, _) = read_stream(&mut refused, "\n\n").await;
    assert!(
        said.contains("this tenant's sessions already follow 2 pages live"),
        "{said}"
    );
    app.stop().await;
}

#[tokio::test]
async fn list_streams_share_the_bounds_sqlite() {
    list_streams_share_the_bounds(Backend::Sqlite).await;
}

#[tokio::test]
async fn list_streams_share_the_bounds_postgres() {
    list_streams_share_the_bounds(Backend::Postgres).await;
}

impl Browser {
    /// Opens the calls list's stream for a query string.
    async fn list_events(&self, query: &str) -> reqwest::Response {
        client()
            .get(format!("{}/console/calls-live?{query}", self.base))
            .header(COOKIE, &self.cookie)
            .send()
            .await
            .unwrap()
    }
}

/// A booking a call made links from the call's timeline — the page and its live stream — to
/// the event in the calendar (here a CalDAV resource on a real Radicale), without the
/// calendar's password; an agent without an OAuth2 calendar shows no connection. Another
/// tenant's operator reaches neither.
#[tokio::test]
async fn a_calls_timeline_links_the_events_its_bookings_made() {
    let app = spawn_app(Backend::Sqlite).await;
    let radicale = crate::peers::Radicale::start().await;
    let cal = radicale.calendar("console").await;
    let key = app.tenant("acme").await;
    let other = app.tenant("other").await;
    let (s, body) = app
        .put(
            "/v1/agents/desk",
            &key,
            json!({"default": true, "tools": [{"tool": "toolkit:caldav", "config": {"url": cal, "time_zone": "UTC"},
                "sensitive_config": {"username": "alice", "password": radicale.password}}]}),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{body}");
    app.post(
        "/v1/calls",
        &key,
        json!({"call_id": "c1", "from": "+14155550101"}),
    )
    .await;
    let r = invoke(
        &app,
        &key,
        "c1",
        "b1",
        "create_event",
        json!({"title": "Checkup", "start_time": "2030-01-07T10:00:00Z"}),
    )
    .await;
    let id = r["result"]["data"]["id"].as_str().unwrap().to_owned();
    let link = r["result"]["data"]["link"].as_str().unwrap().to_owned();
    let b = sign_in(&app, &key).await;
    // (minijinja escapes `/` in attributes as `&#x2f;`.)
    let href = format!("href=\"{}\"", link.replace('/', "&#x2f;"));
    let (s, page) = b.get("/console/calls/c1").await;
    assert_eq!(s, StatusCode::OK, "{page}");
    assert!(
        page.contains("class=\"booking-link\"") && page.contains(&href) && page.contains(&id),
        "{page}"
    );
    assert!(!page.contains(radicale.password), "{page}");
    let mut events = b.events("c1").await;
    let (stream, _) = read_stream(&mut events, "booking-link").await;
    assert!(stream.contains(&href), "{stream}");
    let (_, agents) = b.get("/console/agents").await;
    assert!(agents.contains("<td>—</td>"), "{agents}");
    let stranger = sign_in(&app, &other).await;
    let (s, _) = stranger.get("/console/calls/c1").await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    app.stop().await;
}

/// A page's text as the browser reads it (minijinja escapes `/`, `&` and quotes).
fn unescape(page: &str) -> String {
    page.replace("&#x2f;", "/")
        .replace("&#x27;", "'")
        .replace("&quot;", "\"")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

/// The function call ids of a timeline's rows, in the page's order.
fn row_ids(page: &str) -> Vec<String> {
    page.split("id=\"fc-")
        .skip(1)
        .filter_map(|s| s.split('"').next().map(str::to_owned))
        .collect()
}

/// The URL the "load earlier" button of a timeline (or of a page of it) asks, if it has one.
fn load_earlier(page: &str) -> Option<String> {
    let page = unescape(page);
    let row = page.split("id=\"load-earlier\"").nth(1)?;
    let url = row.split("hx-get=\"").nth(1)?.split('"').next()?;
    Some(url.to_owned())
}

/// Lets acme's agent make as many calls a minute as a long call's seed needs (the runaway
/// guard's default of 60 would refuse the rest).
pub(crate) async fn unguarded(app: &TestApp, key: &str) {
    let agent = json!({"instructions": "Help.", "tools": [{"tool": "save_meal", "config": {"unit": "g"}, "sensitive_config": {"api_key": "sk-very-secret-1"}}], "default": true,
        "guards": {"calls_per_minute": 10000}});
    let (s, body) = app.put("/v1/agents/assistant", key, agent).await;
    assert_eq!(s, StatusCode::OK, "{body}");
}

/// Records `n` save_meal invocations `f0`..`f{n-1}` in the call, in order.
async fn record_many(app: &TestApp, key: &str, call: &str, n: usize) {
    for i in 0..n {
        let answer = invoke(
            app,
            key,
            call,
            &format!("f{i}"),
            "save_meal",
            json!({"meal_type": "lunch", "dishes": [format!("dish {i}")]}),
        )
        .await;
        assert_eq!(answer["ok"], true, "f{i}: {answer}");
    }
}

both_backends!(a_long_timeline_pages_back_to_its_first_invocation, |app| {
    let key = acme(&app, "acme").await;
    unguarded(&app, &key).await;
    app.post("/v1/calls", &key, json!({"call_id": "long"}))
        .await;
    record_many(&app, &key, "long", 450).await;
    let b = sign_in(&app, &key).await;

    // The page shows the newest 200, says there are more, and offers the earlier ones.
    let (s, page) = b.get("/console/calls/long").await;
    assert_eq!(s, StatusCode::OK, "{page}");
    assert!(
        page.contains(
            "Showing <span id=\"timeline-shown\">200</span> of <span class=\"call-total\">450</span> invocations"
        ),
        "{page}"
    );
    assert!(
        page.contains("250 earlier invocation(s) not shown"),
        "{page}"
    );
    let mut seen = row_ids(&page);
    assert_eq!(seen.len(), 200);
    assert_eq!(seen.first().map(String::as_str), Some("f250"));
    assert_eq!(seen.last().map(String::as_str), Some("f449"));

    // Each "load earlier" answers the page before, until the call's first invocation.
    let mut next = load_earlier(&page);
    let mut pages = 0;
    while let Some(url) = next {
        pages += 1;
        assert!(pages <= 3, "the pages end");
        let r = client()
            .get(format!("{}{url}", app.base))
            .header(COOKIE, &b.cookie)
            .header("HX-Request", "true")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK);
        let rows = r.text().await.unwrap();
        assert!(!rows.contains("<html"), "a fragment: {rows}");
        let mut ids = row_ids(&rows);
        ids.append(&mut seen);
        seen = ids;
        next = load_earlier(&rows);
        // The fragment's other tenant check: the same URL is another tenant's 404.
        if pages == 1 {
            assert!(
                rows.contains("50 earlier invocation(s) not shown"),
                "{rows}"
            );
            let other = app.tenant("other").await;
            let o = sign_in(&app, &other).await;
            let r = client()
                .get(format!("{}{url}", app.base))
                .header(COOKIE, &o.cookie)
                .header("HX-Request", "true")
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), StatusCode::NOT_FOUND);
            let (s, _) = o.get("/console/calls/long").await;
            assert_eq!(s, StatusCode::NOT_FOUND);
            let (s, body) = app.get("/v1/calls/long/invocations", &other).await;
            assert_eq!(s, StatusCode::NOT_FOUND, "{body}");
        }
    }
    assert_eq!(pages, 2);
    let want: Vec<String> = (0..450).map(|i| format!("f{i}")).collect();
    assert_eq!(seen, want, "every invocation once, in order");

    // A cursor the server did not give is named, not a 500.
    let r = client()
        .get(format!(
            "{}/console/calls/long/rows?before=nonsense",
            app.base
        ))
        .header(COOKIE, &b.cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    assert!(r.text().await.unwrap().contains("before"));

    // The API pages the same records, oldest first, with the count and the cursors.
    let mut after: Option<String> = None;
    let mut listed = Vec::new();
    loop {
        let path = match &after {
            None => "/v1/calls/long/invocations?limit=200".to_owned(),
            Some(c) => format!("/v1/calls/long/invocations?limit=200&after={c}"),
        };
        let (s, body) = app.get(&path, &key).await;
        assert_eq!(s, StatusCode::OK, "{body}");
        assert_eq!(body["total"], 450, "{body}");
        assert_eq!(body["before"], listed.len(), "{body}");
        assert_eq!(body["previous"].is_null(), listed.is_empty(), "{body}");
        for item in body["items"].as_array().unwrap() {
            assert!(item.get("trace").is_none(), "{item}");
            listed.push(item["function_call_id"].as_str().unwrap().to_owned());
        }
        after = Some(body["next"].as_str().unwrap().to_owned());
        if body["more"] == false {
            break;
        }
    }
    assert_eq!(listed, want);
    // The last page's `next` asks for what the call records later.
    let end = after.unwrap();
    let (_, none_yet) = app
        .get(&format!("/v1/calls/long/invocations?after={end}"), &key)
        .await;
    assert_eq!(none_yet["items"], json!([]), "{none_yet}");
    assert_eq!(none_yet["next"], end.as_str(), "{none_yet}");
    assert_eq!(none_yet["more"], false, "{none_yet}");
    invoke(
        &app,
        &key,
        "long",
        "f450",
        "save_meal",
        json!({"meal_type": "dinner", "dishes": ["late"]}),
    )
    .await;
    let (_, later) = app
        .get(&format!("/v1/calls/long/invocations?after={end}"), &key)
        .await;
    assert_eq!(later["items"][0]["function_call_id"], "f450", "{later}");
    assert_eq!(later["items"].as_array().unwrap().len(), 1, "{later}");
    assert_eq!(later["total"], 451, "{later}");
    // Back from the end: `before` gives the newest of the earlier records.
    let (_, last) = app
        .get("/v1/calls/long/invocations?before=&after=", &key)
        .await;
    assert_eq!(last["items"][0]["function_call_id"], "f0", "{last}");
    let previous = app
        .get("/v1/calls/long/invocations?limit=200&after=", &key)
        .await
        .1["next"]
        .as_str()
        .unwrap()
        .to_owned();
    let (_, back) = app
        .get(
            &format!("/v1/calls/long/invocations?limit=10&before={previous}"),
            &key,
        )
        .await;
    let ids: Vec<&str> = back["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["function_call_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, (189..199).map(|i| format!("f{i}")).collect::<Vec<_>>());
    assert_eq!(back["before"], 189, "{back}");
    for bad in [
        "/v1/calls/long/invocations?after=nonsense",
        "/v1/calls/long/invocations?limit=0",
        "/v1/calls/long/invocations?limit=201",
        "/v1/calls/long/invocations?after=a&before=b",
    ] {
        let (s, body) = app.get(bad, &key).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{bad}: {body}");
    }
});

/// A tool that puts the agent's secret and the caller's token in what the model receives.
fn tells_secrets() -> serde_json::Value {
    json!({
        "name": "tells_secrets",
        "description": "Says what it should not.",
        "parameters": [{"name": "note", "type": "string", "required": true}],
        "actions": [{"type": "context.set", "data": {"workflow.note": "{{params.note}}"}}],
        "on_success": [{"type": "respond", "message": "said secret {{secrets.api_key}} token {{user.auth_token}}"}]
    })
}

both_backends!(
    a_timeline_row_shows_what_the_model_received_redacted,
    |app| {
        const SECRET: &str = "sk-output-secret-77";
        const TOKEN: &str = "tok-output-token-88";
        let key = app.tenant("acme").await;
        let (s, body) = app.post("/v1/tools", &key, tells_secrets()).await;
        assert_eq!(s, StatusCode::CREATED, "{body}");
        let agent = json!({"instructions": "Help.", "default": true,
        "tools": [{"tool": "tells_secrets", "sensitive_config": {"api_key": SECRET}}]});
        let (s, body) = app.put("/v1/agents/assistant", &key, agent).await;
        assert_eq!(s, StatusCode::OK, "{body}");
        let (s, body) = app
            .post(
                "/v1/calls",
                &key,
                json!({"call_id": "c1", "user": {"id": "u1", "auth_token": TOKEN}}),
            )
            .await;
        assert_eq!(s, StatusCode::CREATED, "{body}");
        let b = sign_in(&app, &key).await;
        let mut events = b.events("c1").await;
        invoke(
            &app,
            &key,
            "c1",
            "f1",
            "tells_secrets",
            json!({"note": format!("mine is {TOKEN}")}),
        )
        .await;
        let (streamed, _) = read_stream(&mut events, "fc-f1").await;
        let (_, page) = b.get("/console/calls/c1").await;
        let (_, rest) = app.get("/v1/calls/c1/invocations", &key).await;
        assert!(page.contains("<th>Model received</th>"), "{page}");
        for text in [unescape(&page), unescape(&streamed)] {
            assert!(
                text.contains("said secret [redacted] token [redacted]"),
                "the output is shown, redacted: {text}"
            );
            for secret in [SECRET, TOKEN] {
                assert!(
                    !text.contains(secret),
                    "{secret} reached the timeline: {text}"
                );
            }
        }
        let rest = rest.to_string();
        assert!(
            rest.contains("said secret [redacted] token [redacted]"),
            "{rest}"
        );
        assert!(!rest.contains(SECRET) && !rest.contains(TOKEN), "{rest}");
    }
);

both_backends!(a_live_calls_context_box_follows_its_changes, |app| {
    let key = acme(&app, "acme").await;
    app.post("/v1/calls", &key, json!({"call_id": "live"}))
        .await;
    let b = sign_in(&app, &key).await;
    let (s, page) = b.get("/console/calls/live").await;
    assert_eq!(s, StatusCode::OK, "{page}");
    assert!(page.contains("id=\"call-context\""), "{page}");
    assert!(!page.contains("sushi"), "{page}");
    // The stream the page opens names the context version the page shows.
    let page = unescape(&page);
    let url = page
        .split("data-events=\"")
        .nth(1)
        .and_then(|s| s.split('"').next())
        .unwrap()
        .to_owned();
    assert!(url.contains("&context="), "{url}");
    let mut events = client()
        .get(format!("{}{url}", app.base))
        .header(COOKIE, &b.cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(events.status(), StatusCode::OK);
    // Nothing changed yet: no context is sent.
    let mut quiet = String::new();
    let until = tokio::time::Instant::now() + Duration::from_millis(1500);
    while let Ok(Ok(Some(c))) = tokio::time::timeout_at(until, events.chunk()).await {
        quiet.push_str(&String::from_utf8_lossy(&c));
    }
    assert!(!quiet.contains("event: context"), "{quiet}");

    // The tool writes the context: the box's new text follows, once, with the record.
    invoke(
        &app,
        &key,
        "live",
        "f1",
        "save_meal",
        json!({"meal_type": "dinner", "dishes": ["sushi"]}),
    )
    .await;
    // The row carries the dish HTML-escaped; the context event as JSON text.
    let (got, _) = read_stream(&mut events, "\"sushi\"").await;
    let context = got
        .split("event: context\n")
        .nth(1)
        .unwrap_or_else(|| panic!("a context event: {got}"));
    assert!(context.contains("logged_meals"), "{got}");
    assert!(context.contains("sushi"), "{got}");
    // A second change moves it again.
    invoke(
        &app,
        &key,
        "live",
        "f2",
        "save_meal",
        json!({"meal_type": "lunch", "dishes": ["ramen"]}),
    )
    .await;
    let (more, _) = read_stream(&mut events, "\"ramen\"").await;
    let all = format!("{got}{more}");
    assert!(all.matches("event: context").count() >= 2, "{all}");
    // The page read again shows the same context.
    let (_, page) = b.get("/console/calls/live").await;
    assert!(page.contains("ramen") && page.contains("sushi"), "{page}");
});

// A long call's timeline, timed (ignored by default): 1,000 invocations recorded through the
// HTTP door, then every page of the console's timeline (the call's page, then each "load
// earlier") and of `GET /v1/calls/{id}/invocations` (200 a page) asked 20 times each:
//
//     cargo test -p switchboard-server --test api long_timeline_pages -- --ignored --nocapture --test-threads=1

/// (median, p95, max) of `times`, in milliseconds.
fn spread(times: &mut [f64]) -> [f64; 3] {
    times.sort_by(f64::total_cmp);
    let at = |q: f64| {
        let i = (times.len() as f64 * q).ceil() as usize;
        times[i.clamp(1, times.len()) - 1]
    };
    [at(0.5), at(0.95), times[times.len() - 1]]
}

/// Times 20 GETs of `path` with the browser's cookie; returns the spread and the last answer.
async fn timed_page(app: &TestApp, b: &Browser, path: &str) -> ([f64; 3], String) {
    let mut times = Vec::new();
    let mut last = String::new();
    for _ in 0..20 {
        let at = std::time::Instant::now();
        let r = client()
            .get(format!("{}{path}", app.base))
            .header(COOKIE, &b.cookie)
            .header("HX-Request", "true")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK, "{path}");
        last = r.text().await.unwrap();
        times.push(at.elapsed().as_secs_f64() * 1000.0);
    }
    (spread(&mut times), last)
}

async fn long_timeline_pages(backend: Backend) {
    const N: usize = 1000;
    let app = spawn_app(backend).await;
    let key = acme(&app, "acme").await;
    unguarded(&app, &key).await;
    app.post("/v1/calls", &key, json!({"call_id": "long"}))
        .await;
    let at = std::time::Instant::now();
    record_many(&app, &key, "long", N).await;
    println!(
        "{backend:?}: {N} invocations recorded in {:?}",
        at.elapsed()
    );
    let b = sign_in(&app, &key).await;

    let mut seen = Vec::new();
    let mut path = Some("/console/calls/long".to_owned());
    let mut page = 0;
    while let Some(p) = path {
        page += 1;
        let ([median, p95, max], text) = timed_page(&app, &b, &p).await;
        let mut ids = row_ids(&text);
        println!(
            "{backend:?} console page {page} ({} rows, {} bytes): median {median:.1} ms, p95 {p95:.1} ms, max {max:.1} ms",
            ids.len(),
            text.len()
        );
        ids.append(&mut seen);
        seen = ids;
        path = load_earlier(&text);
    }
    let want: Vec<String> = (0..N).map(|i| format!("f{i}")).collect();
    assert_eq!(seen, want, "the timeline reads to its first invocation");

    let mut listed = 0;
    let mut after = String::new();
    page = 0;
    loop {
        page += 1;
        let path = format!("/v1/calls/long/invocations?limit=200&after={after}");
        let mut times = Vec::new();
        let mut body = serde_json::Value::Null;
        for _ in 0..20 {
            let at = std::time::Instant::now();
            let (s, b) = app.get(&path, &key).await;
            times.push(at.elapsed().as_secs_f64() * 1000.0);
            assert_eq!(s, StatusCode::OK, "{b}");
            body = b;
        }
        let [median, p95, max] = spread(&mut times);
        let items = body["items"].as_array().unwrap().len();
        listed += items;
        println!(
            "{backend:?} API page {page} ({items} records): median {median:.1} ms, p95 {p95:.1} ms, max {max:.1} ms"
        );
        after = body["next"].as_str().unwrap().to_owned();
        if body["more"] == false {
            break;
        }
    }
    assert_eq!(listed, N);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "records 1,000 invocations: run by hand for docs/benchmarks.md"]
async fn long_timeline_pages_sqlite() {
    long_timeline_pages(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "records 1,000 invocations: run by hand for docs/benchmarks.md"]
async fn long_timeline_pages_postgres() {
    long_timeline_pages(Backend::Postgres).await;
}

/// A save of the agent editor: its status, its `HX-Redirect` (where a saved agent's page
/// reloads to) and its fragment as the browser reads it.
async fn save_agent(
    b: &Browser,
    name: &str,
    form: &[(&str, &str)],
) -> (StatusCode, Option<String>, String) {
    let r = b
        .post_response(&format!("/console/agents/{name}/save"), form)
        .await;
    let to = r
        .headers()
        .get("HX-Redirect")
        .map(|v| v.to_str().unwrap().to_owned());
    (r.status(), to, unescape(&r.text().await.unwrap()))
}

/// The 1-based line of `text` holding `needle`.
fn line_of(text: &str, needle: &str) -> usize {
    text.lines().position(|l| l.contains(needle)).unwrap() + 1
}

both_backends!(
    agents_are_edited_in_the_console_through_the_apis_checks,
    |app| {
        let key = acme(&app, "acme").await;
        let b = sign_in(&app, &key).await;
        let updated = |agent: &serde_json::Value| agent["updated_at"].as_str().unwrap().to_owned();

        // The editor holds the agent's JSON, never its sensitive config.
        let (s, page) = b.get("/console/agents/assistant").await;
        assert_eq!(s, StatusCode::OK);
        let page = unescape(&page);
        assert!(page.contains("id=\"agent-definition\""), "{page}");
        assert!(page.contains("\"unit\": \"g\""), "{page}");
        assert!(!page.contains("sk-very-secret-1"), "{page}");
        let (_, agent) = app.get("/v1/agents/assistant", &key).await;

        // A save: instructions (as a browser sends a textarea's lines), config, filler, turn
        // budget and numbers; the secret left out is kept.
        let def = json!({"tools": [{"tool": "save_meal", "config": {"unit": "kg"}}],
                     "handoffs": [], "default": true, "filler": "One moment.", "turn_budget_ms": 900});
        let text = serde_json::to_string_pretty(&def).unwrap();
        let (s, to, body) = save_agent(
            &b,
            "assistant",
            &[
                ("instructions", "Help with meals.\r\nBe brief."),
                ("definition", &text),
                ("phone_numbers", "+18005550100, +18005550101"),
                ("base", &updated(&agent)),
            ],
        )
        .await;
        assert_eq!(s, StatusCode::OK, "{body}");
        assert_eq!(
            to.as_deref(),
            Some("/console/agents/assistant?saved=1"),
            "{body}"
        );
        let (_, saved) = app.get("/v1/agents/assistant", &key).await;
        assert_eq!(saved["instructions"], "Help with meals.\nBe brief.");
        assert_eq!(saved["tools"][0]["config"]["unit"], "kg");
        assert_eq!(saved["tools"][0]["sensitive_config_set"], true, "{saved}");
        assert_eq!(saved["filler"], "One moment.");
        assert_eq!(saved["turn_budget_ms"], 900);
        let (_, features) = app.get("/v1/features", &key).await;
        assert_eq!(
            features["realtime"]["phone_numbers"],
            json!({"+18005550100": "assistant", "+18005550101": "assistant"})
        );
        assert!(
            features["refer"].is_object(),
            "other features kept: {features}"
        );
        let (_, page) = b.get("/console/agents/assistant?saved=1").await;
        assert!(page.contains("id=\"agent-saved\""), "{page}");
        assert!(page.contains("+18005550100, +18005550101"), "{page}");
        assert!(!page.contains("sk-very-secret-1"), "{page}");
        let base = updated(&saved);

        // A bad field is shown at its pointer and its line; nothing is saved, and a secret typed
        // into the draft is not echoed.
        let bad = json!({"tools": [
        {"tool": "save_meal", "config": {"unit": "kg"}, "sensitive_config": {"api_key": "sk-typed-secret-2"}},
        {"tool": "toolkit:caldav", "config": {"url": "http://127.0.0.1:9/cal/", "time_zone": "Mars/Olympus"},
         "sensitive_config": {"username": "alice", "password": "pw-typed-secret-3"}}],
        "turn_budget_ms": 50, "default": true});
        let text = serde_json::to_string_pretty(&bad).unwrap();
        let (s, to, body) = save_agent(
            &b,
            "assistant",
            &[
                ("instructions", "Changed."),
                ("definition", &text),
                ("base", &base),
            ],
        )
        .await;
        assert_eq!(s, StatusCode::OK);
        assert!(to.is_none(), "{body}");
        for (pointer, needle) in [
            ("/turn_budget_ms", "\"turn_budget_ms\""),
            ("/tools/1/config/time_zone", "Mars/Olympus"),
        ] {
            assert!(body.contains(&format!("<code>{pointer}</code>")), "{body}");
            assert!(
                body.contains(&format!("data-line=\"{}\"", line_of(&text, needle))),
                "{pointer} at its line: {body}"
            );
        }
        assert!(body.contains("Fix:"), "{body}");
        for secret in ["sk-typed-secret-2", "pw-typed-secret-3"] {
            assert!(!body.contains(secret), "{secret} echoed: {body}");
        }
        let (_, still) = app.get("/v1/agents/assistant", &key).await;
        assert_eq!(still["updated_at"], saved["updated_at"], "nothing saved");

        // JSON that is not the API's body: the error names its line; `instructions` has its box.
        let (_, _, body) = save_agent(
            &b,
            "assistant",
            &[
                ("definition", "{\n  \"tools\": [],\n  \"colour\": 1\n}"),
                ("base", &base),
            ],
        )
        .await;
        assert!(
            body.contains("unknown field `colour`") && body.contains("data-line=\"3\""),
            "{body}"
        );
        let (_, _, body) = save_agent(
            &b,
            "assistant",
            &[("definition", "{\"instructions\": \"x\"}"), ("base", &base)],
        )
        .await;
        assert!(body.contains("<code>/instructions</code>"), "{body}");

        // A number another agent answers stays that agent's.
        let (s, _) = app
            .put(
                "/v1/agents/billing",
                &key,
                json!({"instructions": "Bills."}),
            )
            .await;
        assert_eq!(s, StatusCode::OK);
        let (_, billing) = app.get("/v1/agents/billing", &key).await;
        let (s, _, _) = save_agent(
            &b,
            "billing",
            &[
                ("definition", "{}"),
                ("phone_numbers", "+18005550122"),
                ("base", &updated(&billing)),
            ],
        )
        .await;
        assert_eq!(s, StatusCode::OK);
        let (_, _, body) = save_agent(
            &b,
            "assistant",
            &[
                ("definition", "{\"default\": true}"),
                ("phone_numbers", "+18005550100 +18005550122"),
                ("base", &base),
            ],
        )
        .await;
        assert!(
            body.contains("`+18005550122` is routed to agent `billing`")
                && body.contains("data-field=\"phone-numbers\""),
            "{body}"
        );
        let (_, features) = app.get("/v1/features", &key).await;
        assert_eq!(
            features["realtime"]["phone_numbers"]["+18005550122"],
            "billing"
        );
        assert_eq!(
            features["realtime"]["phone_numbers"]["+18005550101"],
            "assistant"
        );

        // At most 100 numbers per agent.
        let many: Vec<String> = (0..101).map(|i| format!("+1800555{i:04}")).collect();
        let (_, _, body) = save_agent(
            &b,
            "assistant",
            &[
                ("definition", "{\"default\": true}"),
                ("phone_numbers", &many.join(",")),
                ("base", &base),
            ],
        )
        .await;
        assert!(body.contains("an agent answers at most 100"), "{body}");
        let (_, still) = app.get("/v1/agents/assistant", &key).await;
        assert_eq!(still["updated_at"], saved["updated_at"], "nothing saved");

        // A page opened before another save does not overwrite it.
        let (_, _, body) = save_agent(
            &b,
            "assistant",
            &[("definition", "{}"), ("base", &updated(&agent))],
        )
        .await;
        assert!(
            body.contains("changed since this page was opened"),
            "{body}"
        );

        // A new agent, created from its editor; its name cannot be taken twice.
        let (s, page) = b.get("/console/agents/new?name=helper").await;
        assert_eq!(s, StatusCode::OK);
        assert!(page.contains("New agent"), "{page}");
        let (s, page) = b.get("/console/agents/new?name=bad%20name").await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{page}");
        let form = [
            ("instructions", "Help."),
            ("definition", "{\"tools\": [{\"tool\": \"save_meal\"}]}"),
            ("create", "yes"),
        ];
        let (_, to, body) = save_agent(&b, "helper", &form).await;
        assert_eq!(
            to.as_deref(),
            Some("/console/agents/helper?saved=1"),
            "{body}"
        );
        let (s, helper) = app.get("/v1/agents/helper", &key).await;
        assert_eq!(s, StatusCode::OK);
        assert_eq!(helper["tools"][0]["tool"], "save_meal");
        let (_, to, body) = save_agent(&b, "helper", &form).await;
        assert!(to.is_none() && body.contains("exists already"), "{body}");

        // Without the CSRF token: refused, nothing saved.
        let r = client()
            .post(format!("{}/console/agents/assistant/save", app.base))
            .header(COOKIE, &b.cookie)
            .header(CONTENT_TYPE, FORM)
            .body(encode(&[("definition", "{}"), ("base", &base)]))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::FORBIDDEN);

        // Another tenant can neither read nor write the agent.
        let other = app.tenant("other").await;
        let o = sign_in(&app, &other).await;
        let (s, _) = o.get("/console/agents/assistant").await;
        assert_eq!(s, StatusCode::NOT_FOUND);
        let (_, to, body) = save_agent(
            &o,
            "assistant",
            &[("definition", "{\"default\": true}"), ("base", &base)],
        )
        .await;
        assert!(to.is_none() && body.contains("404"), "{body}");
        let (s, _) = app.get("/v1/agents/assistant", &other).await;
        assert_eq!(s, StatusCode::NOT_FOUND);
        let (_, after) = app.get("/v1/agents/assistant", &key).await;
        assert_eq!(after["updated_at"], saved["updated_at"]);
        assert_eq!(after["instructions"], "Help with meals.\nBe brief.");
    }
);

both_backends!(
    the_console_serves_its_icon_and_marks_times_and_scroll_areas,
    |app| {
        let key = acme(&app, "acme").await;
        let r = client()
            .get(format!("{}/favicon.ico", app.base))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK);
        assert_eq!(r.headers()[CONTENT_TYPE], "image/x-icon");
        assert_eq!(&r.bytes().await.unwrap()[..4], &[0, 0, 1, 0]);
        let b = sign_in(&app, &key).await;
        let (s, svg) = b.get("/console/assets/favicon.svg").await;
        assert_eq!(s, StatusCode::OK);
        assert!(svg.starts_with("<svg"), "{svg}");
        let (_, page) = b.get("/console/tools").await;
        assert!(
            page.contains("<link rel=\"icon\" href=\"/console/assets/favicon.svg\""),
            "{page}"
        );
        // Times carry their UTC value for the script to show in the browser's zone.
        let (_, tool) = app.get("/v1/tools/save_meal", &key).await;
        let at = tool["created_at"].as_str().unwrap();
        assert!(
            page.contains(&format!("<time datetime=\"{at}\">{at}</time>")),
            "{page}"
        );
        // Tables scroll inside a region the keyboard reaches.
        assert!(
            page.contains(
                "<div class=\"scroll\" tabindex=\"0\" role=\"region\" aria-label=\"Tools\">"
            ),
            "{page}"
        );

        // A diff: one line per line (no text between the lines' blocks), unchanged runs folded.
        let mut def = crate::support::save_meal();
        def["description"] = json!("Saves a meal, changed.");
        let (s, body) = app.put("/v1/tools/save_meal", &key, def).await;
        assert_eq!(s, StatusCode::OK, "{body}");
        let (_, diff) = b.get("/console/tools/save_meal/diff?a=1&b=2").await;
        assert!(diff.contains("</span><span"), "{diff}");
        assert!(!diff.contains("</span>\n"), "{diff}");
        assert!(diff.contains("<details class=\"unchanged\">"), "{diff}");
        assert!(diff.contains("class=\"added\""), "{diff}");
    }
);

both_backends!(
    the_alerts_page_lists_makes_and_deletes_a_tenants_rules,
    |app| {
        let key = app.tenant("acme").await;
        let other_key = app.tenant("globex").await;
        let b = sign_in(&app, &key).await;
        let other = sign_in(&app, &other_key).await;

        let (s, page) = b.get("/console/alerts").await;
        assert_eq!(s, StatusCode::OK);
        let page = unescape(&page);
        assert!(
            page.contains("href=\"/console/alerts\" class=\"active\""),
            "{page}"
        );
        assert!(page.contains("No rules yet"), "{page}");

        // The editor answers a bad rule with the API's problems at their pointers.
        let bad = json!({"id": "slow", "kind": "tool_latency_p95", "tool": "crm",
        "email": {"to": ["not an address"], "from_email": "alerts@example.com",
                  "smtp_host": "smtp.example.com", "password": "hunter2-secret"}});
        let (s, answer) = b
            .post("/console/alerts", &[("definition", &bad.to_string())])
            .await;
        assert_eq!(s, StatusCode::OK);
        let answer = unescape(&answer);
        for pointer in ["/above_ms", "/email/to/0", "/email/password"] {
            assert!(
                answer.contains(&format!("<code>{pointer}</code>")),
                "{pointer}: {answer}"
            );
        }
        assert!(!answer.contains("hunter2-secret"), "{answer}");
        let (_, answer) = b
            .post(
                "/console/alerts",
                &[("definition", "{\"password\": \"hunter2-secret\"")],
            )
            .await;
        assert!(answer.contains("not JSON"), "{answer}");
        assert!(!answer.contains("hunter2-secret"), "{answer}");

        // A good one is made, its webhook secret shown once, its SMTP password never.
        let good = json!({"id": "slow", "kind": "tool_latency_p95", "tool": "crm", "above_ms": 900,
        "webhook_url": "https://alerts.example.com/in?token=abc123",
        "email": {"to": ["ops@example.com"], "from_email": "alerts@example.com",
                  "smtp_host": "smtp.example.com", "username": "alerts", "password": "hunter2-secret"}});
        let (s, made) = b
            .post("/console/alerts", &[("definition", &good.to_string())])
            .await;
        assert_eq!(s, StatusCode::OK);
        assert!(made.contains("id=\"rule-secret\">whsec_"), "{made}");
        assert!(!made.contains("hunter2-secret"), "{made}");
        let (_, page) = b.get("/console/alerts").await;
        assert!(page.contains("href=\"/console/alerts/slow\""), "{page}");
        assert!(page.contains("email to ops@example.com"), "{page}");
        assert!(page.contains("webhook to alerts.example.com"), "{page}");
        assert!(
            !page.contains("abc123"),
            "the webhook's query is not shown: {page}"
        );
        let (s, rule_page) = b.get("/console/alerts/slow").await;
        assert_eq!(s, StatusCode::OK);
        assert!(rule_page.contains("p95 latency over 900 ms"), "{rule_page}");
        for shown in [&page, &rule_page] {
            assert!(
                !shown.contains("hunter2-secret") && !shown.contains("whsec_"),
                "{shown}"
            );
        }
        let (_, read) = app.get("/v1/alerts/rules/slow", &key).await;
        assert_eq!(read["definition"]["email"]["username"], "alerts");
        assert!(!read.to_string().contains("hunter2-secret"), "{read}");

        // Another tenant's session sees nothing of it and cannot delete it by its id.
        let (_, theirs) = other.get("/console/alerts").await;
        assert!(
            theirs.contains("No rules yet") && !theirs.contains("/console/alerts/slow"),
            "{theirs}"
        );
        let (s, _) = other.get("/console/alerts/slow").await;
        assert_eq!(s, StatusCode::NOT_FOUND);
        let (_, refused) = other.post("/console/alerts/slow/delete", &[]).await;
        assert!(refused.contains("404"), "{refused}");
        assert_eq!(
            app.get("/v1/alerts/rules/slow", &key).await.0,
            StatusCode::OK
        );

        // A change without the CSRF token is refused, and changes nothing.
        for (path, body) in [
            ("/console/alerts/slow/delete", String::new()),
            (
                "/console/alerts",
                encode(&[(
                    "definition",
                    &json!({"id": "sneaky", "kind": "live_call_cap",
                "webhook_url": "https://alerts.example.com/in"})
                    .to_string(),
                )]),
            ),
        ] {
            let r = client()
                .post(format!("{}{path}", app.base))
                .header(COOKIE, &b.cookie)
                .header(CONTENT_TYPE, FORM)
                .body(body)
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), StatusCode::FORBIDDEN, "{path}");
        }
        assert_eq!(
            app.get("/v1/alerts/rules/slow", &key).await.0,
            StatusCode::OK
        );
        assert_eq!(
            app.get("/v1/alerts/rules/sneaky", &key).await.0,
            StatusCode::NOT_FOUND
        );

        // The admin's session has no tenant's alerts: it is sent to its own pages.
        let admin = sign_in_to(&app, &app.admin, "/console/admin/tenants").await;
        let r = client()
            .get(format!("{}/console/alerts/slow", app.base))
            .header(COOKIE, &admin.cookie)
            .send()
            .await
            .unwrap();
        assert!(r.status().is_redirection(), "{}", r.status());

        // The owner deletes it.
        let (s, done) = b.post("/console/alerts/slow/delete", &[]).await;
        assert_eq!(s, StatusCode::OK);
        assert!(done.contains("Deleted the rule"), "{done}");
        assert_eq!(
            app.get("/v1/alerts/rules/slow", &key).await.0,
            StatusCode::NOT_FOUND
        );
        // A page past the history kept is a clear refusal.
        let (s, past) = b.get("/console/alerts?page=100000").await;
        assert_eq!(s, StatusCode::BAD_REQUEST);
        assert!(past.contains("past the history kept"), "{past}");
    }
);
