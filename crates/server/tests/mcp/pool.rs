//! The pool's sessions to tenants' MCP servers end on their own: one with no request through it
//! is closed at the idle time, and one in use is retired at its longest life (the next request
//! opens another). The server here is Switchboard's own MCP door, registered as the tenant's.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::json;
use switchboard_server::ServerConfig;
use switchboard_server::mcp::McpSettings;

use super::support::{Backend, TestApp, acme, spawn_app_with};

async fn app_with(idle: Duration, max_age: Duration) -> TestApp {
    let config = ServerConfig {
        tenant_rate_per_s: 10_000,
        mcp: McpSettings {
            pool_session_idle: idle,
            pool_session_max_age: max_age,
            ..McpSettings::default()
        },
        ..ServerConfig::default()
    };
    spawn_app_with(Backend::Sqlite, config).await
}

/// Registers the tenant's own agent endpoint as its MCP server `self` (listing its tools opens
/// the pool's session).
async fn register_self(app: &TestApp, key: &str) {
    let url = format!("{}/v1/agents/assistant/mcp", app.base);
    let body = json!({"url": url, "headers": {"Authorization": format!("Bearer {key}")}});
    let (s, shown) = app.put("/v1/mcp-servers/self", key, body).await;
    assert_eq!(s, StatusCode::OK, "{shown}");
    assert!(
        shown["tools"]
            .as_array()
            .unwrap()
            .contains(&json!("save_meal")),
        "{shown}"
    );
}

#[tokio::test]
async fn a_pooled_session_with_no_requests_is_closed_at_its_idle_time() {
    let idle = Duration::from_millis(800);
    let app = app_with(idle, Duration::from_secs(600)).await;
    let key = acme(&app, "acme").await;
    register_self(&app, &key).await;
    let listed = Instant::now();
    assert_eq!(app.state.mcp.clients.sessions().0, 1);
    while app.state.mcp.clients.sessions().0 > 0 {
        assert!(
            listed.elapsed() < Duration::from_secs(10),
            "the idle session was not closed"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(listed.elapsed() >= idle - Duration::from_millis(200));
    // The next request opens a new one.
    let (s, _) = app
        .get("/v1/mcp-servers/self/tools?refresh=true", &key)
        .await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(app.state.mcp.clients.sessions(), (1, 2));
    app.stop().await;
}

#[tokio::test]
async fn a_pooled_session_in_use_is_retired_at_its_longest_life() {
    let max_age = Duration::from_millis(1000);
    let app = app_with(Duration::from_secs(600), max_age).await;
    let key = acme(&app, "acme").await;
    register_self(&app, &key).await;
    let started = Instant::now();
    while started.elapsed() < max_age * 2 {
        let (s, _) = app
            .get("/v1/mcp-servers/self/tools?refresh=true", &key)
            .await;
        assert_eq!(s, StatusCode::OK);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (open, opened) = app.state.mcp.clients.sessions();
    assert!(open <= 1, "{open} sessions open to one server");
    assert!(opened >= 2, "one session served for twice its longest life");
    app.stop().await;
}
