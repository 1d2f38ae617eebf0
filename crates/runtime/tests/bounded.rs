//! A long call holds bounded memory: records, response states and dedupe answers stay within
//! their bounds over thousands of responses, and an old function call id the session has
//! forgotten is still not run twice.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use switchboard_core::{CallInfo, Limits, Tool};
use switchboard_runtime::executor::CallConfig;
use switchboard_runtime::http::{HttpConfig, HttpEffects};
use switchboard_runtime::session::SessionDeps;
use switchboard_runtime::{
    BoxFuture, CallJournal, CallSession, Delivery, Effects, Executor, Invocation, Lookup,
    MemoryJournal, OutputSink, RecordLimits, SessionOptions, ToolEntry,
};
use tokio::sync::mpsc;

struct ChannelSink(mpsc::UnboundedSender<Delivery>);

impl OutputSink for ChannelSink {
    fn deliver(&self, delivery: Delivery) -> BoxFuture<'_, ()> {
        let _ = self.0.send(delivery);
        Box::pin(async {})
    }
}

fn counter() -> Arc<Tool> {
    let def = json!({
        "name": "count", "description": "Counts.",
        "parameters": [{"name": "n", "type": "integer", "required": true}],
        "actions": [{"type": "context.set", "data": {"counted[+]": "{{params.n}}"}}],
        "on_success": [{"type": "respond", "message": "counted {{params.n}}"}]
    });
    Arc::new(Tool::parse(&def, &Limits::default()).unwrap_or_else(|e| panic!("{e}")))
}

fn inv(fc: &str, n: usize, response: &str) -> Invocation {
    Invocation {
        call_id: "rtc_long".into(),
        function_call_id: fc.into(),
        name: "count".into(),
        arguments_json: json!({"n": n}).to_string(),
        response_id: Some(response.into()),
        item_id: None,
    }
}

#[tokio::test]
async fn a_long_call_keeps_its_bookkeeping_bounded_and_old_ids_run_once() {
    let http = Arc::new(HttpEffects::new(HttpConfig::default()).unwrap());
    let tools: HashMap<String, ToolEntry> =
        HashMap::from([("count".to_owned(), ToolEntry::new(counter()))]);
    // An hour's tool calls in a few seconds: the runaway guards at their most lenient (this is
    // about memory, not about a model in a loop).
    let lenient = switchboard_core::guards::Guards {
        identical_calls: switchboard_core::guards::IdenticalCalls {
            max: switchboard_core::guards::MAX_IDENTICAL_CALLS,
            window_s: 1,
        },
        calls_per_minute: switchboard_core::guards::MAX_CALLS_PER_MINUTE,
    };
    let config = CallConfig {
        tenant_id: "acme".into(),
        agents: HashMap::from([("main".to_owned(), tools)]),
        guards: HashMap::from([("main".to_owned(), lenient)]),
        ..CallConfig::default()
    };
    let options = SessionOptions {
        records: RecordLimits {
            max_records_per_call: 50,
            ..RecordLimits::default()
        },
        max_finished_responses: 64,
        max_dedupe_answers: 32,
        ..SessionOptions::default()
    };
    let (tx, mut rx) = mpsc::unbounded_channel();
    let journal = Arc::new(MemoryJournal::default());
    let deps = SessionDeps {
        config: Arc::new(config),
        executor: Executor::new(Arc::new(Effects::http_only(http))),
        sink: Arc::new(ChannelSink(tx)),
        journal: journal.clone(),
        options,
    };
    let call = CallInfo {
        id: "rtc_long".into(),
        tenant_id: "acme".into(),
        agent: "main".into(),
        from: None,
        to: None,
        started_at: "2026-11-23T10:00:00Z".into(),
    };
    let session = CallSession::start(call, json!({}), deps).await.unwrap();

    const RESPONSES: usize = 3_000;
    for i in 0..RESPONSES {
        let response = format!("resp_{i}");
        session.submit(inv(&format!("fc_{i}"), i, &response));
        let d = tokio::time::timeout(Duration::from_secs(10), rx.recv())
            .await
            .expect("an answer")
            .expect("open sink");
        assert!(d.result.ok, "{}", d.result.output);
        // Barge-ins and completions both leave a response behind.
        if i % 3 == 0 {
            session.cancel_response(&response);
        } else {
            session.response_done(&response);
        }
        if i % 500 == 499 {
            let sizes = session.sizes().await.unwrap();
            assert!(sizes.records <= 50, "{sizes:?}");
            assert!(sizes.responses <= 64, "{sizes:?}");
            assert!(sizes.dedupe_answers <= 32, "{sizes:?}");
        }
    }
    let sizes = session.sizes().await.unwrap();
    assert_eq!((sizes.records, sizes.pending), (50, 0), "{sizes:?}");
    assert!(
        sizes.responses <= 64 && sizes.dedupe_answers <= 32,
        "{sizes:?}"
    );
    let snapshot = session.snapshot().await.unwrap();
    assert_eq!(snapshot.records.len(), 50);
    assert_eq!(
        snapshot.records.last().unwrap().function_call_id,
        format!("fc_{}", RESPONSES - 1)
    );

    // The first function call is long forgotten by the session, not by the journal: looked up,
    // its answer comes from the journal; repeated, it is not run again and gets no second
    // answer.
    match session.lookup("fc_0").await {
        Some(Lookup::Done(record)) => assert!(record.output.contains("counted 0"), "{record:?}"),
        other => panic!("fc_0 is in the journal: {other:?}"),
    }
    session.submit(inv("fc_0", 0, "resp_again"));
    assert!(
        tokio::time::timeout(Duration::from_millis(300), rx.recv())
            .await
            .is_err(),
        "a repeated function call id gets no second answer"
    );
    let snapshot = session.snapshot().await.unwrap();
    let counted = snapshot.context.workflow["counted"].as_array().unwrap();
    assert_eq!(counted.len(), RESPONSES, "fc_0 ran a second time");
    let first = journal.recorded("rtc_long", "fc_0").await.unwrap().unwrap();
    let answer: Value = serde_json::from_str(&first.output).unwrap();
    assert_eq!(answer["message"], "counted 0");
    session.end().await.unwrap();
}
