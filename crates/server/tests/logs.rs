//! Logs, in a test binary of their own: `tracing` caches per call site whether anyone listens,
//! process-wide, so a test that captures logs must not share its process with other tests.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "api/support.rs"]
#[allow(dead_code)]
mod support;

use serde_json::json;
use support::{Backend, acme, invoke, spawn_app};

/// A writer the JSON log lines of one test go to.
#[derive(Clone, Default)]
struct LogBuffer(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for LogBuffer {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test(flavor = "current_thread")]
async fn secrets_never_reach_the_logs() {
    let buffer = LogBuffer::default();
    let writer = buffer.clone();
    let subscriber = tracing_subscriber::fmt()
        .json()
        .with_writer(move || writer.clone())
        .with_max_level(tracing::Level::DEBUG)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    let app = spawn_app(Backend::Sqlite).await;
    let key = acme(&app, "acme").await;
    app.put(
        "/v1/secrets/signing_secret",
        &key,
        json!({"value": "whsec_c2VjcmV0LXNpZ25pbmcta2V5LTEyMw=="}),
    )
    .await;
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
        json!({"meal_type": "lunch", "dishes": ["tok-abcdef-123"]}),
    )
    .await;
    app.delete("/v1/calls/c1", &key).await;
    let text = String::from_utf8(buffer.0.lock().unwrap().clone()).unwrap();
    assert!(
        text.contains("tool_invocation_scheduled"),
        "the logs were captured"
    );
    for secret in [
        key.as_str(),
        app.admin.as_str(),
        "whsec_c2VjcmV0LXNpZ25pbmcta2V5LTEyMw==",
        "sk-very-secret-1",
        "tok-abcdef-123",
    ] {
        assert!(!text.contains(secret), "{secret} is in the logs");
    }
    app.stop().await;
}

/// A Realtime call whose socket OpenAI closes normally (1000) ends there: no re-attach, and no
/// `realtime_socket_dropped` warning.
#[tokio::test(flavor = "current_thread")]
async fn a_normal_close_of_the_realtime_socket_is_not_a_drop() {
    use reqwest::StatusCode;
    use std::time::Duration;
    const OPENAI_KEY: &str = "sk-tenant-openai";
    const SECRET: &str = "whsec_c2VjcmV0LWtleS1mb3ItdGVzdGluZy13ZWJob29rcy0xMjM0NTY=";
    const NUMBER: &str = "+18005550100";
    let wait = Duration::from_secs(5);
    let buffer = LogBuffer::default();
    let writer = buffer.clone();
    let subscriber = tracing_subscriber::fmt()
        .json()
        .with_writer(move || writer.clone())
        .with_max_level(tracing::Level::DEBUG)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    let sim = switchboard_sim::Simulator::start().await.unwrap();
    sim.set_api_key(OPENAI_KEY);
    let app = support::spawn_app_with(
        Backend::Sqlite,
        switchboard_server::ServerConfig {
            tenant_rate_per_s: 10_000,
            openai: switchboard_realtime::Endpoints::from_api_base(&sim.base_url()),
            ..switchboard_server::ServerConfig::default()
        },
    )
    .await;
    let key = acme(&app, "acme").await;
    let features = json!({"realtime": {"phone_numbers": {NUMBER: "assistant"}}});
    assert_eq!(
        app.put("/v1/features", &key, features).await.0,
        StatusCode::OK
    );
    for (name, value) in [
        ("openai_api_key", OPENAI_KEY),
        ("openai_webhook_secret", SECRET),
    ] {
        let (s, body) = app
            .put(
                &format!("/v1/secrets/{name}"),
                &key,
                json!({"value": value}),
            )
            .await;
        assert_eq!(s, StatusCode::NO_CONTENT, "{body}");
    }
    let webhook = format!("{}/v1/realtime/webhook/acme", app.base);
    let status = sim
        .send_incoming_call(&webhook, SECRET, "rtc_close", "+14155550123", NUMBER)
        .await
        .unwrap();
    assert_eq!(status, 200);
    let model = sim.model("rtc_close", wait).await.expect("attached");
    model.close().await;
    let mut ended = false;
    for _ in 0..100 {
        if app.state.calls.get("acme", "rtc_close").is_none() {
            ended = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(ended, "the call ended");
    let text = String::from_utf8(buffer.0.lock().unwrap().clone()).unwrap();
    assert!(
        text.contains("realtime_socket_closed"),
        "the close was seen"
    );
    assert!(!text.contains("realtime_socket_dropped"), "{text}");
    assert!(!text.contains("realtime_socket_retry"), "{text}");
    app.stop().await;
}
