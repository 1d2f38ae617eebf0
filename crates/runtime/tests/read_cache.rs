//! A `read` tool's `cache_ttl_s`: within a call, an identical effect request is answered from
//! the call's cache (once, against a real upstream on loopback), marked as such in the run's
//! trace; a failure, another request, another call or an expired entry goes upstream again.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use switchboard_core::{CallInfo, Context, Limits, Tool};
use switchboard_runtime::effects::TransferLedger;
use switchboard_runtime::executor::Execution;
use switchboard_runtime::executor::{CallConfig, OpenGate};
use switchboard_runtime::http::{HttpConfig, HttpEffects};
use switchboard_runtime::read_cache::MAX_ENTRIES;
use switchboard_runtime::{Effects, Executor, Invocation, ToolEntry};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

fn lookup_tool(base: &str, ttl: Option<u32>) -> Arc<Tool> {
    let mut def = json!({
        "name": "order_status", "description": "Looks an order up.",
        "parameters": [{"name": "order", "type": "string", "required": true}],
        "actions": [{"type": "api_call", "method": "GET",
                     "url": format!("{base}/orders/{{{{params.order}}}}"),
                     "retry_count": 0}],
        "on_success": [{"type": "respond", "message": "It is {{response.body.status}}."}]
    });
    if let Some(ttl) = ttl {
        def["cache_ttl_s"] = json!(ttl);
    }
    Arc::new(Tool::parse(&def, &Limits::default()).unwrap_or_else(|e| panic!("{e}")))
}

fn config(tool: Arc<Tool>) -> CallConfig {
    let tools = HashMap::from([("order_status".to_owned(), ToolEntry::new(tool))]);
    CallConfig {
        tenant_id: "acme".into(),
        agents: HashMap::from([("main".to_owned(), tools)]),
        ..CallConfig::default()
    }
}

fn executor() -> Executor {
    let http = HttpEffects::new(HttpConfig {
        allow_private_networks: true,
        ..HttpConfig::default()
    })
    .unwrap();
    Executor::new(Arc::new(Effects::http_only(Arc::new(http))))
}

fn context() -> Context {
    let call = CallInfo {
        id: "call_1".into(),
        tenant_id: "acme".into(),
        agent: "main".into(),
        from: None,
        to: None,
        started_at: "2026-11-29T10:00:00Z".into(),
    };
    Context::new(&call, json!({"id": "u1"}))
}

async fn run(exec: &Executor, config: &CallConfig, fc: &str, order: &str) -> Execution {
    let inv = Invocation {
        call_id: "call_1".into(),
        function_call_id: fc.into(),
        name: "order_status".into(),
        arguments_json: json!({"order": order}).to_string(),
        response_id: None,
        item_id: None,
    };
    exec.execute(
        config,
        &context(),
        &inv,
        &OpenGate,
        &TransferLedger::default(),
    )
    .await
}

fn cached_flags(e: &Execution) -> Vec<bool> {
    e.trace
        .as_ref()
        .expect("a trace")
        .effects
        .iter()
        .map(|x| x.cached)
        .collect()
}

fn message(e: &Execution) -> String {
    let v = e.outcome.output();
    v["message"].as_str().unwrap_or_default().to_owned()
}

async fn upstream() -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/orders/A1"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"status": "shipped"})))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/orders/B2"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"status": "packed"})))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/orders/BAD"))
        .respond_with(ResponseTemplate::new(500))
        .mount(&server)
        .await;
    server
}

async fn hits(server: &MockServer, p: &str) -> usize {
    server
        .received_requests()
        .await
        .unwrap()
        .iter()
        .filter(|r| r.url.path() == p)
        .count()
}

#[tokio::test]
async fn an_identical_lookup_in_a_call_is_answered_from_its_cache() {
    let server = upstream().await;
    let tool = lookup_tool(&server.uri(), Some(60));
    let (exec, call) = (executor(), config(tool.clone()));

    let first = run(&exec, &call, "fc_1", "A1").await;
    let second = run(&exec, &call, "fc_2", "A1").await;
    assert_eq!(message(&first), "It is shipped.");
    assert_eq!(message(&second), "It is shipped.");
    assert_eq!(
        hits(&server, "/orders/A1").await,
        1,
        "the second is not sent"
    );
    assert_eq!(cached_flags(&first), [false]);
    assert_eq!(
        cached_flags(&second),
        [true],
        "marked on the record's trace"
    );

    // Another order is another request.
    let other = run(&exec, &call, "fc_3", "B2").await;
    assert_eq!(message(&other), "It is packed.");
    assert_eq!(hits(&server, "/orders/B2").await, 1);
    assert_eq!(cached_flags(&other), [false]);

    // Another call has a cache of its own.
    let other_call = config(tool);
    let fresh = run(&exec, &other_call, "fc_1", "A1").await;
    assert_eq!(cached_flags(&fresh), [false]);
    assert_eq!(hits(&server, "/orders/A1").await, 2);
}

#[tokio::test]
async fn failures_and_uncached_tools_go_upstream_every_time() {
    let server = upstream().await;
    let (exec, call) = (executor(), config(lookup_tool(&server.uri(), Some(60))));
    for fc in ["fc_1", "fc_2"] {
        let e = run(&exec, &call, fc, "BAD").await;
        assert_eq!(cached_flags(&e), [false]);
    }
    assert_eq!(hits(&server, "/orders/BAD").await, 2, "a 500 is not kept");
    assert!(call.read_cache.is_empty());

    let plain = config(lookup_tool(&server.uri(), None));
    for fc in ["fc_1", "fc_2"] {
        run(&exec, &plain, fc, "A1").await;
    }
    assert_eq!(
        hits(&server, "/orders/A1").await,
        2,
        "no cache_ttl_s, no cache"
    );
}

#[tokio::test]
async fn a_kept_outcome_expires_after_its_ttl() {
    let server = upstream().await;
    let (exec, call) = (executor(), config(lookup_tool(&server.uri(), Some(1))));
    run(&exec, &call, "fc_1", "A1").await;
    let kept = run(&exec, &call, "fc_2", "A1").await;
    assert_eq!(cached_flags(&kept), [true]);
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    let again = run(&exec, &call, "fc_3", "A1").await;
    assert_eq!(cached_flags(&again), [false]);
    assert_eq!(hits(&server, "/orders/A1").await, 2);
}

#[tokio::test]
async fn a_call_keeps_at_most_its_bound() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"status": "ok"})))
        .mount(&server)
        .await;
    let (exec, call) = (executor(), config(lookup_tool(&server.uri(), Some(60))));
    for i in 0..MAX_ENTRIES + 10 {
        run(&exec, &call, &format!("fc_{i}"), &format!("O{i}")).await;
    }
    assert_eq!(call.read_cache.len(), MAX_ENTRIES);
    // The oldest went first: the newest is still kept, the first is asked again.
    let newest = run(&exec, &call, "fc_n", &format!("O{}", MAX_ENTRIES + 9)).await;
    assert_eq!(cached_flags(&newest), [true]);
    let oldest = run(&exec, &call, "fc_o", "O0").await;
    assert_eq!(cached_flags(&oldest), [false]);
}

#[test]
fn only_read_tools_may_declare_a_cache() {
    let def = json!({
        "name": "place_order", "description": "Places an order.",
        "actions": [{"type": "api_call", "method": "POST", "url": "https://api.example.com/orders"}],
        "cache_ttl_s": 30
    });
    let err = Tool::parse(&def, &Limits::default())
        .unwrap_err()
        .to_string();
    assert!(err.contains("/cache_ttl_s"), "{err}");
    assert!(err.contains("side_effect `write`"), "{err}");
    assert!(err.contains("declare `\"side_effect\": \"read\"`"), "{err}");

    let def = json!({
        "name": "look", "description": "Looks.",
        "actions": [{"type": "api_call", "method": "GET", "url": "https://api.example.com/x"}],
        "cache_ttl_s": 0
    });
    let err = Tool::parse(&def, &Limits::default())
        .unwrap_err()
        .to_string();
    assert!(err.contains("/cache_ttl_s"), "{err}");
    assert!(err.contains("outside 1..=3600"), "{err}");
}
