//! The call's WebSocket: attach rules, the scripted model, client event checks, re-attach.

use std::time::Duration;

use serde_json::{Value, json};

use crate::{Client, WAIT, accept_body, accepted, post, with_call};

#[tokio::test]
async fn the_socket_is_refused_before_accept_with_a_wrong_key_and_after_hangup() {
    let sim = with_call("rtc_1").await;
    assert_eq!(
        Client::try_connect(&sim, "sk-test", "rtc_1").await.err(),
        Some(404)
    );
    assert_eq!(
        Client::try_connect(&sim, "sk-test", "rtc_unknown")
            .await
            .err(),
        Some(404)
    );
    assert_eq!(
        post(&sim, "rtc_1", "accept", Some(&accept_body())).await.0,
        200
    );
    assert_eq!(
        Client::try_connect(&sim, "sk-wrong", "rtc_1").await.err(),
        Some(401)
    );
    assert!(Client::try_connect(&sim, "sk-test", "rtc_1").await.is_ok());
    assert_eq!(post(&sim, "rtc_1", "hangup", None).await.0, 200);
    assert_eq!(
        Client::try_connect(&sim, "sk-test", "rtc_1").await.err(),
        Some(404)
    );
}

#[tokio::test]
async fn session_created_carries_the_accept_body_and_session_update_merges_into_it() {
    let sim = accepted("rtc_1").await;
    let mut client = Client::connect(&sim, "rtc_1").await;
    let created = client.recv().await;
    assert_eq!(created["type"], "session.created");
    assert_eq!(created["session"], accept_body());

    client
        .send(json!({"type": "session.update", "session": {"type": "realtime", "instructions": "Be brief.",
            "tool_choice": {"type": "function", "name": "get_weather"}}}))
        .await;
    let updated = client.recv().await;
    assert_eq!(updated["type"], "session.updated");
    let session = sim.session("rtc_1").unwrap();
    assert_eq!(updated["session"], session);
    assert_eq!(session["instructions"], "Be brief.");
    assert_eq!(session["tools"], accept_body()["tools"]);
    assert_eq!(sim.session_updates("rtc_1").len(), 1);
    assert!(sim.violations().is_empty(), "{:?}", sim.violations());
}

#[tokio::test]
async fn a_scripted_function_call_arrives_in_order_and_its_output_is_recorded() {
    let sim = accepted("rtc_1").await;
    let mut client = Client::connect(&sim, "rtc_1").await;
    let mut model = sim.model("rtc_1", WAIT).await.unwrap();
    assert_eq!(model.call_id(), "rtc_1");
    client.recv_type("session.created").await;

    client.send(json!({"type": "response.create"})).await;
    model.recv_type("response.create", WAIT).await.unwrap();
    let response_id = model.active_response().unwrap();
    let arguments = r#"{"location": "San Francisco"}"#;
    model
        .function_call(&response_id, "call_001", "get_weather", arguments)
        .await;
    model.finish_response(&response_id, "completed").await;

    let created = client.recv().await;
    assert_eq!(
        (created["type"].as_str(), created["response"]["id"].as_str()),
        (Some("response.created"), Some(response_id.as_str()))
    );
    assert_eq!(created["response"]["status"], "in_progress");
    let added = client.recv().await;
    assert_eq!(added["type"], "response.output_item.added");
    assert_eq!(added["item"]["status"], "in_progress");
    let item_id = added["item"]["id"].as_str().unwrap().to_owned();
    assert!(item_id.starts_with("fc_"));

    let mut deltas = String::new();
    let mut delta_count = 0;
    let done = loop {
        let event = client.recv().await;
        if event["type"] != "response.function_call_arguments.delta" {
            break event;
        }
        assert_eq!(event["item_id"], item_id.as_str());
        deltas.push_str(event["delta"].as_str().unwrap());
        delta_count += 1;
    };
    assert!((2..=3).contains(&delta_count), "{delta_count} deltas");
    assert_eq!(deltas, arguments);
    assert_eq!(done["type"], "response.function_call_arguments.done");
    for (field, expected) in [
        ("response_id", json!(response_id)),
        ("item_id", json!(item_id)),
        ("output_index", json!(0)),
        ("call_id", json!("call_001")),
        ("name", json!("get_weather")),
        ("arguments", json!(arguments)),
    ] {
        assert_eq!(done[field], expected, "{field}");
    }
    let item_done = client.recv().await;
    assert_eq!(item_done["type"], "response.output_item.done");
    assert_eq!(item_done["item"]["status"], "completed");
    assert_eq!(item_done["item"]["arguments"], arguments);
    let response_done = client.recv().await;
    assert_eq!(response_done["type"], "response.done");
    assert_eq!(response_done["response"]["object"], "realtime.response");
    assert_eq!(response_done["response"]["status"], "completed");
    assert_eq!(response_done["response"]["status_details"], Value::Null);
    assert_eq!(
        response_done["response"]["output"],
        json!([item_done["item"]])
    );
    assert_eq!(model.active_response(), None);

    let output = json!({"type": "conversation.item.create",
        "item": {"type": "function_call_output", "call_id": "call_001", "output": "{\"ok\":true}"}});
    client.send(output).await;
    assert_eq!(client.recv().await["type"], "conversation.item.added");
    assert_eq!(client.recv().await["type"], "conversation.item.done");
    client.send(json!({"type": "response.create"})).await;
    assert_eq!(client.recv().await["type"], "response.created");
    assert_eq!(
        sim.outputs("rtc_1"),
        [("call_001".to_owned(), "{\"ok\":true}".to_owned())]
    );
    assert_eq!(sim.response_creates("rtc_1").len(), 2);
    assert!(sim.violations().is_empty(), "{:?}", sim.violations());
}

#[tokio::test]
async fn an_output_for_an_unknown_or_answered_call_id_is_a_violation() {
    let sim = accepted("rtc_1").await;
    let mut client = Client::connect(&sim, "rtc_1").await;
    let mut model = sim.model("rtc_1", WAIT).await.unwrap();
    client.recv_type("session.created").await;
    let output = |call_id: &str| {
        json!({"type": "conversation.item.create", "event_id": "evt_c1",
        "item": {"type": "function_call_output", "call_id": call_id, "output": "done"}})
    };

    client.send(output("call_unknown")).await;
    let error = client.recv().await;
    assert_eq!(error["type"], "error");
    assert_eq!(error["error"]["param"], "item.call_id");
    assert_eq!(error["error"]["event_id"], "evt_c1");
    assert_eq!(sim.violations().len(), 1);

    let response_id = model.start_response().await;
    model
        .function_call(&response_id, "call_1", "get_weather", "{}")
        .await;
    client.recv_type("response.output_item.done").await;
    client.send(output("call_1")).await;
    client.recv_type("conversation.item.done").await;
    assert_eq!(sim.violations().len(), 1);
    client.send(output("call_1")).await;
    client.recv_type("conversation.item.done").await;
    let violations = sim.violations();
    assert_eq!(violations.len(), 2);
    assert!(
        violations[1].message.contains("call_1"),
        "{}",
        violations[1].message
    );
    assert_eq!(sim.outputs("rtc_1").len(), 3);
}

#[tokio::test]
async fn response_create_while_a_response_is_active_is_a_harmless_error() {
    let sim = accepted("rtc_1").await;
    let mut client = Client::connect(&sim, "rtc_1").await;
    let mut model = sim.model("rtc_1", WAIT).await.unwrap();
    client.recv_type("session.created").await;
    let response_id = model.start_response().await;
    assert_eq!(client.recv().await["type"], "response.created");

    client
        .send(json!({"type": "response.create", "event_id": "evt_rc",
        "response": {"instructions": "Say: one moment.", "tool_choice": "none"}}))
        .await;
    let error = client.recv().await;
    assert_eq!(error["type"], "error");
    assert_eq!(
        error["error"]["code"],
        "conversation_already_has_active_response"
    );
    assert_eq!(error["error"]["event_id"], "evt_rc");
    assert_eq!(model.active_response(), Some(response_id));
    assert_eq!(sim.response_creates("rtc_1").len(), 1);
    assert!(sim.violations().is_empty(), "{:?}", sim.violations());
    // The test still sees the event.
    assert!(model.recv_type("response.create", WAIT).await.is_some());
}

#[tokio::test]
async fn barge_in_and_cancel_end_the_active_response_once() {
    let sim = accepted("rtc_1").await;
    let mut client = Client::connect(&sim, "rtc_1").await;
    let mut model = sim.model("rtc_1", WAIT).await.unwrap();
    client.recv_type("session.created").await;

    let first = model.start_response().await;
    model.barge_in().await;
    client.recv_type("response.created").await;
    assert_eq!(
        client.recv().await["type"],
        "input_audio_buffer.speech_started"
    );
    let done = client.recv().await;
    assert_eq!(done["type"], "response.done");
    assert_eq!(done["response"]["id"], first.as_str());
    assert_eq!(done["response"]["status"], "cancelled");
    assert_eq!(
        done["response"]["status_details"],
        json!({"type": "cancelled", "reason": "turn_detected"})
    );
    assert_eq!(model.active_response(), None);
    // Already ended: no second response.done; the marker is the next event.
    model.finish_response(&first, "completed").await;
    model.send(json!({"type": "test.marker"})).await;
    assert_eq!(client.recv().await["type"], "test.marker");

    client.send(json!({"type": "response.cancel"})).await;
    assert_eq!(
        client.recv().await["error"]["code"],
        "response_cancel_not_active"
    );
    let second = model.start_response().await;
    client.recv_type("response.created").await;
    client
        .send(json!({"type": "response.cancel", "response_id": second}))
        .await;
    let done = client.recv().await;
    assert_eq!(
        done["response"]["status_details"]["reason"],
        "client_cancelled"
    );
    assert_eq!(model.active_response(), None);
    assert!(sim.violations().is_empty(), "{:?}", sim.violations());
}

#[tokio::test]
async fn malformed_client_events_are_violations_answered_with_error_events() {
    let sim = accepted("rtc_1").await;
    let mut client = Client::connect(&sim, "rtc_1").await;
    let mut model = sim.model("rtc_1", WAIT).await.unwrap();
    client.recv_type("session.created").await;
    // One line per case: the client event, the error code and param the API answers.
    let cases = [
        (json!({"event_id": "e1"}), "invalid_event", Value::Null),
        (
            json!({"type": "input_audio_buffer.bogus"}),
            "invalid_event",
            json!("type"),
        ),
        (
            json!({"type": "session.update", "session": {"instructions": "x"}}),
            "missing_required_parameter",
            json!("session.type"),
        ),
        (
            json!({"type": "session.update", "session": {"type": "realtime", "voice": "x"}}),
            "unknown_parameter",
            json!("session.voice"),
        ),
        (
            json!({"type": "response.create", "response": {"modalities": ["text"]}}),
            "unknown_parameter",
            json!("response.modalities"),
        ),
        (
            json!({"type": "conversation.item.create", "item": {"type": "function_call_output", "call_id": "c", "output": {"ok": true}}}),
            "invalid_type",
            json!("item.output"),
        ),
        (
            json!({"type": "conversation.item.create", "item": {"type": "message", "role": "robot", "content": []}}),
            "invalid_value",
            json!("item.role"),
        ),
        (
            json!({"type": "response.cancel", "reason": "x"}),
            "unknown_parameter",
            json!("reason"),
        ),
    ];
    for (i, (event, code, param)) in cases.iter().enumerate() {
        client.send(event.clone()).await;
        let error = client.recv().await;
        assert_eq!(error["type"], "error", "case {i}");
        assert_eq!(error["error"]["type"], "invalid_request_error", "case {i}");
        assert_eq!(error["error"]["code"], *code, "case {i}: {error}");
        assert_eq!(error["error"]["param"], *param, "case {i}: {error}");
        assert_eq!(sim.violations().len(), i + 1, "case {i}");
    }
    for _ in &cases {
        model.recv(WAIT).await.unwrap();
    }
    let seen: Vec<Value> = model.seen();
    assert_eq!(seen, cases.iter().map(|c| c.0.clone()).collect::<Vec<_>>());
    // A valid message item is fine.
    client.send(json!({"type": "conversation.item.create",
        "item": {"type": "message", "role": "system", "content": [{"type": "input_text", "text": "Hi"}]}})).await;
    assert_eq!(client.recv().await["type"], "conversation.item.added");
    assert_eq!(sim.violations().len(), cases.len());
}

#[tokio::test]
async fn a_dropped_connection_can_be_reattached_and_hangup_closes_the_socket() {
    let sim = accepted("rtc_1").await;
    let mut client = Client::connect(&sim, "rtc_1").await;
    let mut model = sim.model("rtc_1", WAIT).await.unwrap();
    client.recv_type("session.created").await;
    let response_id = model.start_response().await;
    model
        .function_call(&response_id, "call_1", "get_weather", "{}")
        .await;
    client.recv_type("response.output_item.done").await;
    model.drop_connection().await;
    assert_eq!(
        client.end().await,
        Some(false),
        "dropped without a close frame"
    );
    assert!(
        sim.model("rtc_1", Duration::from_millis(50))
            .await
            .is_none()
    );

    let mut client = Client::connect(&sim, "rtc_1").await;
    let mut model = sim.model("rtc_1", WAIT).await.unwrap();
    assert_eq!(client.recv().await["type"], "session.created");
    // The call's memory survives the drop: the output answers the call issued before it.
    client
        .send(json!({"type": "conversation.item.create",
        "item": {"type": "function_call_output", "call_id": "call_1", "output": "ok"}}))
        .await;
    assert!(
        model
            .recv_type("conversation.item.create", WAIT)
            .await
            .is_some()
    );
    assert_eq!(client.recv().await["type"], "conversation.item.added");
    assert!(sim.violations().is_empty(), "{:?}", sim.violations());

    assert_eq!(post(&sim, "rtc_1", "hangup", None).await.0, 200);
    assert_eq!(client.end().await, Some(true), "closed with a close frame");
    assert!(model.recv(WAIT).await.is_none());
}
