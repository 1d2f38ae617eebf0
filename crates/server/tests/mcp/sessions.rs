//! An MCP session belongs to the tenant and agent that opened it: another tenant's key, or
//! another agent's path, finds no such session, whatever it sends. A session closes when its
//! client falls silent, and its streams end on their own.

use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use switchboard_server::ServerConfig;
use switchboard_server::listener::ConnectionLimits;
use switchboard_server::mcp::McpSettings;

use super::support::{Backend, TestApp, acme, spawn_app, spawn_app_with};
use super::{endpoint, rpc_answer, wait_for_status};
use crate::both_backends;

/// One raw request to an agent's MCP endpoint, in a session or not.
async fn send(
    app: &TestApp,
    key: &str,
    agent: &str,
    session: Option<&str>,
    method: Method,
    body: Option<Value>,
) -> reqwest::Response {
    let mut req = app
        .client
        .request(method, endpoint(app, agent))
        .bearer_auth(key)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-06-18");
    if let Some(s) = session {
        req = req.header("mcp-session-id", s);
    }
    if let Some(b) = body {
        req = req.json(&b);
    }
    req.send().await.unwrap()
}

/// Opens a session for `key` on `agent` and returns its id.
async fn open(app: &TestApp, key: &str, agent: &str) -> String {
    let init = send(app, key, agent, None, Method::POST, Some(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}))).await;
    assert_eq!(init.status(), StatusCode::OK);
    let session = init.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let _ = init.text().await.unwrap();
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let ack = send(
        app,
        key,
        agent,
        Some(&session),
        Method::POST,
        Some(initialized),
    )
    .await;
    assert!(ack.status().is_success(), "{}", ack.status());
    session
}

fn list(id: u64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/list"})
}

fn save_meal(id: u64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": "save_meal", "arguments": {"meal_type": "lunch", "dishes": ["soup"]}}})
}

/// The answer with `id` of a request in a session.
async fn answer(
    app: &TestApp,
    key: &str,
    agent: &str,
    session: &str,
    body: Value,
    id: u64,
) -> Value {
    let r = send(app, key, agent, Some(session), Method::POST, Some(body)).await;
    assert_eq!(r.status(), StatusCode::OK);
    rpc_answer(&r.text().await.unwrap(), id)
}

both_backends!(an_mcp_session_is_its_tenants_and_agents_alone, |app| {
    let key = acme(&app, "acme").await;
    let other = acme(&app, "globex").await;
    let (s, body) = app
        .put(
            "/v1/agents/helper",
            &key,
            json!({"instructions": "Help.", "tools": [{"tool": "save_meal"}]}),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{body}");
    let session = open(&app, &key, "assistant").await;
    let called = answer(&app, &key, "assistant", &session, save_meal(2), 2).await;
    let call_id = called["result"]["_meta"]["switchboard/call_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{called}"))
        .to_owned();

    // Another tenant with an agent of the same name, and the same tenant on another agent:
    // the session is not found, whatever the request.
    for (who, key, agent) in [
        ("another tenant", other.as_str(), "assistant"),
        ("another agent", key.as_str(), "helper"),
    ] {
        let requests = [
            ("POST tools/list", Method::POST, Some(list(3))),
            ("POST tools/call", Method::POST, Some(save_meal(4))),
            ("GET stream", Method::GET, None),
            ("DELETE", Method::DELETE, None),
        ];
        for (what, method, body) in requests {
            let r = send(&app, key, agent, Some(&session), method, body).await;
            let status = r.status();
            let text = r.text().await.unwrap();
            assert_eq!(status, StatusCode::NOT_FOUND, "{who}, {what}: {text}");
            assert!(!text.contains("save_meal"), "{who}, {what}: {text}");
        }
    }

    // The session and its call go on for their owner, untouched.
    let listed = answer(&app, &key, "assistant", &session, list(5), 5).await;
    assert!(
        listed["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "save_meal"),
        "{listed}"
    );
    let again = answer(&app, &key, "assistant", &session, save_meal(6), 6).await;
    assert_eq!(again["result"]["_meta"]["switchboard/call_id"], call_id);
    let (_, call) = app.get(&format!("/v1/calls/{call_id}"), &key).await;
    assert_eq!(
        (
            call["status"].clone(),
            call["invocations"].as_array().unwrap().len()
        ),
        (json!("active"), 2),
        "{call}"
    );
    assert_eq!(
        app.get(&format!("/v1/calls/{call_id}"), &other).await.0,
        StatusCode::NOT_FOUND
    );

    // Its owner ends it; then it is gone for everyone.
    let closed = send(
        &app,
        &key,
        "assistant",
        Some(&session),
        Method::DELETE,
        None,
    )
    .await;
    assert!(closed.status().is_success(), "{}", closed.status());
    wait_for_status(&app, &key, &call_id, "ended").await;
    let gone = send(
        &app,
        &key,
        "assistant",
        Some(&session),
        Method::POST,
        Some(list(7)),
    )
    .await;
    assert_eq!(gone.status(), StatusCode::NOT_FOUND);
});

#[tokio::test]
async fn a_tenant_may_hold_only_so_many_mcp_sessions() {
    let config = ServerConfig {
        tenant_rate_per_s: 10_000,
        mcp: McpSettings {
            max_sessions_per_tenant: 2,
            ..McpSettings::default()
        },
        ..ServerConfig::default()
    };
    let app = spawn_app_with(Backend::Sqlite, config).await;
    let key = acme(&app, "acme").await;
    let other = acme(&app, "globex").await;
    let first = open(&app, &key, "assistant").await;
    open(&app, &key, "assistant").await;
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}});
    let refused = send(&app, &key, "assistant", None, Method::POST, Some(init)).await;
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    let body: Value = refused.json().await.unwrap();
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("already has 2 open MCP sessions"),
        "{body}"
    );
    // Requests in the open sessions go on; other tenants are not held back.
    answer(&app, &key, "assistant", &first, list(2), 2).await;
    open(&app, &other, "assistant").await;
    // Closing one makes room.
    let closed = send(&app, &key, "assistant", Some(&first), Method::DELETE, None).await;
    assert!(closed.status().is_success(), "{}", closed.status());
    open(&app, &key, "assistant").await;
    app.stop().await;
}

/// Reads an event stream to its end, at most `within`: how long it lasted, or `None` if it did
/// not end.
async fn lasts(response: reqwest::Response, within: Duration) -> Option<Duration> {
    let started = Instant::now();
    let mut response = response;
    tokio::time::timeout(within, async {
        while let Ok(Some(_)) = response.chunk().await {}
    })
    .await
    .ok()
    .map(|()| started.elapsed())
}

fn bounded_streams(session_idle: Duration, max_stream: Duration) -> ServerConfig {
    ServerConfig {
        tenant_rate_per_s: 10_000,
        mcp: McpSettings {
            session_idle,
            max_stream,
            ..McpSettings::default()
        },
        // The connection's own timeouts are far shorter than the stream: they do not cut it.
        connections: ConnectionLimits {
            header_read_timeout: Duration::from_millis(200),
            idle_timeout: Duration::from_millis(200),
            ..ConnectionLimits::default()
        },
        ..ServerConfig::default()
    }
}

#[tokio::test]
async fn a_sessions_stream_ends_at_the_longest_a_stream_may_last() {
    let max_stream = Duration::from_millis(1500);
    let config = bounded_streams(Duration::from_secs(60), max_stream);
    let app = spawn_app_with(Backend::Sqlite, config).await;
    let key = acme(&app, "acme").await;
    let session = open(&app, &key, "assistant").await;
    let stream = send(&app, &key, "assistant", Some(&session), Method::GET, None).await;
    assert_eq!(stream.status(), StatusCode::OK);
    let lasted = lasts(stream, Duration::from_secs(10))
        .await
        .expect("the stream ends on its own");
    assert!(
        lasted >= max_stream - Duration::from_millis(200),
        "{lasted:?}"
    );
    // The session goes on: the client opens another stream.
    answer(&app, &key, "assistant", &session, list(2), 2).await;
    let again = send(&app, &key, "assistant", Some(&session), Method::GET, None).await;
    assert_eq!(again.status(), StatusCode::OK);
    app.stop().await;
}

#[tokio::test]
async fn a_session_without_messages_closes_at_its_idle_time_and_its_stream_with_it() {
    let idle = Duration::from_millis(1200);
    let config = bounded_streams(idle, Duration::from_secs(60));
    let app = spawn_app_with(Backend::Sqlite, config).await;
    let key = acme(&app, "acme").await;
    let session = open(&app, &key, "assistant").await;
    let stream = send(&app, &key, "assistant", Some(&session), Method::GET, None).await;
    assert_eq!(stream.status(), StatusCode::OK);
    let lasted = lasts(stream, Duration::from_secs(10))
        .await
        .expect("the stream of an idle session ends");
    assert!(lasted >= idle - Duration::from_millis(200), "{lasted:?}");
    let gone = send(
        &app,
        &key,
        "assistant",
        Some(&session),
        Method::POST,
        Some(list(2)),
    )
    .await;
    assert_eq!(gone.status(), StatusCode::NOT_FOUND);
    app.stop().await;
}

both_backends!(a_function_call_named_in_meta_is_run_once, |app| {
    let key = acme(&app, "acme").await;
    let session = open(&app, &key, "assistant").await;
    let named = |id: u64| {
        let mut call = save_meal(id);
        call["params"]["_meta"] = json!({"switchboard/function_call_id": "fc_meal_1"});
        call
    };
    let first = answer(&app, &key, "assistant", &session, named(2), 2).await;
    let again = answer(&app, &key, "assistant", &session, named(3), 3).await;
    for a in [&first, &again] {
        assert_eq!(
            a["result"]["_meta"]["switchboard/function_call_id"], "fc_meal_1",
            "{a}"
        );
    }
    assert_eq!(first["result"]["content"], again["result"]["content"]);
    let call_id = first["result"]["_meta"]["switchboard/call_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (_, call) = app.get(&format!("/v1/calls/{call_id}"), &key).await;
    assert_eq!(
        call["invocations"].as_array().unwrap().len(),
        1,
        "the repeat ran again: {call}"
    );
});
