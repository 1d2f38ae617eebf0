//! Traces against a real OTLP/HTTP receiver: the spans the server exports, decoded with the
//! official protobuf definitions (`opentelemetry-proto`), continue the caller's trace through
//! the invocation to the upstream (from the HTTP door, and through both MCP doors); no argument
//! reaches a span; a collector that is down or silent changes nothing for the calls.
//!
//! A test binary of its own (the API suite's `spawn_app` shared by path), so it builds alone.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

// The API suite's harness: this binary uses a part of it.
#[allow(dead_code)]
#[path = "api/support.rs"]
mod support;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use axum::routing::post;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use reqwest::StatusCode;
use serde_json::{Value, json};
use switchboard_server::ServerConfig;
use switchboard_server::traces::{TraceExport, TraceSettings};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::support::{Backend, TestApp, spawn_app_with};

const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT_ID: &str = "00f067aa0ba902b7";
/// Argument values: none may appear in any span.
const ITEM: &str = "falafel-wrap-7731";
const REFERENCE: &str = "ref-arg-99115";

/// What the receiver took: every request decoded, and their raw sizes.
#[derive(Default)]
struct Received {
    requests: Vec<ExportTraceServiceRequest>,
}

/// An OTLP/HTTP receiver on 127.0.0.1:0 (`POST /v1/traces`, protobuf bodies).
async fn receiver() -> (String, Arc<Mutex<Received>>) {
    let received = Arc::new(Mutex::new(Received::default()));
    async fn take(State(r): State<Arc<Mutex<Received>>>, body: Bytes) -> StatusCode {
        match ExportTraceServiceRequest::decode(body) {
            Ok(req) => {
                r.lock().unwrap().requests.push(req);
                StatusCode::OK
            }
            Err(_) => StatusCode::BAD_REQUEST,
        }
    }
    let app = axum::Router::new()
        .route("/v1/traces", post(take))
        .with_state(Arc::clone(&received));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (base, received)
}

fn spans(r: &Arc<Mutex<Received>>) -> Vec<Span> {
    r.lock()
        .unwrap()
        .requests
        .iter()
        .flat_map(|req| req.resource_spans.iter())
        .flat_map(|rs| rs.scope_spans.iter())
        .flat_map(|ss| ss.spans.iter().cloned())
        .collect()
}

fn attr(span: &Span, key: &str) -> Option<AnyValue> {
    span.attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.clone())
        .and_then(|v| v.value)
}

fn text(span: &Span, key: &str) -> String {
    match attr(span, key) {
        Some(AnyValue::StringValue(s)) => s,
        other => panic!("{key}: {other:?} in {span:?}"),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The export to `endpoint`, with a short batch delay so a test does not wait for it.
fn export(vars: &[(&str, &str)]) -> (TraceExport, switchboard_runtime::Traces) {
    let map: HashMap<String, String> = vars
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .chain([("OTEL_BSP_SCHEDULE_DELAY".to_owned(), "100".to_owned())])
        .collect();
    let settings = TraceSettings::read(|k| map.get(k).cloned(), None)
        .unwrap()
        .expect("traces on");
    TraceExport::start(&settings).unwrap()
}

async fn app_with(backend: Backend, traces: switchboard_runtime::Traces) -> TestApp {
    spawn_app_with(
        backend,
        ServerConfig {
            tenant_rate_per_s: 10_000,
            traces,
            ..ServerConfig::default()
        },
    )
    .await
}

/// A tenant whose default agent has `place_order`: an `api_call` to `upstream` with one
/// argument in the body and one in the query.
async fn shop(app: &TestApp, upstream: &MockServer) -> String {
    let key = app.tenant("shop").await;
    let tool = json!({
        "name": "place_order",
        "description": "Order an item",
        "parameters": [
            {"name": "item", "type": "string", "required": true},
            {"name": "reference", "type": "string", "required": true}
        ],
        "side_effect": "write",
        "dedupe_window_s": 0,
        "actions": [{"type": "api_call", "method": "POST",
            "url": format!("{}/orders?ref={{{{params.reference}}}}", upstream.uri()),
            "body": {"item": "{{params.item}}"}}],
        "on_success": [{"type": "respond", "message": "Ordered."}]
    });
    let (s, body) = app.post("/v1/tools", &key, tool).await;
    assert_eq!(s, StatusCode::CREATED, "{body}");
    // Guards wide enough for the measurement's hundreds of calls a minute.
    let agent = json!({"instructions": "Sell.", "tools": [{"tool": "place_order"}],
        "default": true, "guards": {"calls_per_minute": 10_000}});
    let (s, body) = app.put("/v1/agents/assistant", &key, agent).await;
    assert_eq!(s, StatusCode::OK, "{body}");
    key
}

async fn upstream() -> MockServer {
    let upstream = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/orders"))
        .respond_with(ResponseTemplate::new(201).set_body_json(json!({"order": "A-1"})))
        .mount(&upstream)
        .await;
    upstream
}

/// POSTs with the given extra headers; returns the status and JSON body.
async fn post_with(
    app: &TestApp,
    path: &str,
    key: &str,
    headers: &[(&str, &str)],
    body: Value,
) -> (StatusCode, Value) {
    let mut req = app
        .client
        .post(format!("{}{path}", app.base))
        .bearer_auth(key)
        .json(&body);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status();
    (status, resp.json().await.unwrap_or(Value::Null))
}

async fn order(app: &TestApp, key: &str, call: &str, fc: &str, headers: &[(&str, &str)]) -> Value {
    let (s, body) = post_with(
        app,
        &format!("/v1/calls/{call}/invocations"),
        key,
        headers,
        json!({"function_call_id": fc, "name": "place_order",
            // Each function call its own reference, so no runaway guard takes them for a loop.
            "arguments": {"item": ITEM, "reference": format!("{REFERENCE}-{fc}")}}),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{body}");
    body
}

async fn one_trace_from_caller_to_upstream(backend: Backend) {
    let (base, received) = receiver().await;
    let (export, traces) = export(&[("OTEL_EXPORTER_OTLP_ENDPOINT", &base)]);
    let app = app_with(backend, traces).await;
    let upstream = upstream().await;
    let key = shop(&app, &upstream).await;
    let call_parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    let (s, started) = post_with(
        &app,
        "/v1/calls",
        &key,
        &[("traceparent", call_parent)],
        json!({"call_id": "c1"}),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{started}");
    let traceparent = format!("00-{TRACE_ID}-{PARENT_ID}-01");
    let answer = order(
        &app,
        &key,
        "c1",
        "f1",
        &[("traceparent", &traceparent), ("tracestate", "vendor=abc")],
    )
    .await;
    assert_eq!(answer["ok"], true, "{answer}");
    // A malformed traceparent is ignored: the call is answered as ever.
    let bad = order(
        &app,
        &key,
        "c1",
        "f2",
        &[("traceparent", "00-zz-not-a-trace-01")],
    )
    .await;
    assert_eq!(bad["ok"], true, "{bad}");
    assert_eq!(app.delete("/v1/calls/c1", &key).await.0, StatusCode::OK);

    // The spans arrive within a few batch delays.
    let deadline = Instant::now() + Duration::from_secs(15);
    let all = loop {
        let all = spans(&received);
        let names: Vec<&str> = all.iter().map(|s| s.name.as_str()).collect();
        if names
            .iter()
            .filter(|n| **n == "execute_tool place_order")
            .count()
            == 2
            && names.iter().filter(|n| **n == "POST").count() == 2
            && names.contains(&"call")
        {
            break all;
        }
        assert!(Instant::now() < deadline, "spans so far: {names:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };

    // The invocation continues the caller's trace, under the caller's span.
    let inv = all
        .iter()
        .find(|s| s.name == "execute_tool place_order" && hex(&s.trace_id) == TRACE_ID)
        .expect("the invocation's span in the caller's trace");
    assert_eq!(hex(&inv.parent_span_id), PARENT_ID);
    assert_eq!(text(inv, "gen_ai.tool.name"), "place_order");
    assert_eq!(text(inv, "gen_ai.tool.call.id"), "f1");
    assert_eq!(text(inv, "switchboard.tenant.id"), "shop");
    assert_eq!(text(inv, "switchboard.call.id"), "c1");
    assert_eq!(text(inv, "switchboard.outcome"), "ok");
    assert_eq!(text(inv, "switchboard.tool.side_effect"), "write");
    assert_eq!(
        attr(inv, "switchboard.tool.version"),
        Some(AnyValue::IntValue(1))
    );
    assert_eq!(
        attr(inv, "switchboard.interrupted"),
        Some(AnyValue::BoolValue(false))
    );
    assert_eq!(
        attr(inv, "switchboard.duplicate"),
        Some(AnyValue::BoolValue(false))
    );
    assert!(
        matches!(attr(inv, "switchboard.latency_ms"), Some(AnyValue::DoubleValue(ms)) if ms > 0.0)
    );
    // It is linked to the call's span, whose parent is the call start's caller.
    let call = all
        .iter()
        .find(|s| s.name == "call")
        .expect("the call's span");
    assert_eq!(hex(&call.trace_id), "0af7651916cd43dd8448eb211c80319c");
    assert_eq!(hex(&call.parent_span_id), "b7ad6b7169203331");
    assert!(
        inv.links.iter().any(|l| l.span_id == call.span_id),
        "{inv:?}"
    );

    // The api_call is its child, with the HTTP client conventions.
    let http = all
        .iter()
        .find(|s| s.name == "POST" && s.parent_span_id == inv.span_id)
        .expect("the api_call's span under the invocation");
    assert_eq!(hex(&http.trace_id), TRACE_ID);
    assert_eq!(text(http, "http.request.method"), "POST");
    assert_eq!(text(http, "server.address"), "127.0.0.1");
    assert_eq!(
        text(http, "url.full"),
        format!("{}/orders?ref=REDACTED", upstream.uri())
    );
    assert_eq!(
        attr(http, "http.response.status_code"),
        Some(AnyValue::IntValue(201))
    );

    // The upstream was told the api_call's span as its parent.
    let requests = upstream.received_requests().await.unwrap();
    let sent: Vec<String> = requests
        .iter()
        .filter_map(|r| r.headers.get("traceparent"))
        .map(|v| v.to_str().unwrap().to_owned())
        .collect();
    assert_eq!(sent.len(), 2, "{sent:?}");
    assert!(
        sent.contains(&format!("00-{TRACE_ID}-{}-01", hex(&http.span_id))),
        "{sent:?}"
    );
    assert!(requests.iter().any(|r| {
        r.headers
            .get("tracestate")
            .is_some_and(|v| v == "vendor=abc")
    }));

    // The one with a malformed traceparent is a trace of the call's own.
    let other = all
        .iter()
        .find(|s| s.name == "execute_tool place_order" && hex(&s.trace_id) != TRACE_ID)
        .expect("the second invocation's span");
    assert_eq!(other.trace_id, call.trace_id);
    assert_eq!(other.parent_span_id, call.span_id);

    // No argument value anywhere in what was exported.
    let everything = format!("{:?}", received.lock().unwrap().requests);
    for arg in [ITEM, REFERENCE] {
        assert!(!everything.contains(arg), "{arg} was exported");
    }
    app.stop().await;
    tokio::task::spawn_blocking(move || export.shutdown())
        .await
        .unwrap();
}

#[tokio::test]
async fn one_trace_from_caller_to_upstream_sqlite() {
    one_trace_from_caller_to_upstream(Backend::Sqlite).await;
}

#[tokio::test]
async fn one_trace_from_caller_to_upstream_postgres() {
    one_trace_from_caller_to_upstream(Backend::Postgres).await;
}

/// One raw JSON-RPC request to an agent's MCP endpoint; the answer with `id`.
async fn mcp_request(
    app: &TestApp,
    key: &str,
    agent: &str,
    session: Option<&str>,
    body: Value,
) -> (reqwest::header::HeaderMap, String) {
    let mut req = app
        .client
        .post(format!("{}/v1/agents/{agent}/mcp", app.base))
        .bearer_auth(key)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-06-18")
        .json(&body);
    if let Some(s) = session {
        req = req.header("mcp-session-id", s);
    }
    let resp = req.send().await.unwrap();
    assert!(resp.status().is_success(), "{}", resp.status());
    let headers = resp.headers().clone();
    (headers, resp.text().await.unwrap())
}

/// The JSON-RPC message with `id` in an MCP POST's answer (an SSE stream or plain JSON).
fn rpc_answer(body: &str, id: u64) -> Value {
    body.lines()
        .map(|l| l.strip_prefix("data:").unwrap_or(l).trim())
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|m| m["id"] == id)
        .unwrap_or_else(|| panic!("no answer {id} in {body}"))
}

/// The trace goes through both MCP doors: an MCP client's `tools/call` carries the caller's
/// span in `_meta`; the tool it runs calls a tenant's MCP server (here Switchboard's own door
/// for another agent), which is sent the effect's span (in `_meta` and as headers) and
/// continues it to the upstream. Every span is in the caller's trace, each under the one
/// before it.
#[tokio::test]
async fn one_trace_through_the_mcp_doors_both_ways() {
    let (base, received) = receiver().await;
    let (export, traces) = export(&[("OTEL_EXPORTER_OTLP_ENDPOINT", &base)]);
    let app = app_with(Backend::Sqlite, traces).await;
    let upstream = upstream().await;
    let key = shop(&app, &upstream).await;
    let server = json!({"url": format!("{}/v1/agents/assistant/mcp", app.base),
        "headers": {"Authorization": format!("Bearer {key}")}});
    let (s, shown) = app.put("/v1/mcp-servers/self", &key, server).await;
    assert_eq!(s, StatusCode::OK, "{shown}");
    let relay = json!({"name": "relay", "description": "Orders through the shop's MCP server",
        "parameters": [
            {"name": "item", "type": "string", "required": true},
            {"name": "reference", "type": "string", "required": true}
        ],
        "actions": [{"type": "mcp.call", "server": "self", "tool": "place_order",
            "arguments": {"item": "{{params.item}}", "reference": "{{params.reference}}"}}]});
    let (s, body) = app.post("/v1/tools", &key, relay).await;
    assert_eq!(s, StatusCode::CREATED, "{body}");
    let front = json!({"instructions": "Relay.", "tools": [{"tool": "relay"}]});
    let (s, body) = app.put("/v1/agents/front", &key, front).await;
    assert_eq!(s, StatusCode::OK, "{body}");

    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}});
    let (headers, _) = mcp_request(&app, &key, "front", None, init).await;
    let session = headers["mcp-session-id"].to_str().unwrap().to_owned();
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    mcp_request(&app, &key, "front", Some(&session), initialized).await;
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "relay", "arguments": {"item": ITEM, "reference": REFERENCE},
        "_meta": {"traceparent": format!("00-{TRACE_ID}-{PARENT_ID}-01"), "tracestate": "vendor=abc",
            "switchboard/function_call_id": "fc-relay-1"}}});
    let (_, body) = mcp_request(&app, &key, "front", Some(&session), call).await;
    let answer = rpc_answer(&body, 2);
    assert_eq!(answer["result"]["isError"], false, "{answer}");
    // The rest of `_meta` is read too: the function call keeps the id the client gave it.
    assert_eq!(
        answer["result"]["_meta"]["switchboard/function_call_id"], "fc-relay-1",
        "{answer}"
    );

    let deadline = Instant::now() + Duration::from_secs(15);
    let all = loop {
        let all = spans(&received);
        let names: Vec<&str> = all.iter().map(|s| s.name.as_str()).collect();
        if [
            "execute_tool relay",
            "tools/call place_order",
            "execute_tool place_order",
            "POST",
        ]
        .iter()
        .all(|n| names.contains(n))
        {
            break all;
        }
        assert!(Instant::now() < deadline, "spans so far: {names:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let named = |name: &str| {
        all.iter()
            .find(|s| s.name == name)
            .unwrap_or_else(|| panic!("no span {name}"))
    };
    let outer = named("execute_tool relay");
    let effect = named("tools/call place_order");
    let inner = named("execute_tool place_order");
    let http = named("POST");
    for span in [outer, effect, inner, http] {
        assert_eq!(hex(&span.trace_id), TRACE_ID, "{}", span.name);
    }
    assert_eq!(hex(&outer.parent_span_id), PARENT_ID);
    assert_eq!(effect.parent_span_id, outer.span_id);
    assert_eq!(text(effect, "mcp.method.name"), "tools/call");
    assert_eq!(text(effect, "switchboard.mcp.server"), "self");
    assert_eq!(inner.parent_span_id, effect.span_id, "{inner:?}");
    assert_eq!(http.parent_span_id, inner.span_id);

    // The upstream was told the api_call's span, in the caller's trace.
    let requests = upstream.received_requests().await.unwrap();
    let sent: Vec<&str> = requests
        .iter()
        .filter_map(|r| r.headers.get("traceparent"))
        .map(|v| v.to_str().unwrap())
        .collect();
    assert_eq!(sent, [format!("00-{TRACE_ID}-{}-01", hex(&http.span_id))]);
    let everything = format!("{:?}", received.lock().unwrap().requests);
    for arg in [ITEM, REFERENCE] {
        assert!(!everything.contains(arg), "{arg} was exported");
    }
    app.stop().await;
    tokio::task::spawn_blocking(move || export.shutdown())
        .await
        .unwrap();
}

/// Calls answer as fast with the collector refusing connections, or accepting them and never
/// answering (and a queue of two spans, always full), as without traces.
#[tokio::test]
async fn a_down_collector_costs_the_calls_nothing() {
    let refused = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", l.local_addr().unwrap())
    };
    // Accepted by the kernel, never read: every export waits for its timeout.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let blackhole = format!("http://{}", silent.local_addr().unwrap());
    for endpoint in [refused.as_str(), blackhole.as_str()] {
        let (export, traces) = export(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint),
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "2000"),
            ("OTEL_BSP_MAX_QUEUE_SIZE", "2"),
        ]);
        let app = app_with(Backend::Sqlite, traces).await;
        let upstream = upstream().await;
        let key = shop(&app, &upstream).await;
        let (s, body) = app.post("/v1/calls", &key, json!({"call_id": "c1"})).await;
        assert_eq!(s, StatusCode::CREATED, "{body}");
        let traceparent = format!("00-{TRACE_ID}-{PARENT_ID}-01");
        for i in 0..20 {
            let started = Instant::now();
            let answer = order(
                &app,
                &key,
                "c1",
                &format!("f{i}"),
                &[("traceparent", &traceparent)],
            )
            .await;
            assert_eq!(answer["ok"], true, "{endpoint}: {answer}");
            assert!(
                started.elapsed() < Duration::from_secs(1),
                "{endpoint}: {:?}",
                started.elapsed()
            );
        }
        assert_eq!(upstream.received_requests().await.unwrap().len(), 20);
        app.stop().await;
        tokio::task::spawn_blocking(move || export.shutdown())
            .await
            .unwrap();
    }
    drop(silent);
}

/// What exporting costs a tool call: the same `api_call` tool called `N` times in one call,
/// without traces and with every span exported to a local receiver. Prints the mean and the
/// 99th percentile of each (figures in docs/benchmarks.md); ignored by default.
#[tokio::test]
#[ignore = "a measurement, not a check: run it with --ignored --nocapture"]
async fn trace_export_cost() {
    const N: usize = 400;
    let (base, received) = receiver().await;
    for on in [false, true, false, true] {
        let (export, traces) = if on {
            let (e, t) = export(&[("OTEL_EXPORTER_OTLP_ENDPOINT", &base)]);
            (Some(e), t)
        } else {
            (None, switchboard_runtime::Traces::off())
        };
        let app = app_with(Backend::Sqlite, traces).await;
        let upstream = upstream().await;
        let key = shop(&app, &upstream).await;
        let (s, body) = app.post("/v1/calls", &key, json!({"call_id": "c1"})).await;
        assert_eq!(s, StatusCode::CREATED, "{body}");
        let traceparent = format!("00-{TRACE_ID}-{PARENT_ID}-01");
        let mut times = Vec::with_capacity(N);
        for i in 0..N {
            let started = Instant::now();
            let answer = order(
                &app,
                &key,
                "c1",
                &format!("f{i}"),
                &[("traceparent", &traceparent)],
            )
            .await;
            assert_eq!(answer["ok"], true, "{answer}");
            times.push(started.elapsed().as_secs_f64() * 1000.0);
        }
        times.sort_by(f64::total_cmp);
        let mean = times.iter().sum::<f64>() / N as f64;
        println!(
            "traces {}: {N} tool calls, mean {mean:.3} ms, p50 {:.3} ms, p99 {:.3} ms",
            if on { "exported" } else { "off" },
            times[N / 2],
            times[N * 99 / 100]
        );
        app.stop().await;
        if let Some(e) = export {
            tokio::task::spawn_blocking(move || e.shutdown())
                .await
                .unwrap();
        }
    }
    // 400 invocations, 400 api_calls and the call, in each of the two runs with traces.
    println!("spans received: {}", spans(&received).len());
}
