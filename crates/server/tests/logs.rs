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
