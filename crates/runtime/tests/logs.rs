//! The logs of a call, in a test binary of their own: `tracing` caches per call site whether
//! anyone listens, process-wide, so a test that captures logs must not share its process.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use switchboard_core::{CallInfo, Limits, Tool};
use switchboard_runtime::http::{HttpConfig, HttpEffects};
use switchboard_runtime::{
    BoxFuture, CallConfig, CallSession, Delivery, Effects, Executor, Invocation, MemoryJournal,
    OutputSink, SessionDeps, SessionOptions, ToolEntry,
};
use tokio::sync::mpsc;
use wiremock::matchers::path;
use wiremock::{Mock, MockServer, ResponseTemplate};

struct ChannelSink(mpsc::UnboundedSender<Delivery>);

impl OutputSink for ChannelSink {
    fn deliver(&self, delivery: Delivery) -> BoxFuture<'_, ()> {
        let _ = self.0.send(delivery);
        Box::pin(async {})
    }
}

/// A writer the JSON log lines go to.
#[derive(Clone, Default)]
struct LogBuffer(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for LogBuffer {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn invocation(fc: &str, name: &str, args: Value) -> Invocation {
    Invocation {
        call_id: "rtc_1".into(),
        function_call_id: fc.into(),
        name: name.into(),
        arguments_json: args.to_string(),
        response_id: None,
        item_id: None,
    }
}

#[tokio::test(flavor = "current_thread")]
async fn the_logs_of_a_call_tell_its_story_without_secrets() {
    let buffer = LogBuffer::default();
    let writer = buffer.clone();
    let subscriber = tracing_subscriber::fmt()
        .json()
        .with_writer(move || writer.clone())
        .with_max_level(tracing::Level::DEBUG)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let server = MockServer::start().await;
    Mock::given(path("/meals"))
        .respond_with(ResponseTemplate::new(201))
        .mount(&server)
        .await;
    let mut def: Value =
        serde_json::from_str(include_str!("../../../examples/save_meal.json")).unwrap();
    def["actions"][2]["url"] = json!(format!("{}/meals", server.uri()));
    def["actions"][2]["headers"] = json!({"Authorization": "Bearer {{user.auth_token}}"});
    let tool = Arc::new(Tool::parse(&def, &Limits::default()).unwrap());
    let mut config = CallConfig {
        tenant_id: "acme-corp".into(),
        ..CallConfig::default()
    };
    config.agents.insert(
        "main".into(),
        HashMap::from([("save_meal".to_owned(), ToolEntry::new(tool))]),
    );
    let http = Arc::new(
        HttpEffects::new(HttpConfig {
            allow_private_networks: true,
            ..HttpConfig::default()
        })
        .unwrap(),
    );
    let (tx, mut rx) = mpsc::unbounded_channel();
    let deps = SessionDeps {
        config: Arc::new(config),
        executor: Executor::new(Arc::new(Effects::http_only(http))),
        sink: Arc::new(ChannelSink(tx)),
        journal: Arc::new(MemoryJournal::default()),
        options: SessionOptions::default(),
    };
    let call = CallInfo {
        id: "rtc_1".into(),
        tenant_id: "acme-corp".into(),
        agent: "main".into(),
        from: None,
        to: None,
        started_at: "2026-11-23T10:00:00Z".into(),
    };
    let session = CallSession::start(
        call,
        json!({"id": "u_42", "auth_token": "tok_secret_123"}),
        deps,
    )
    .await
    .unwrap();

    session.submit(invocation(
        "fc1",
        "save_meal",
        json!({"meal_type": "lunch", "dishes": ["soup"]}),
    ));
    rx.recv().await.unwrap();
    session.submit(invocation("fc1", "save_meal", json!({})));
    session.submit(invocation("fc9", "unknown_tool", json!({})));
    rx.recv().await.unwrap();
    session.end().await;

    let text = String::from_utf8(buffer.0.lock().unwrap().clone()).unwrap();
    let events: Vec<String> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|v| v["fields"]["message"].as_str().map(str::to_owned))
        .collect();
    let story = [
        "tool_invocation_scheduled",
        "tool_executor_execute_started",
        "api_call_finished",
        "tool_executor_execute_finished",
        "context_committed",
        "tool_invocation_ignored_already_executed",
        "tool_not_found",
        "tool_cancel_all_started",
        "tool_cancel_all_finished",
    ];
    let mut at = 0;
    for e in &events {
        if at < story.len() && e == story[at] {
            at += 1;
        }
    }
    assert_eq!(at, story.len(), "events in order {story:?}, got {events:?}");
    // At `info`, a tool call that ran is one line (its end), besides what its effects log:
    // a busy node's log grows by a line per call, not by every step of it.
    let info: Vec<String> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["level"] == "INFO")
        .filter_map(|v| v["fields"]["message"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(
        info,
        [
            "api_call_finished",
            "tool_executor_execute_finished",
            "tool_invocation_ignored_already_executed",
            "tool_not_found",
            "tool_cancel_all_started",
            "tool_cancel_all_finished",
        ],
        "{text}"
    );
    assert!(
        text.contains("\"call_id\":\"rtc_1\""),
        "events carry the call's span"
    );
    assert!(!text.contains("tok_secret_123"), "no token in the logs");
}
