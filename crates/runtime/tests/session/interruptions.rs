//! Barge-in and call control: interrupted reads and writes, and transfers held, performed or
//! refused.

use super::*;

#[tokio::test]
async fn an_interrupted_read_tool_is_cancelled_and_writes_nothing() {
    let server = server_with_slow(2_000).await;
    let mut h = harness(
        vec![("main", vec![slow("lookup", &server.uri(), "GET", None)])],
        SessionOptions::default(),
    )
    .await;
    h.session
        .submit(inv("fc1", "lookup", json!({}), Some("resp_1")));
    tokio::time::sleep(Duration::from_millis(100)).await;
    h.session.cancel_response("resp_1");
    let d = h.next().await;
    assert_eq!(output(&d)["error"], "cancelled");
    assert!(d.interrupted);
    h.nothing_more().await;
    assert_eq!(h.snapshot().await.context.workflow.get("lookup_ran"), None);
}

#[tokio::test]
async fn an_interrupted_write_tool_finishes_and_reports_its_real_result() {
    let server = server_with_slow(300).await;
    let mut h = harness(
        vec![(
            "main",
            vec![slow("place_order", &server.uri(), "POST", None)],
        )],
        SessionOptions::default(),
    )
    .await;
    h.session
        .submit(inv("fc1", "place_order", json!({}), Some("resp_1")));
    tokio::time::sleep(Duration::from_millis(50)).await;
    h.session.cancel_response("resp_1");
    let d = h.next().await;
    assert_eq!(
        output(&d),
        json!({"ok": true, "message": "done", "data": {}})
    );
    assert!(d.interrupted, "the door must not ask for a new response");
    assert_eq!(
        h.snapshot().await.context.workflow["place_order_ran"],
        json!(true)
    );
}

#[tokio::test]
async fn a_transfer_in_an_interrupted_response_is_not_performed() {
    let options = SessionOptions {
        hold_terminal_effects: true,
        ..SessionOptions::default()
    };
    let mut h = harness(vec![("main", vec![])], options).await;
    h.session.submit(inv(
        "fc1",
        "request_transfer",
        json!({"destination_id": "sales"}),
        Some("resp_1"),
    ));
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(
        h.control.refers.lock().unwrap().is_empty(),
        "held until the response completes"
    );
    h.session.cancel_response("resp_1");
    let d = h.next().await;
    assert_eq!(output(&d)["error"], "cancelled");
    assert!(
        output(&d)["message"]
            .as_str()
            .unwrap()
            .contains("not transferred")
    );
    assert!(h.control.refers.lock().unwrap().is_empty());
}

#[tokio::test]
async fn a_held_transfer_goes_ahead_once_its_response_completes() {
    let options = SessionOptions {
        hold_terminal_effects: true,
        ..SessionOptions::default()
    };
    let mut h = harness(vec![("main", vec![])], options).await;
    h.session.submit(inv(
        "fc1",
        "request_transfer",
        json!({"destination_id": "support", "reason": "router"}),
        Some("resp_1"),
    ));
    tokio::time::sleep(Duration::from_millis(50)).await;
    h.session.response_done("resp_1");
    let d = h.next().await;
    assert!(d.result.ok, "{}", d.result.output);
    assert_eq!(*h.control.refers.lock().unwrap(), ["tel:+14155552000"]);
    // Asked again: the call is being transferred already; nothing is REFERred twice.
    h.session.submit(inv(
        "fc2",
        "request_transfer",
        json!({"destination_id": "support"}),
        Some("resp_2"),
    ));
    h.session.response_done("resp_2");
    assert_eq!(output(&h.next().await)["error"], "already_done");
    assert_eq!(h.control.refers.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn a_failed_refer_tells_the_model_to_go_on_without_transfer() {
    let t = tool(
        json!({"name": "to_pbx", "description": "d", "actions": [{"type": "transfer", "target_uri": "sip:fail@pbx.example.com"}]}),
    );
    let mut h = harness(vec![("main", vec![t])], SessionOptions::default()).await;
    h.session.submit(inv("fc1", "to_pbx", json!({}), None));
    let d = h.next().await;
    assert_eq!(output(&d)["error"], "call_transfer_failed");
    assert_eq!(
        output(&d)["message"],
        "Failed to transfer the call. Please handle the call without transfer."
    );
}

#[tokio::test]
async fn without_call_control_terminal_effects_become_client_actions() {
    let bye = tool(
        json!({"name": "hang_up", "description": "d", "actions": [{"type": "end_call", "message": "Goodbye!"}]}),
    );
    let (session, mut rx) = http_only_session("rtc_2", bye).await;
    session.submit(inv("fc1", "hang_up", json!({}), None));
    let d = rx.recv().await.unwrap();
    assert_eq!(
        d.actions,
        [CallAction::Hangup {
            message: Some("Goodbye!".into())
        }]
    );
}
