//! Runaway guards: identical calls, the per-minute budget and terminal tools run twice, each
//! answered at once with nothing run, and the guards' state rebuilt by a node taking over.

use switchboard_core::guards::{Guards, IdenticalCalls};

use super::*;

/// A read tool whose one action is a GET to `{url}/lookup`: every run is one upstream request.
fn lookup(url: &str) -> Arc<Tool> {
    tool(json!({
        "name": "lookup", "description": "d",
        "parameters": [{"name": "q", "type": "string", "required": true}],
        "actions": [{"type": "api_call", "method": "GET", "url": format!("{url}/lookup"), "retry_count": 0}]
    }))
}

async fn upstream() -> MockServer {
    let server = MockServer::start().await;
    Mock::given(path("/lookup"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"found": true})))
        .mount(&server)
        .await;
    server
}

fn guarded(identical: u32, per_minute: u32) -> HashMap<String, Guards> {
    HashMap::from([(
        "main".to_owned(),
        Guards {
            identical_calls: IdenticalCalls {
                max: identical,
                window_s: 60,
            },
            calls_per_minute: per_minute,
        },
    )])
}

async fn requests(server: &MockServer) -> usize {
    server.received_requests().await.unwrap().len()
}

#[tokio::test]
async fn the_same_call_past_its_limit_is_refused_with_nothing_run() {
    let server = upstream().await;
    let mut h = harness_guarded(
        vec![("main", vec![lookup(&server.uri())])],
        SessionOptions::default(),
        guarded(2, 60),
    )
    .await;
    for fc in ["fc1", "fc2"] {
        h.session
            .submit(inv(fc, "lookup", json!({"q": "pizza"}), None));
        assert!(h.next().await.result.ok);
    }
    h.session
        .submit(inv("fc3", "lookup", json!({"q": "pizza"}), None));
    let d = h.next().await;
    let out = output(&d);
    assert_eq!(out["error"], "loop_detected", "{out}");
    assert_eq!(out["details"]["guard"], "identical_calls");
    assert_eq!(out["details"]["calls"], 2);
    assert_eq!(
        requests(&server).await,
        2,
        "the third call reached no upstream"
    );
    // Other arguments are another call.
    h.session
        .submit(inv("fc4", "lookup", json!({"q": "soup"}), None));
    assert!(h.next().await.result.ok);
    // The record shows the refusal.
    let snap = h.snapshot().await;
    let rec = snap
        .records
        .iter()
        .find(|r| r.function_call_id == "fc3")
        .unwrap();
    assert!(!rec.ok);
    assert_eq!(rec.error, Some(switchboard_core::ErrorCode::LoopDetected));
}

#[tokio::test]
async fn by_default_a_sixth_identical_call_within_a_minute_is_refused() {
    let note = tool(json!({
        "name": "note", "description": "d",
        "actions": [{"type": "context.set", "data": {"notes[+]": "x"}}]
    }));
    let mut h = harness(vec![("main", vec![note])], SessionOptions::default()).await;
    for i in 1..=5 {
        h.session
            .submit(inv(&format!("fc{i}"), "note", json!({}), None));
        assert!(h.next().await.result.ok, "call {i}");
    }
    h.session.submit(inv("fc6", "note", json!({}), None));
    assert_eq!(output(&h.next().await)["error"], "loop_detected");
    let snap = h.snapshot().await;
    assert_eq!(
        snap.context.workflow["notes"].as_array().unwrap().len(),
        5,
        "the refused call wrote nothing"
    );
}

#[tokio::test]
async fn calls_past_the_per_minute_budget_are_refused() {
    let server = upstream().await;
    let mut h = harness_guarded(
        vec![("main", vec![lookup(&server.uri())])],
        SessionOptions::default(),
        guarded(5, 3),
    )
    .await;
    for i in 1..=3 {
        h.session.submit(inv(
            &format!("fc{i}"),
            "lookup",
            json!({"q": i.to_string()}),
            None,
        ));
        assert!(h.next().await.result.ok);
    }
    h.session
        .submit(inv("fc4", "lookup", json!({"q": "four"}), None));
    let out = output(&h.next().await);
    assert_eq!(out["error"], "loop_detected", "{out}");
    assert_eq!(out["details"]["guard"], "calls_per_minute");
    assert_eq!(out["details"]["max"], 3);
    assert_eq!(requests(&server).await, 3);
}

#[tokio::test]
async fn a_terminal_tool_called_again_after_it_succeeded_is_already_done() {
    let bye = tool(
        json!({"name": "hang_up", "description": "d", "actions": [{"type": "end_call", "message": "Goodbye!"}]}),
    );
    let failing = tool(
        json!({"name": "to_pbx", "description": "d", "actions": [{"type": "transfer", "target_uri": "sip:fail@pbx.example.com"}]}),
    );
    let mut h = harness(
        vec![("main", vec![bye, failing])],
        SessionOptions::default(),
    )
    .await;
    // A transfer that failed did not happen: the model may still transfer or hang up.
    h.session.submit(inv("fc0", "to_pbx", json!({}), None));
    assert_eq!(output(&h.next().await)["error"], "call_transfer_failed");
    h.session.submit(inv(
        "fc1",
        "request_transfer",
        json!({"destination_id": "sales"}),
        None,
    ));
    assert!(h.next().await.result.ok);
    h.session.submit(inv(
        "fc2",
        "request_transfer",
        json!({"destination_id": "support"}),
        None,
    ));
    let out = output(&h.next().await);
    assert_eq!(out["error"], "already_done", "{out}");
    assert_eq!(out["details"]["function_call_id"], "fc1");
    assert_eq!(out["details"]["tool"], "request_transfer");
    assert_eq!(
        *h.control.refers.lock().unwrap(),
        ["sip:fail@pbx.example.com", "sip:sales@example.com"],
        "no second REFER"
    );
    // Another terminal tool is not a repeat: a hang-up after the transfer goes ahead, once.
    h.session.submit(inv("fc3", "hang_up", json!({}), None));
    assert!(h.next().await.result.ok);
    h.session.submit(inv("fc4", "hang_up", json!({}), None));
    assert_eq!(output(&h.next().await)["error"], "already_done");
    assert_eq!(h.control.hangups.lock().unwrap().len(), 1, "one hang-up");
}

#[tokio::test]
async fn a_node_taking_the_call_over_derives_the_guards_from_its_records() {
    let server = upstream().await;
    let bye = tool(
        json!({"name": "hang_up", "description": "d", "actions": [{"type": "end_call", "message": "Goodbye!"}]}),
    );
    let mut h = harness_guarded(
        vec![("main", vec![lookup(&server.uri()), bye])],
        SessionOptions::default(),
        guarded(2, 60),
    )
    .await;
    for fc in ["fc1", "fc2"] {
        h.session.submit(inv(fc, "lookup", json!({"q": "x"}), None));
        assert!(h.next().await.result.ok);
    }
    h.session.submit(inv("fc3", "hang_up", json!({}), None));
    assert!(h.next().await.result.ok);
    // Another node restores the call from the journal: no memory of this session's.
    let (tx, mut rx) = mpsc::unbounded_channel();
    let deps = SessionDeps {
        sink: Arc::new(ChannelSink(tx)),
        ..h.deps.clone()
    };
    let taken = CallSession::restore("rtc_1", deps)
        .await
        .unwrap()
        .expect("the call is in the journal");
    let mut next = async || {
        output(
            &tokio::time::timeout(Duration::from_secs(5), rx.recv())
                .await
                .unwrap()
                .unwrap(),
        )
    };
    taken.submit(inv("fc4", "lookup", json!({"q": "x"}), None));
    assert_eq!(next().await["error"], "loop_detected");
    taken.submit(inv("fc5", "hang_up", json!({}), None));
    assert_eq!(next().await["error"], "already_done");
    assert_eq!(requests(&server).await, 2);
    assert_eq!(h.control.hangups.lock().unwrap().len(), 1);
}
