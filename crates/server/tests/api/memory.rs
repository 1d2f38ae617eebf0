//! Bounded memory whatever the input: the compiled-tool cache, metric labels, and what a call
//! keeps of its invocations. Each runs on SQLite and on PostgreSQL.

use std::sync::OnceLock;

use reqwest::StatusCode;
use serde_json::{Value, json};
use switchboard_runtime::{Invocation, Lookup, RecordLimits};
use switchboard_server::ServerConfig;
use switchboard_server::prometheus::Metrics;

use crate::support::{Backend, TestApp, invoke, spawn_app_with_metrics};

fn config() -> ServerConfig {
    ServerConfig {
        tenant_rate_per_s: 10_000,
        ..ServerConfig::default()
    }
}

/// A tool whose definition is about `bytes` long (its description), answering with its text.
fn echo(description_bytes: usize, version: usize) -> Value {
    json!({
        "name": "echo",
        "description": format!("Echo v{version} {}", "d".repeat(description_bytes)),
        "parameters": [{"name": "text", "type": "string", "required": true}],
        "actions": [{"type": "respond", "message": format!("v{version} {{{{params.text}}}}")}]
    })
}

/// A tenant with `echo` on its default agent; returns its key.
async fn echo_tenant(app: &TestApp, id: &str, description_bytes: usize) -> String {
    let key = app.tenant(id).await;
    let (s, body) = app
        .post("/v1/tools", &key, echo(description_bytes, 1))
        .await;
    assert_eq!(s, StatusCode::CREATED, "{body}");
    let agent = json!({"instructions": "Echo.", "tools": [{"tool": "echo"}], "default": true});
    let (s, body) = app.put("/v1/agents/assistant", &key, agent).await;
    assert_eq!(s, StatusCode::OK, "{body}");
    key
}

async fn start_call(app: &TestApp, key: &str, id: &str) {
    let (s, body) = app.post("/v1/calls", key, json!({"call_id": id})).await;
    assert_eq!(s, StatusCode::CREATED, "{body}");
}

async fn run<F, Fut>(backend: Backend, config: ServerConfig, metrics: bool, test: F)
where
    F: FnOnce(std::sync::Arc<TestApp>) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let handle = metrics.then(recorder);
    let app = std::sync::Arc::new(spawn_app_with_metrics(backend, config, handle).await);
    let result = tokio::spawn(test(std::sync::Arc::clone(&app))).await;
    if let Ok(app) = std::sync::Arc::try_unwrap(app) {
        app.stop().await;
    }
    if let Err(e) = result {
        std::panic::resume_unwind(e.into_panic());
    }
}

/// The process's one metrics recorder (the `metrics` facade has a single global one).
fn recorder() -> Metrics {
    static HANDLE: OnceLock<Metrics> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            switchboard_server::prometheus::install_recorder()
                .expect("the only recorder of this test binary")
        })
        .clone()
}

// --- The compiled-tool cache is bounded by bytes, least recently used evicted first.

async fn tool_cache_is_bounded(app: std::sync::Arc<TestApp>) {
    // Each version's definition is ~20 KB, estimated ~140 KB compiled: a 1 MiB cache holds 7.
    let key = echo_tenant(&app, "acme", 20_000).await;
    let cache = &app.state.tools;
    let bound = cache.max_bytes();
    const VERSIONS: usize = 30;
    for v in 1..=VERSIONS {
        if v > 1 {
            let (s, body) = app.put("/v1/tools/echo", &key, echo(20_000, v)).await;
            assert_eq!(s, StatusCode::OK, "{body}");
        }
        // A call pins (and compiles) the current version.
        start_call(&app, &key, &format!("call_{v}")).await;
        let answer = invoke(
            &app,
            &key,
            &format!("call_{v}"),
            "fc_1",
            "echo",
            json!({"text": "hi"}),
        )
        .await;
        assert_eq!(answer["result"]["message"], format!("v{v} hi"), "{answer}");
        assert!(cache.weighted_bytes() <= bound, "{cache:?}");
    }
    assert!(cache.entries() < VERSIONS as u64, "{cache:?}");
    assert!(cache.entries() >= 1, "{cache:?}");

    // The first version was evicted long ago: a call pinned to it (picked up by a node that
    // never compiled it) still runs it, compiled again on the miss.
    let first = app
        .state
        .store
        .get_tool_version("acme", "echo", 1)
        .await
        .unwrap()
        .unwrap();
    assert!(cache.get("acme", "echo", 1).is_none(), "{cache:?}");
    let tool = switchboard_server::toolset::compile(&app.state, "acme", &first).unwrap();
    assert!(tool.description().starts_with("Echo v1 "));
    assert!(cache.weighted_bytes() <= bound, "{cache:?}");
    // And the newest still serve.
    start_call(&app, &key, "call_last").await;
    let answer = invoke(
        &app,
        &key,
        "call_last",
        "fc_1",
        "echo",
        json!({"text": "hi"}),
    )
    .await;
    assert_eq!(answer["result"]["message"], format!("v{VERSIONS} hi"));
}

fn small_cache() -> ServerConfig {
    ServerConfig {
        tool_cache_bytes: 1024 * 1024,
        ..config()
    }
}

#[tokio::test]
async fn tool_cache_is_bounded_sqlite() {
    run(Backend::Sqlite, small_cache(), false, tool_cache_is_bounded).await;
}

#[tokio::test]
async fn tool_cache_is_bounded_postgres() {
    run(
        Backend::Postgres,
        small_cache(),
        false,
        tool_cache_is_bounded,
    )
    .await;
}

// --- A tool's compiled templates are bounded: each the engine compiles holds ~10 KB.

async fn template_holes_are_limited_at_save(app: std::sync::Arc<TestApp>) {
    let key = app.tenant("acme").await;
    let body: serde_json::Map<String, Value> = (0..1500)
        .map(|i| {
            (
                format!("f{i}"),
                json!(format!("{{{{ params.text | replace('a', '{i}') }}}}")),
            )
        })
        .collect();
    let def = json!({"name": "big", "description": "A tool of many templates.",
        "parameters": [{"name": "text", "type": "string", "required": true}],
        "actions": [{"type": "api_call", "url": "https://example.com/x", "body": body}]});
    let (s, err) = app.post("/v1/tools", &key, def).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{err}");
    assert_eq!(err["error"]["code"], "invalid_tool", "{err}");
    let text = err.to_string();
    assert!(
        text.contains(
            "tool `big` has 1500 template holes and expressions, over the limit of 1000 (max_template_holes)"
        ),
        "{text}"
    );
    assert!(text.contains("serve --limits"), "{text}");
    assert_eq!(
        app.get("/v1/tools/big", &key).await.0,
        StatusCode::NOT_FOUND
    );
}

#[tokio::test]
async fn template_holes_are_limited_at_save_sqlite() {
    run(
        Backend::Sqlite,
        config(),
        false,
        template_holes_are_limited_at_save,
    )
    .await;
}

#[tokio::test]
async fn template_holes_are_limited_at_save_postgres() {
    run(
        Backend::Postgres,
        config(),
        false,
        template_holes_are_limited_at_save,
    )
    .await;
}

// --- Metric labels never come from what the model sent.

async fn unknown_tools_share_one_label(app: std::sync::Arc<TestApp>) {
    let tenant = format!("metrics-{}", fastrand::u32(..));
    let key = echo_tenant(&app, &tenant, 10).await;
    start_call(&app, &key, &format!("call_{tenant}")).await;
    let marker = "madeup";
    for i in 0..1000 {
        let name = format!("{marker}{i:04}{}", "x".repeat(10_000));
        let answer = invoke(
            &app,
            &key,
            &format!("call_{tenant}"),
            &format!("fc_{i}"),
            &name,
            json!({}),
        )
        .await;
        assert_eq!(answer["error"], "tool_not_found", "{answer}");
    }
    let res = app
        .client
        .get(format!("{}/metrics", app.base))
        .bearer_auth(&app.admin)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let body = res.text().await.unwrap();
    assert!(!body.contains(marker), "a made-up tool name became a label");
    let ours: Vec<&str> = body
        .lines()
        .filter(|l| l.contains(&format!("tenant=\"{tenant}\"")))
        .collect();
    assert!(
        ours.iter()
            .any(|l| l.starts_with("switchboard_invocations_total")
                && l.contains("tool=\"unknown\"")
                && l.ends_with(" 1000")),
        "{ours:#?}"
    );
    // Latencies are histograms with fixed buckets (they add up across nodes).
    assert!(
        ours.iter().any(
            |l| l.starts_with("switchboard_invocation_duration_seconds_bucket")
                && l.contains("tool=\"unknown\"")
                && l.contains("le=\"0.005\"")
        ),
        "{ours:#?}"
    );
    // One series per metric for all of them (a histogram renders a line per bucket).
    assert!(ours.len() <= 40, "{} lines for one tenant", ours.len());
    // 1000 names of 10 KB as labels would be over 10 MB.
    assert!(body.len() < 1024 * 1024, "/metrics is {} bytes", body.len());
}

#[tokio::test]
async fn unknown_tools_share_one_label_sqlite() {
    run(
        Backend::Sqlite,
        config(),
        true,
        unknown_tools_share_one_label,
    )
    .await;
}

#[tokio::test]
async fn unknown_tools_share_one_label_postgres() {
    run(
        Backend::Postgres,
        config(),
        true,
        unknown_tools_share_one_label,
    )
    .await;
}

// --- Invocation records are capped per call and per field.

fn small_records() -> ServerConfig {
    ServerConfig {
        records: RecordLimits {
            max_records_per_call: 20,
            max_record_field_bytes: 1024,
        },
        // No heartbeat during the test: a node marked dead stays dead.
        lease: std::time::Duration::from_secs(3600),
        ..config()
    }
}

async fn records_are_capped(app: std::sync::Arc<TestApp>) {
    let key = echo_tenant(&app, "acme", 10).await;
    start_call(&app, &key, "call_big").await;
    const CALLS: usize = 30;
    let text = |i: usize| format!("{i:03}{}", "é".repeat(15_000));
    for i in 0..CALLS {
        let answer = invoke(
            &app,
            &key,
            "call_big",
            &format!("fc_{i}"),
            "echo",
            json!({"text": text(i)}),
        )
        .await;
        // The model's answer is never cut.
        assert_eq!(answer["result"]["message"], format!("v1 {}", text(i)));
    }
    let live = app.state.calls.get("acme", "call_big").unwrap();
    let sizes = live.session.sizes().await.unwrap();
    assert_eq!(sizes.records, 20, "{sizes:?}");

    let res = app
        .client
        .get(format!("{}/v1/calls/call_big", app.base))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let bytes = res.bytes().await.unwrap();
    // 20 records of two 1 KiB fields and their bookkeeping; 30 whole ones would be ~2 MB.
    assert!(
        bytes.len() < 80 * 1024,
        "the call's view is {} bytes",
        bytes.len()
    );
    let view: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(view["invocations_total"], json!(CALLS));
    let records = view["invocations"].as_array().unwrap();
    assert_eq!(records.len(), 20);
    assert_eq!(records[0]["function_call_id"], "fc_10");
    assert_eq!(records[19]["function_call_id"], "fc_29");
    for r in records {
        for field in ["arguments", "output"] {
            let text = r[field].as_str().unwrap();
            assert!(text.len() <= 1024, "{field} is {} bytes", text.len());
            let marker: Value = serde_json::from_str(text).unwrap();
            assert_eq!(marker["truncated"], true, "{marker}");
            assert!(marker["bytes"].as_u64().unwrap() > 30_000, "{marker}");
            assert!(!marker["preview"].as_str().unwrap().is_empty());
        }
    }

    // fc_0 is no longer in the session's memory nor in the view; repeated, it is answered
    // from the database, not run again.
    let again = invoke(&app, &key, "call_big", "fc_0", "echo", json!({"text": "x"})).await;
    assert_eq!(again["replayed"], true, "{again}");
    let (_, view) = app.get("/v1/calls/call_big", &key).await;
    assert_eq!(view["invocations_total"], json!(CALLS));

    // The call's node dies and another picks the call up: it loads only the newest records,
    // and still runs a new function call once and an old one not at all.
    crate::support::lease_lapsed(&app).await;
    let (base, state, stop, server) =
        crate::support::start_with(&app.url, app.key.clone(), small_records()).await;
    let other = TestApp::view(&app, base);
    let new = invoke(
        &other,
        &key,
        "call_big",
        "fc_new",
        "echo",
        json!({"text": "b"}),
    )
    .await;
    assert_eq!(
        (new["result"]["message"].clone(), new["replayed"].clone()),
        (json!("v1 b"), json!(false))
    );
    let again = invoke(
        &other,
        &key,
        "call_big",
        "fc_1",
        "echo",
        json!({"text": "x"}),
    )
    .await;
    assert_eq!(again["replayed"], true, "{again}");
    let picked = state.calls.get("acme", "call_big").unwrap();
    assert_eq!(picked.session.sizes().await.unwrap().records, 20);
    // Handed to the session itself (as the Realtime door does), an old id the session never
    // loaded is found in the journal and not run.
    picked.session.submit(Invocation {
        call_id: "call_big".into(),
        function_call_id: "fc_2".into(),
        name: "echo".into(),
        arguments_json: json!({"text": "x"}).to_string(),
        response_id: None,
        item_id: None,
    });
    // Looked up, it is the first run's answer (its text, not this one's "x"), not a new run.
    match picked.session.lookup("fc_2").await {
        Some(Lookup::Done(record)) => {
            assert!(
                record.output.contains("v1 002"),
                "fc_2 was run again: {record:?}"
            )
        }
        other => panic!("fc_2 is in the journal: {other:?}"),
    }
    let _ = stop.send(());
    let _ = server.await;
    state.store.close().await;
    let (_, view) = app.get("/v1/calls/call_big", &key).await;
    assert_eq!(view["invocations_total"], json!(CALLS + 1));

    // Ending the call shows the same bounded view.
    let (s, ended) = app.delete("/v1/calls/call_big", &key).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(ended["invocations"].as_array().unwrap().len(), 20);
    assert_eq!(ended["invocations_total"], json!(CALLS + 1));
}

#[tokio::test]
async fn records_are_capped_sqlite() {
    run(Backend::Sqlite, small_records(), false, records_are_capped).await;
}

#[tokio::test]
async fn records_are_capped_postgres() {
    run(
        Backend::Postgres,
        small_records(),
        false,
        records_are_capped,
    )
    .await;
}
