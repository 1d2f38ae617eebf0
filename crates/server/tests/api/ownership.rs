//! One owner per call across nodes: a request that reaches a node not owning the call is passed
//! on to the owner (a repeat runs nothing twice, a cancel reaches the running tool, an MCP
//! request to the call's endpoint runs there, an end ends the owner's session), and a node takes a call over only when its owner is dead.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{Value, json};
use switchboard_server::ServerConfig;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::support::{Backend, TestApp, spawn_app_with, start_with};

fn config() -> ServerConfig {
    ServerConfig {
        tenant_rate_per_s: 10_000,
        ..ServerConfig::default()
    }
}

/// Tenant `acme` with a slow write (`place_order`) and a slow read (`track_order`).
async fn slow_tenant(app: &TestApp, upstream: &MockServer) -> String {
    let key = app.tenant("acme").await;
    let u = upstream.uri();
    for t in [
        json!({"name": "place_order", "description": "Place an order.",
               "parameters": [{"name": "item", "type": "string", "required": true}],
               "actions": [{"type": "api_call", "method": "POST", "url": format!("{u}/orders"),
                            "body": {"item": "{{params.item}}"}, "retry_count": 0}],
               "on_success": [{"type": "respond", "message": "Ordered."}]}),
        json!({"name": "track_order", "description": "Where an order is.",
               "actions": [{"type": "api_call", "method": "GET", "url": format!("{u}/slow"), "retry_count": 0}],
               "on_success": [{"type": "respond", "message": "Shipped."}]}),
    ] {
        let (s, body) = app.post("/v1/tools", &key, t).await;
        assert_eq!(s, StatusCode::CREATED, "{body}");
    }
    let agent = json!({"instructions": "Help.", "default": true,
                       "tools": [{"tool": "place_order"}, {"tool": "track_order"}]});
    let (s, body) = app.put("/v1/agents/assistant", &key, agent).await;
    assert_eq!(s, StatusCode::OK, "{body}");
    key
}

async fn upstream() -> MockServer {
    let upstream = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/orders"))
        .respond_with(
            ResponseTemplate::new(201)
                .set_body_json(json!({"order_id": "A-1"}))
                .set_delay(Duration::from_millis(800)),
        )
        .mount(&upstream)
        .await;
    Mock::given(method("GET"))
        .and(path("/slow"))
        .respond_with(ResponseTemplate::new(200).set_delay(Duration::from_secs(3)))
        .mount(&upstream)
        .await;
    upstream
}

/// A 2026-07-28 `tools/call` on a call's MCP endpoint: the status and the body.
async fn mcp_call(app: &TestApp, key: &str, call: &str, params: Value) -> (StatusCode, String) {
    let name = params["name"].as_str().unwrap_or_default().to_owned();
    let mut params = params;
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    let r = app
        .client
        .post(format!("{}/v1/calls/{call}/mcp", app.base))
        .bearer_auth(key)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", name)
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}))
        .send()
        .await
        .unwrap();
    (r.status(), r.text().await.unwrap())
}

#[tokio::test]
async fn requests_reaching_another_node_are_served_by_the_owner() {
    for backend in [Backend::Sqlite, Backend::Postgres] {
        let a = spawn_app_with(backend, config()).await;
        let (base, b_state, stop, server) = start_with(&a.url, a.key.clone(), config()).await;
        let b = TestApp::view(&a, base);
        let upstream = upstream().await;
        let key = slow_tenant(&a, &upstream).await;
        let (s, body) = a.post("/v1/calls", &key, json!({"call_id": "c1"})).await;
        assert_eq!(s, StatusCode::CREATED, "{body}");

        // The slow write runs on A; the client's repeat reaches B, which must not run it too.
        let order = json!({"function_call_id": "f1", "name": "place_order", "arguments": {"item": "pizza"}});
        let (first, repeat) = tokio::join!(
            a.post("/v1/calls/c1/invocations", &key, order.clone()),
            async {
                tokio::time::sleep(Duration::from_millis(200)).await;
                b.post("/v1/calls/c1/invocations", &key, order.clone())
                    .await
            }
        );
        assert_eq!(
            (first.0, repeat.0),
            (StatusCode::OK, StatusCode::OK),
            "{first:?} {repeat:?}"
        );
        assert_eq!(
            first.1["output"], repeat.1["output"],
            "{first:?} {repeat:?}"
        );
        let posts = upstream
            .received_requests()
            .await
            .unwrap()
            .iter()
            .filter(|r| r.method.as_str() == "POST")
            .count();
        assert_eq!(posts, 1, "the write ran on two nodes");
        assert!(
            b_state.calls.get("acme", "c1").is_none(),
            "B served A's call"
        );

        // A cancel sent to B reaches the read running on A.
        let track = json!({"function_call_id": "f2", "name": "track_order", "response_id": "r1"});
        let started = Instant::now();
        let (tracked, cancelled) =
            tokio::join!(a.post("/v1/calls/c1/invocations", &key, track), async {
                tokio::time::sleep(Duration::from_millis(300)).await;
                b.post("/v1/calls/c1/responses/r1/cancel", &key, json!({}))
                    .await
            });
        assert_eq!(cancelled.0, StatusCode::ACCEPTED, "{cancelled:?}");
        assert_eq!(tracked.1["error"], "cancelled", "{tracked:?}");
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "the read ran to its end"
        );

        // The call's MCP endpoint on B serves A's call: the tool runs there, once, in c1.
        let (s, answer) = mcp_call(
            &b,
            &key,
            "c1",
            json!({"name": "place_order", "arguments": {"item": "soup"}}),
        )
        .await;
        assert_eq!(s, StatusCode::OK, "{answer}");
        assert!(
            answer.contains("\"switchboard/call_id\":\"c1\""),
            "{answer}"
        );
        assert!(
            b_state.calls.get("acme", "c1").is_none(),
            "B served A's call over MCP"
        );
        let (_, call) = a.get("/v1/calls/c1", &key).await;
        assert_eq!(call["invocations"].as_array().unwrap().len(), 3, "{call}");

        // An end sent to B ends the owner's session.
        let (s, ended) = b.delete("/v1/calls/c1", &key).await;
        assert_eq!(
            (s, ended["status"].clone()),
            (StatusCode::OK, json!("ended")),
            "{ended}"
        );
        assert!(
            a.state.calls.get("acme", "c1").is_none(),
            "A still serves the ended call"
        );
        let _ = stop.send(());
        let _ = server.await;
        b_state.store.close().await;
        a.stop().await;
    }
}

#[tokio::test]
async fn a_node_that_lost_its_call_writes_nothing_and_answers_nothing() {
    for backend in [Backend::Sqlite, Backend::Postgres] {
        // A's heartbeat would revive it: a long lease keeps it quiet for the test.
        let a_config = ServerConfig {
            lease: Duration::from_secs(3600),
            ..config()
        };
        let a = spawn_app_with(backend, a_config).await;
        let (base, b_state, stop, server) = start_with(&a.url, a.key.clone(), config()).await;
        let b = TestApp::view(&a, base);
        let upstream = upstream().await;
        let key = slow_tenant(&a, &upstream).await;
        a.post("/v1/calls", &key, json!({"call_id": "c1"})).await;
        // A runs the slow write, and is cut off (its lease ends) while the upstream holds it.
        let order = json!({"function_call_id": "f1", "name": "place_order", "arguments": {"item": "pizza"}});
        let on_a = tokio::spawn({
            let (client, url, key, order) = (
                a.client.clone(),
                format!("{}/v1/calls/c1/invocations", a.base),
                key.clone(),
                order.clone(),
            );
            async move {
                let r = client
                    .post(url)
                    .bearer_auth(key)
                    .json(&order)
                    .send()
                    .await
                    .unwrap();
                (r.status(), r.json::<Value>().await.unwrap())
            }
        });
        tokio::time::sleep(Duration::from_millis(200)).await;
        crate::support::lease_lapsed(&a).await;
        // B takes the call over: it resumes the run from its checkpoint (the same key).
        let (s, on_b) = b.post("/v1/calls/c1/invocations", &key, order).await;
        assert_eq!(
            (s, on_b["ok"].clone()),
            (StatusCode::OK, json!(true)),
            "{on_b}"
        );
        // A's run ends after; its commit is fenced off: its waiter is told the call moved.
        let (status, body) = on_a.await.unwrap();
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
        let (_, view) = b.get("/v1/calls/c1", &key).await;
        assert_eq!(view["invocations_total"], 1, "{view}");
        let keys: Vec<String> = upstream
            .received_requests()
            .await
            .unwrap()
            .iter()
            .filter_map(|r| {
                r.headers
                    .get("idempotency-key")
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned)
            })
            .collect();
        assert!(
            keys.len() <= 2 && keys.windows(2).all(|w| w[0] == w[1]),
            "{keys:?}"
        );
        let _ = stop.send(());
        let _ = server.await;
        b_state.store.close().await;
        a.stop().await;
    }
}

/// A node that accepts connections and reads what it is sent, and never answers.
async fn silent_node() -> (String, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = format!("http://{}", listener.local_addr().unwrap());
    let task = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((mut socket, _)) = listener.accept().await {
            held.push(tokio::spawn(async move {
                let mut sink = [0u8; 4096];
                while let Ok(n) = tokio::io::AsyncReadExt::read(&mut socket, &mut sink).await {
                    if n == 0 {
                        break;
                    }
                }
                std::future::pending::<()>().await;
            }));
        }
    });
    (address, task)
}

#[tokio::test]
async fn a_request_passed_to_an_owner_that_never_answers_gets_a_503_near_its_tools_deadline() {
    for backend in [Backend::Sqlite, Backend::Postgres] {
        let config = ServerConfig {
            lease: Duration::from_secs(3600),
            commit_retry: Duration::from_millis(300),
            ..config()
        };
        let a = spawn_app_with(backend, config.clone()).await;
        let (base, b_state, stop, server) = start_with(&a.url, a.key.clone(), config).await;
        let b = TestApp::view(&a, base);
        let key = a.tenant("acme").await;
        let quick = json!({"name": "quick_order", "description": "Order.", "timeout": 1,
            "actions": [{"type": "api_call", "method": "POST", "url": "http://127.0.0.1:9/orders", "retry_count": 0}]});
        assert_eq!(
            a.post("/v1/tools", &key, quick).await.0,
            StatusCode::CREATED
        );
        let agent =
            json!({"instructions": "Help.", "default": true, "tools": [{"tool": "quick_order"}]});
        assert_eq!(
            a.put("/v1/agents/assistant", &key, agent).await.0,
            StatusCode::OK
        );
        a.post("/v1/calls", &key, json!({"call_id": "c1"})).await;
        // The call passes to a node that is alive by its lease and answers nothing.
        let (address, silent) = silent_node().await;
        let store = &a.state.store;
        store
            .register_node("node_silent", Some(&address), Duration::from_secs(3600))
            .await
            .unwrap();
        crate::support::lease_lapsed(&a).await;
        let owner = store.call_owner("acme", "c1").await.unwrap().unwrap();
        store
            .take_over_call("acme", "c1", "node_silent", owner.fence)
            .await
            .unwrap()
            .expect("taken over by the silent node");
        let started = Instant::now();
        let (s, body) = b
            .post(
                "/v1/calls/c1/invocations",
                &key,
                json!({"function_call_id": "f1", "name": "quick_order"}),
            )
            .await;
        let waited = started.elapsed();
        assert_eq!(s, StatusCode::SERVICE_UNAVAILABLE, "{body}");
        assert_eq!(body["error"]["details"]["retry_after_s"], 1, "{body}");
        // The tool's 1 s, the commit's retry (0.3 s) and a second of slack; not minutes.
        assert!(
            waited >= Duration::from_secs(1) && waited < Duration::from_secs(4),
            "{waited:?} {body}"
        );
        silent.abort();
        let _ = stop.send(());
        let _ = server.await;
        b_state.store.close().await;
        a.stop().await;
    }
}
