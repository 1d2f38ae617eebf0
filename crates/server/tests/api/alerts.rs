//! Alerts end to end: a tool that starts failing fires its rule once and resolves it once per
//! cluster (two servers on one PostgreSQL; one on SQLite), each received by a real HTTP receiver
//! that verifies the Standard Webhooks signature; a breaker opening fires its rule; bad rules
//! are answered with every problem at its pointer; another tenant sees nothing of them.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::http::HeaderMap;
use reqwest::StatusCode;
use serde_json::{Value, json};
use switchboard_server::ServerConfig;
use switchboard_server::alerts::AlertSettings;

use crate::support::{Backend, TestApp, invoke, spawn_app_with, start_with};

/// Every request the receiver got: its path, headers and body.
type Received = Arc<Mutex<Vec<(String, HeaderMap, Bytes)>>>;

async fn receiver() -> (String, Received) {
    let got: Received = Arc::default();
    let app = axum::Router::new().fallback({
        let got = Arc::clone(&got);
        move |uri: axum::http::Uri, headers: HeaderMap, body: Bytes| {
            let got = Arc::clone(&got);
            async move {
                got.lock()
                    .unwrap()
                    .push((uri.path().to_owned(), headers, body));
                StatusCode::NO_CONTENT
            }
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (base, got)
}

fn config() -> ServerConfig {
    ServerConfig {
        tenant_rate_per_s: 10_000,
        alerts: AlertSettings {
            interval: Duration::from_millis(200),
            retry_base: Duration::from_millis(200),
            timeout: Duration::from_secs(2),
            ..AlertSettings::default()
        },
        ..ServerConfig::default()
    }
}

/// The deliveries to `path`, each verified with `secret`, as their bodies.
fn verified(got: &Received, path: &str, secret: &str) -> Vec<(String, Value)> {
    let hook = standardwebhooks::Webhook::new(secret).unwrap();
    got.lock()
        .unwrap()
        .iter()
        .filter(|(p, _, _)| p == path)
        .map(|(_, h, body)| {
            hook.verify(body, h)
                .expect("a valid Standard Webhooks signature");
            let id = h["webhook-id"].to_str().unwrap().to_owned();
            (id, serde_json::from_slice(body).unwrap())
        })
        .collect()
}

async fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "waited 30 s for {what}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn checked_tool() -> Value {
    json!({"name": "crm", "description": "Look up the customer",
           "parameters": [{"name": "n", "type": "integer", "required": true}],
           "actions": [{"type": "validate", "rules": [{"check": "params.n > 0", "message": "the CRM refused it"}]}]})
}

/// A failing tool fires once and resolves once however many nodes evaluate it.
async fn fires_and_resolves_once(backend: Backend, two_nodes: bool) {
    let (hooks, got) = receiver().await;
    let a = spawn_app_with(backend, config()).await;
    let second = if two_nodes {
        Some(start_with(&a.url, a.key.clone(), config()).await)
    } else {
        None
    };
    let b = second
        .as_ref()
        .map(|(base, ..)| TestApp::view(&a, base.clone()));
    let nodes: Vec<&TestApp> = std::iter::once(&a).chain(b.as_ref()).collect();
    let key = a.tenant("acme").await;
    assert_eq!(
        a.post("/v1/tools", &key, checked_tool()).await.0,
        StatusCode::CREATED
    );
    let (s, body) = a
        .put(
            "/v1/agents/desk",
            &key,
            json!({"default": true, "tools": [{"tool": "crm"}]}),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{body}");
    let (s, rule) = a
        .post(
            "/v1/alerts/rules",
            &key,
            json!({"id": "crm-failing", "kind": "tool_failure_rate",
            "tool": "crm", "min_calls": 5, "window_s": 60, "webhook_url": format!("{hooks}/fail")}),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{rule}");
    let secret = rule["secret"].as_str().unwrap().to_owned();
    assert!(secret.starts_with("whsec_"), "{rule}");
    assert_eq!(rule["definition"]["above_percent"], 20);
    // Shown once: never again in a read.
    let (_, read) = a.get("/v1/alerts/rules/crm-failing", &key).await;
    assert!(!read.to_string().contains(&secret), "{read}");
    let (_, list) = a.get("/v1/alerts/rules", &key).await;
    assert!(!list.to_string().contains(&secret), "{list}");

    for (i, node) in nodes.iter().enumerate() {
        node.post("/v1/calls", &key, json!({"call_id": format!("c{i}")}))
            .await;
    }
    let mut fc = 0;
    let mut call = |n: i64| {
        fc += 1;
        let i = fc % nodes.len();
        let node = nodes[i];
        let key = key.clone();
        async move {
            invoke(
                node,
                &key,
                &format!("c{i}"),
                &format!("fc{fc}"),
                "crm",
                // Each call its own arguments: six identical ones are the runaway guard's `loop_detected`.
                json!({"n": n * i64::try_from(fc).unwrap()}),
            )
            .await
        }
    };
    for _ in 0..6 {
        let r = call(-1).await;
        assert_eq!(r["result"]["ok"], false, "{r}");
    }
    wait_for("the firing webhook", || {
        !verified(&got, "/fail", &secret).is_empty()
    })
    .await;
    for _ in 0..30 {
        let r = call(1).await;
        assert_eq!(r["result"]["ok"], true, "{r}");
    }
    wait_for("the resolved webhook", || {
        verified(&got, "/fail", &secret).len() >= 2
    })
    .await;
    // Several more passes of every node: nothing more is sent.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let seen = verified(&got, "/fail", &secret);
    assert_eq!(seen.len(), 2, "{backend:?}: {seen:?}");
    assert_eq!(seen[0].1["type"], "alert.firing");
    assert_eq!(seen[0].1["data"]["detail"]["failures"], 6);
    assert_eq!(seen[1].1["type"], "alert.resolved");
    assert_ne!(seen[0].0, seen[1].0);

    let (s, history) = a.get("/v1/alerts/history", &key).await;
    assert_eq!(s, StatusCode::OK);
    let states: Vec<&str> = history["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["state"].as_str().unwrap())
        .collect();
    assert_eq!(states, ["resolved", "firing"], "{history}");
    assert!(
        history["items"]
            .as_array()
            .unwrap()
            .iter()
            .all(|e| e["delivery"] == "delivered")
    );
    let (_, rule) = a.get("/v1/alerts/rules/crm-failing", &key).await;
    assert_eq!(
        (rule["state"].clone(), rule["transitions"].clone()),
        (json!("ok"), json!(2))
    );

    // Another tenant sees nothing of them.
    let other = a.tenant("globex").await;
    assert_eq!(
        a.get("/v1/alerts/rules", &other).await.1["items"],
        json!([])
    );
    assert_eq!(
        a.get("/v1/alerts/history", &other).await.1["items"],
        json!([])
    );
    assert_eq!(
        a.get("/v1/alerts/rules/crm-failing", &other).await.0,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        a.delete("/v1/alerts/rules/crm-failing", &other).await.0,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        a.get("/v1/alerts/history?rule=crm-failing", &other).await.1["items"],
        json!([])
    );
    assert_eq!(
        a.delete("/v1/alerts/rules/crm-failing", &key).await.0,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        a.get("/v1/alerts/history", &key).await.1["items"],
        json!([])
    );

    if let Some((_, state, stop, server)) = second {
        let _ = stop.send(());
        let _ = server.await;
        state.store.close().await;
    }
    a.stop().await;
}

#[tokio::test]
async fn a_failing_tool_fires_once_and_resolves_once_across_two_nodes() {
    fires_and_resolves_once(Backend::Postgres, true).await;
}

#[tokio::test]
async fn a_failing_tool_fires_once_and_resolves_once_on_sqlite() {
    fires_and_resolves_once(Backend::Sqlite, false).await;
}

#[tokio::test]
async fn a_breaker_opening_fires_its_rule() {
    for backend in [Backend::Sqlite, Backend::Postgres] {
        let (hooks, got) = receiver().await;
        let a = spawn_app_with(backend, config()).await;
        let key = a.tenant("acme").await;
        // Nothing listens on port 1: every try is refused at once.
        let tool = json!({"name": "dead", "description": "Calls a dead CRM",
            "parameters": [{"name": "n", "type": "integer", "required": true}],
            "actions": [{"type": "api_call", "url": "http://127.0.0.1:1/x", "retry_count": 0, "body": {"n": "{{params.n}}"}}]});
        assert_eq!(a.post("/v1/tools", &key, tool).await.0, StatusCode::CREATED);
        a.put(
            "/v1/agents/desk",
            &key,
            json!({"default": true, "tools": [{"tool": "dead"}]}),
        )
        .await;
        let (s, rule) = a
            .post("/v1/alerts/rules", &key, json!({"id": "breaker", "kind": "breaker_open",
                "upstream": "127.0.0.1:1", "window_s": 10, "webhook_url": format!("{hooks}/breaker")}))
            .await;
        assert_eq!(s, StatusCode::CREATED, "{rule}");
        let secret = rule["secret"].as_str().unwrap().to_owned();
        a.post("/v1/calls", &key, json!({"call_id": "c"})).await;
        for i in 0..6 {
            let r = invoke(&a, &key, "c", &format!("fc{i}"), "dead", json!({"n": i})).await;
            assert_eq!(r["result"]["ok"], false, "{r}");
        }
        wait_for("the breaker's firing webhook", || {
            !verified(&got, "/breaker", &secret).is_empty()
        })
        .await;
        let seen = verified(&got, "/breaker", &secret);
        assert_eq!(seen.len(), 1, "{backend:?}: {seen:?}");
        assert_eq!(
            seen[0].1["data"]["detail"]["upstreams"],
            json!(["127.0.0.1:1"])
        );
        a.stop().await;
    }
}

#[tokio::test]
async fn bad_rules_get_every_problem_at_its_pointer() {
    let a = spawn_app_with(Backend::Sqlite, config()).await;
    let key = a.tenant("acme").await;
    let (s, body) = a
        .post(
            "/v1/alerts/rules",
            &key,
            json!({"id": "bad id", "kind": "tool_latency_p95",
            "tool": "crm", "window_s": 5, "colour": "red", "webhook_url": "ftp://x.example/"}),
        )
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["error"]["code"], "invalid_alert_rule");
    let mut pointers: Vec<&str> = body["error"]["details"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["pointer"].as_str().unwrap())
        .collect();
    pointers.sort_unstable();
    assert_eq!(
        pointers,
        ["/above_ms", "/colour", "/id", "/webhook_url", "/window_s"],
        "{body}"
    );
    assert!(
        body["error"]["details"]
            .as_array()
            .unwrap()
            .iter()
            .all(|p| p["fix"].is_string())
    );

    // A rule twice is a conflict; past the tenant's most rules, a clear refusal.
    let rule =
        |id: &str| json!({"id": id, "kind": "live_call_cap", "webhook_url": "http://127.0.0.1:9/"});
    assert_eq!(
        a.post("/v1/alerts/rules", &key, rule("cap")).await.0,
        StatusCode::CREATED
    );
    assert_eq!(
        a.post("/v1/alerts/rules", &key, rule("cap")).await.0,
        StatusCode::CONFLICT
    );
    for i in 1..AlertSettings::default().max_rules_per_tenant {
        assert_eq!(
            a.post("/v1/alerts/rules", &key, rule(&format!("cap{i}")))
                .await
                .0,
            StatusCode::CREATED
        );
    }
    let (s, body) = a.post("/v1/alerts/rules", &key, rule("one-more")).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("delete one first"),
        "{body}"
    );
    a.stop().await;
}

/// How many messages the SMTP peer took, and their text.
fn mails(smtp: &crate::peers::SmtpPeer) -> (usize, String) {
    let text = smtp.received();
    (text.matches("Message-ID").count(), text)
}

/// A rule with a webhook and an email: each transition is one webhook and one email for the
/// whole cluster, each recorded in the history per channel, as the console shows it.
#[tokio::test]
async fn a_rule_emails_each_transition_once_across_two_nodes() {
    let smtp = crate::peers::SmtpPeer::start().await;
    let (hooks, got) = receiver().await;
    let cfg = || ServerConfig {
        max_calls_per_tenant: 2,
        ..config()
    };
    let a = spawn_app_with(Backend::Postgres, cfg()).await;
    let (base, state, stop, server) = start_with(&a.url, a.key.clone(), cfg()).await;
    let b = TestApp::view(&a, base);
    let key = crate::support::acme(&a, "acme").await;
    let (s, rule) = a
        .post(
            "/v1/alerts/rules",
            &key,
            json!({"id": "busy", "kind": "live_call_cap", "at_percent": 50,
                   "webhook_url": format!("{hooks}/busy"),
                   "email": {"to": ["ops@example.com", "oncall@example.com"],
                             "from_email": "alerts@example.com", "smtp_host": "127.0.0.1",
                             "smtp_port": smtp.port, "security": "plain"}}),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{rule}");
    let secret = rule["secret"].as_str().unwrap().to_owned();
    assert_eq!(rule["definition"]["email"]["smtp_port"], smtp.port);

    // One live call of a cap of two: firing, seen by both nodes.
    assert_eq!(
        b.post("/v1/calls", &key, json!({"call_id": "c1"})).await.0,
        StatusCode::CREATED
    );
    wait_for("the firing email", || mails(&smtp).0 >= 1).await;
    assert_eq!(b.delete("/v1/calls/c1", &key).await.0, StatusCode::OK);
    wait_for("the resolved email", || mails(&smtp).0 >= 2).await;
    wait_for("both webhooks", || {
        verified(&got, "/busy", &secret).len() >= 2
    })
    .await;
    // Several more passes of both nodes: nothing more is sent.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let (n, text) = mails(&smtp);
    assert_eq!(n, 2, "{text}");
    assert_eq!(verified(&got, "/busy", &secret).len(), 2);
    let firing = text.find("Subject: [Switchboard] firing: busy on live calls");
    let resolved = text.find("Subject: [Switchboard] resolved: busy on live calls");
    assert!(
        firing.is_some() && resolved.is_some() && firing < resolved,
        "{text}"
    );
    for want in [
        "Alert rule busy is firing.",
        "Fires when: live calls reached 50% of the live-call cap",
        "live_calls: 1",
        "max_calls_per_tenant: 2",
        "To: ops@example.com, oncall@example.com",
        "From: alerts@example.com",
    ] {
        assert!(text.contains(want), "{want}: {text}");
    }
    assert!(
        !text.contains("http://") && !text.contains("https://"),
        "{text}"
    );

    let (_, history) = a.get("/v1/alerts/history", &key).await;
    let items = history["items"].as_array().unwrap();
    assert_eq!(items.len(), 2, "{history}");
    for e in items {
        assert_eq!(e["delivery"], "delivered", "{history}");
        let channels: Vec<(&str, &str)> = e["deliveries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| {
                (
                    d["channel"].as_str().unwrap(),
                    d["delivery"].as_str().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            channels,
            [("webhook", "delivered"), ("email", "delivered")],
            "{history}"
        );
    }
    // Paged: the second page of one holds the older transition.
    let (_, older) = a.get("/v1/alerts/history?limit=1&offset=1", &key).await;
    assert_eq!(older["items"][0]["state"], "firing", "{older}");

    // The console shows the rule and each transition's deliveries per channel.
    let browser = crate::console::sign_in(&a, &key).await;
    let (s, page) = browser.get("/console/alerts").await;
    assert_eq!(s, StatusCode::OK);
    assert!(
        page.contains("email to ops@example.com, oncall@example.com"),
        "{page}"
    );
    assert_eq!(page.matches("email: delivered").count(), 2, "{page}");
    assert_eq!(page.matches("webhook: delivered").count(), 2, "{page}");

    let _ = stop.send(());
    let _ = server.await;
    state.store.close().await;
    a.stop().await;
}

/// An email the server refuses is retried, then recorded failed beside the delivered
/// webhook; the SMTP password is in no answer and no error.
#[tokio::test]
async fn a_refused_email_is_recorded_failed_and_the_password_is_never_shown() {
    let smtp = crate::peers::SmtpPeer::start().await;
    let (hooks, got) = receiver().await;
    let cfg = ServerConfig {
        max_calls_per_tenant: 1,
        alerts: AlertSettings {
            max_attempts: 2,
            ..config().alerts
        },
        ..config()
    };
    let a = spawn_app_with(Backend::Sqlite, cfg).await;
    let key = crate::support::acme(&a, "acme").await;
    let password = "correct-horse-battery-staple";
    let (s, rule) = a
        .post(
            "/v1/alerts/rules",
            &key,
            json!({"id": "busy", "kind": "live_call_cap",
                   "webhook_url": format!("{hooks}/busy"),
                   "email": {"to": ["nobody@example.com"], "from_email": "alerts@example.com",
                             "smtp_host": "127.0.0.1", "smtp_port": smtp.port, "security": "plain",
                             "username": "alerts", "password": password}}),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{rule}");
    assert!(!rule.to_string().contains(password), "{rule}");
    let secret = rule["secret"].as_str().unwrap().to_owned();
    assert_eq!(
        a.post("/v1/calls", &key, json!({"call_id": "c1"})).await.0,
        StatusCode::CREATED
    );
    let start = Instant::now();
    let history = loop {
        let (_, h) = a.get("/v1/alerts/history", &key).await;
        if h["items"][0]["delivery"] == "failed" {
            break h;
        }
        assert!(start.elapsed() < Duration::from_secs(30), "{h}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(verified(&got, "/busy", &secret).len(), 1);
    let deliveries = &history["items"][0]["deliveries"];
    assert_eq!(deliveries[0]["channel"], "webhook", "{history}");
    assert_eq!(deliveries[0]["delivery"], "delivered", "{history}");
    assert_eq!(deliveries[1]["channel"], "email", "{history}");
    assert_eq!(deliveries[1]["delivery"], "failed", "{history}");
    assert_eq!(deliveries[1]["attempts"], 2, "{history}");
    let error = deliveries[1]["last_error"].as_str().unwrap();
    // The peer offers no sign-in, so the configured user cannot sign in: named, no password.
    assert!(
        error.contains("mail server 127.0.0.1") && error.contains("authentication"),
        "{error}"
    );
    assert_eq!(history["items"][0]["last_error"], json!(error));
    for shown in [
        history.to_string(),
        a.get("/v1/alerts/rules", &key).await.1.to_string(),
        a.get("/v1/alerts/rules/busy", &key).await.1.to_string(),
        crate::console::sign_in(&a, &key)
            .await
            .get("/console/alerts")
            .await
            .1,
    ] {
        assert!(!shown.contains(password), "{shown}");
    }
    a.stop().await;
}
