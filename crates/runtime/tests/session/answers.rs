//! A session answers each function call once, commits its writes, and goes on past failures.

use super::*;

#[tokio::test]
async fn a_tool_call_is_answered_and_its_writes_committed() {
    let server = server_with_slow(0).await;
    let mut h = harness(
        vec![("main", vec![save_meal(&server.uri())])],
        SessionOptions::default(),
    )
    .await;
    h.session.submit(inv(
        "fc1",
        "save_meal",
        json!({"meal_type": "lunch", "dishes": ["soup"]}),
        Some("resp_1"),
    ));
    let d = h.next().await;
    assert_eq!(
        output(&d),
        json!({"ok": true, "message": "I've logged your lunch!", "data": {}})
    );
    assert_eq!(
        h.snapshot().await.context.workflow["logged_meals"],
        json!([{"meal_type": "lunch", "dishes": ["soup"]}])
    );
    let requests = server.received_requests().await.unwrap();
    assert_eq!(
        requests[0].headers.get("idempotency-key").unwrap(),
        "rtc_1-fc1-2"
    );
    let record = &h.snapshot().await.records[0];
    assert!(record.ok && record.latency_ms > 0.0);
}

#[tokio::test]
async fn a_hundred_concurrent_calls_all_land() {
    let server = server_with_slow(0).await;
    let mut h = harness_guarded(
        vec![("main", vec![save_meal(&server.uri())])],
        // Room for all of them at once (the default takes 64; past it, see below).
        SessionOptions {
            max_pending_tools: 100,
            ..SessionOptions::default()
        },
        lenient_guards(),
    )
    .await;
    for i in 0..100 {
        h.session.submit(inv(
            &format!("fc{i}"),
            "save_meal",
            json!({"meal_type": "dinner", "dishes": [format!("dish {i}")]}),
            None,
        ));
    }
    let mut ids = std::collections::HashSet::new();
    for _ in 0..100 {
        let d = h.next().await;
        assert!(d.result.ok, "{}", d.result.output);
        ids.insert(d.result.function_call_id);
    }
    assert_eq!(ids.len(), 100);
    h.nothing_more().await;
    let meals = h.snapshot().await.context.workflow["logged_meals"]
        .as_array()
        .unwrap()
        .len();
    assert_eq!(meals, 100);
}

#[tokio::test]
async fn a_tool_that_stays_in_the_call_is_not_kept_waiting_by_slow_tools_holding_every_slot() {
    let server = server_with_slow(1_000).await;
    let note = tool(json!({
        "name": "note", "description": "Notes that the caller is in a hurry.",
        "actions": [{"type": "context.set", "data": {"in_a_hurry": true}}],
        "on_success": [{"type": "respond", "message": "noted"}]
    }));
    let mut h = harness(
        vec![(
            "main",
            vec![slow("lookup", &server.uri(), "GET", None), note],
        )],
        SessionOptions {
            max_concurrent_tools: 1,
            ..SessionOptions::default()
        },
    )
    .await;
    h.session
        .submit(inv("fc1", "lookup", json!({}), Some("resp_1")));
    // Waits for the one slot, which the first lookup holds for a second.
    h.session
        .submit(inv("fc2", "lookup", json!({}), Some("resp_1")));
    h.session
        .submit(inv("fc3", "note", json!({}), Some("resp_1")));
    let first = h.next().await;
    assert_eq!(
        first.result.function_call_id, "fc3",
        "a tool that only changes the call's context needs no slot"
    );
    assert_eq!(output(&first)["message"], "noted");
    assert_eq!(
        h.snapshot().await.context.workflow["in_a_hurry"],
        json!(true)
    );
    let mut rest = vec![
        h.next().await.result.function_call_id,
        h.next().await.result.function_call_id,
    ];
    rest.sort();
    assert_eq!(rest, ["fc1", "fc2"]);
    h.nothing_more().await;
    let records = h.snapshot().await.records;
    assert_eq!(records.len(), 3, "one record per function call");
}

#[tokio::test]
async fn function_calls_past_the_pending_bound_are_answered_at_once_and_never_run() {
    let server = server_with_slow(500).await;
    let mut h = harness_guarded(
        vec![("main", vec![slow("lookup", &server.uri(), "GET", None)])],
        SessionOptions {
            max_concurrent_tools: 1,
            max_pending_tools: 4,
            ..SessionOptions::default()
        },
        lenient_guards(),
    )
    .await;
    for i in 0..10 {
        h.session
            .submit(inv(&format!("fc{i}"), "lookup", json!({}), Some("resp_1")));
    }
    // One runs, three wait for its slot: the six after them are answered before any of those.
    let mut refused = Vec::new();
    for _ in 0..6 {
        let d = h.next().await;
        assert!(!d.result.ok, "{}", d.result.output);
        assert_eq!(output(&d)["error"], "rate_limited", "{}", d.result.output);
        assert!(
            output(&d)["message"]
                .as_str()
                .is_some_and(|m| m.contains("Wait for their results")),
            "{}",
            d.result.output
        );
        refused.push(d.result.function_call_id);
    }
    refused.sort();
    assert_eq!(refused, ["fc4", "fc5", "fc6", "fc7", "fc8", "fc9"]);
    assert_eq!(h.session.sizes().await.unwrap().pending, 4);
    let mut ran = Vec::new();
    for _ in 0..4 {
        let d = h.next().await;
        assert!(d.result.ok, "{}", d.result.output);
        ran.push(d.result.function_call_id);
    }
    ran.sort();
    assert_eq!(ran, ["fc0", "fc1", "fc2", "fc3"]);
    h.nothing_more().await;
    assert_eq!(server.received_requests().await.unwrap().len(), 4);
    // Once they are done there is room again; a refused id stays answered.
    h.session
        .submit(inv("fc10", "lookup", json!({}), Some("resp_2")));
    h.session
        .submit(inv("fc4", "lookup", json!({}), Some("resp_2")));
    let d = h.next().await;
    assert_eq!(d.result.function_call_id, "fc10");
    assert!(d.result.ok, "{}", d.result.output);
    h.nothing_more().await;
    assert_eq!(
        h.snapshot().await.records.len(),
        11,
        "one record per function call"
    );
}

#[tokio::test]
async fn a_repeated_function_call_id_runs_once_and_is_answered_once() {
    let server = server_with_slow(200).await;
    let mut h = harness(
        vec![("main", vec![slow("lookup", &server.uri(), "GET", None)])],
        SessionOptions::default(),
    )
    .await;
    h.session.submit(inv("fc1", "lookup", json!({}), None));
    h.session.submit(inv("fc1", "lookup", json!({}), None)); // still pending
    let d = h.next().await;
    assert_eq!(d.result.function_call_id, "fc1");
    h.session.submit(inv("fc1", "lookup", json!({}), None)); // already executed
    h.nothing_more().await;
    match h.session.lookup("fc1").await {
        Some(switchboard_runtime::Lookup::Done(r)) => assert_eq!(r.output, d.result.output),
        other => panic!("fc1 is done, got {other:?}"),
    }
    assert!(h.session.lookup("fc_unknown").await.is_none());
    assert_eq!(server.received_requests().await.unwrap().len(), 1);
}

#[tokio::test]
async fn the_same_write_twice_runs_once() {
    let server = server_with_slow(0).await;
    let mut h = harness(
        vec![("main", vec![save_meal(&server.uri())])],
        SessionOptions::default(),
    )
    .await;
    let args = json!({"meal_type": "lunch", "dishes": ["soup"]});
    h.session
        .submit(inv("fc1", "save_meal", args.clone(), None));
    let first = h.next().await;
    // Same arguments, keys in another order: still the same call.
    h.session.submit(inv(
        "fc2",
        "save_meal",
        json!({"dishes": ["soup"], "meal_type": "lunch"}),
        None,
    ));
    let second = h.next().await;
    assert_eq!(output(&second)["duplicate_of"], "fc1");
    assert_eq!(output(&second)["message"], output(&first)["message"]);
    assert_eq!(second.duplicate_of.as_deref(), Some("fc1"));
    assert_eq!(server.received_requests().await.unwrap().len(), 1);
    assert_eq!(
        h.snapshot().await.context.workflow["logged_meals"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    // Different arguments run.
    h.session.submit(inv(
        "fc3",
        "save_meal",
        json!({"meal_type": "dinner", "dishes": ["soup"]}),
        None,
    ));
    assert!(h.next().await.duplicate_of.is_none());
}

#[tokio::test]
async fn identical_writes_in_flight_share_one_run() {
    let server = server_with_slow(200).await;
    let mut h = harness(
        vec![(
            "main",
            vec![slow("place_order", &server.uri(), "POST", None)],
        )],
        SessionOptions::default(),
    )
    .await;
    h.session.submit(inv("fc1", "place_order", json!({}), None));
    h.session.submit(inv("fc2", "place_order", json!({}), None));
    let a = h.next().await;
    let b = h.next().await;
    assert_eq!(
        (
            a.result.function_call_id.as_str(),
            b.result.function_call_id.as_str()
        ),
        ("fc1", "fc2")
    );
    assert_eq!(b.duplicate_of.as_deref(), Some("fc1"));
    assert_eq!(server.received_requests().await.unwrap().len(), 1);
}

#[tokio::test]
async fn end_cancels_everything_still_running() {
    let server = server_with_slow(5_000).await;
    let tools = vec![
        slow("lookup", &server.uri(), "GET", None),
        slow("place_order", &server.uri(), "POST", None),
    ];
    let mut h = harness(vec![("main", tools)], SessionOptions::default()).await;
    h.session.submit(inv("fc1", "lookup", json!({}), None));
    h.session.submit(inv("fc2", "place_order", json!({}), None));
    tokio::time::sleep(Duration::from_millis(100)).await;
    let started = std::time::Instant::now();
    let end = h.session.end().await.unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "end waits for aborted runs, not for their servers"
    );
    let mut codes: Vec<String> = Vec::new();
    for _ in 0..2 {
        codes.push(
            output(&h.next().await)["error"]
                .as_str()
                .unwrap()
                .to_owned(),
        );
    }
    assert_eq!(codes, ["cancelled", "cancelled"]);
    assert!(end.ended && end.pending.is_empty());
    assert!(end.context.workflow.get("place_order_ran").is_none());
    assert!(h.session.snapshot().await.is_none(), "the session is gone");
    assert!(h.journal.load("rtc_1").await.unwrap().unwrap().ended);
}

#[tokio::test]
async fn a_panicking_handler_fails_the_tool_and_the_call_goes_on() {
    let server = server_with_slow(0).await;
    let buggy = tool(
        json!({"name": "crm_lookup", "description": "d", "actions": [{"type": "mcp.call", "server": "crm", "tool": "lookup"}]}),
    );
    let mut h = harness(
        vec![("main", vec![buggy, save_meal(&server.uri())])],
        SessionOptions::default(),
    )
    .await;
    h.session.submit(inv("fc1", "crm_lookup", json!({}), None));
    let d = h.next().await;
    assert_eq!(output(&d)["error"], "tool_execution_failed");
    h.session.submit(inv(
        "fc2",
        "save_meal",
        json!({"meal_type": "lunch", "dishes": ["x"]}),
        None,
    ));
    assert!(h.next().await.result.ok);
}

#[tokio::test]
async fn every_failure_mode_gets_its_code() {
    let server = MockServer::start().await;
    Mock::given(path("/slow"))
        .respond_with(ResponseTemplate::new(200).set_delay(Duration::from_secs(3)))
        .mount(&server)
        .await;
    Mock::given(path("/down"))
        .respond_with(ResponseTemplate::new(500))
        .mount(&server)
        .await;
    let quick = tool(
        json!({"name": "quick", "description": "d", "timeout": 0.2, "actions": [{"type": "api_call", "method": "GET", "url": format!("{}/slow", server.uri()), "retry_count": 0}]}),
    );
    let down = tool(
        json!({"name": "down", "description": "d", "actions": [{"type": "api_call", "url": format!("{}/down", server.uri()), "retry_count": 1, "retry_delay": 0.01}]}),
    );
    let typed = tool(
        json!({"name": "typed", "description": "d", "parameters": [{"name": "n", "type": "integer", "required": true}]}),
    );
    let mut h = harness(
        vec![("main", vec![quick, down, typed])],
        SessionOptions::default(),
    )
    .await;
    let cases = [
        ("nope", json!({}), "tool_not_found"),
        ("typed", json!("{broken"), "tool_args_parse_error"),
        ("typed", json!({"n": "x"}), "invalid_arguments"),
        ("quick", json!({}), "timeout"),
        ("down", json!({}), "api_call_failed"),
    ];
    for (i, (name, args, code)) in cases.iter().enumerate() {
        let mut invocation = inv(&format!("fc{i}"), name, args.clone(), None);
        if let Value::String(raw) = args {
            invocation.arguments_json = raw.clone();
        }
        h.session.submit(invocation);
        let d = h.next().await;
        assert_eq!(output(&d)["error"], *code, "{name}: {}", d.result.output);
        assert_eq!(d.result.error.unwrap().as_str(), *code);
    }
}

#[tokio::test]
async fn handoff_changes_the_active_agent_and_its_tools() {
    let to_billing = tool(
        json!({"name": "to_billing", "description": "d", "actions": [{"type": "handoff", "agent": "billing", "reason": "invoice"}, {"type": "context.set", "data": {"agent.handed": true}}]}),
    );
    let invoice = tool(
        json!({"name": "invoice", "description": "d", "actions": [{"type": "context.set", "data": {"agent.seen": true}}]}),
    );
    let mut h = harness(
        vec![("main", vec![to_billing]), ("billing", vec![invoice])],
        SessionOptions::default(),
    )
    .await;
    h.session.submit(inv("fc1", "invoice", json!({}), None));
    assert_eq!(output(&h.next().await)["error"], "tool_not_found");
    h.session.submit(inv("fc2", "to_billing", json!({}), None));
    let d = h.next().await;
    assert_eq!(d.handoff.as_ref().unwrap().agent, "billing");
    h.session.submit(inv("fc3", "invoice", json!({}), None));
    assert!(h.next().await.result.ok);
    let ctx = h.snapshot().await.context;
    assert_eq!(ctx.active_agent(), "billing");
    assert_eq!(
        *ctx.agents,
        json!({"main": {"handed": true}, "billing": {"seen": true}})
    );
}

#[tokio::test]
async fn an_async_tool_is_answered_at_once_then_reports() {
    let server = server_with_slow(300).await;
    let mut def = json!({"name": "report", "description": "d", "async": true, "actions": [{"type": "api_call", "url": format!("{}/slow", server.uri()), "retry_count": 0}], "on_success": [{"type": "respond", "message": "report sent"}]});
    let t = tool(def.take());
    let mut h = harness(vec![("main", vec![t])], SessionOptions::default()).await;
    h.session.submit(inv("fc1", "report", json!({}), None));
    let first = h.next().await;
    assert_eq!(output(&first), json!({"ok": true, "message": "started"}));
    assert!(!first.async_completion);
    let done = h.next().await;
    assert!(done.async_completion);
    assert_eq!(output(&done)["message"], "report sent");
}

#[tokio::test]
async fn secrets_never_reach_outputs_or_records() {
    let leaky = tool(
        json!({"name": "leaky", "description": "d", "parameters": [{"name": "note", "type": "string"}], "actions": [{"type": "respond", "message": "token is {{user.auth_token}}"}]}),
    );
    let mut h = harness(vec![("main", vec![leaky])], SessionOptions::default()).await;
    h.session.submit(inv(
        "fc1",
        "leaky",
        json!({"note": "my token tok_secret_123"}),
        None,
    ));
    let d = h.next().await;
    assert_eq!(output(&d)["message"], "token is [redacted]");
    let record = &h.snapshot().await.records[0];
    assert!(
        !record.arguments.contains("tok_secret_123"),
        "{}",
        record.arguments
    );
}

#[tokio::test]
async fn on_error_continue_goes_on_through_a_session() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(503))
        .mount(&server)
        .await;
    let t = tool(
        json!({"name": "notify", "description": "d", "actions": [{"type": "api_call", "url": server.uri(), "retry_count": 0, "on_error": "continue"}], "on_success": [{"type": "respond", "message": "noted ({{response.status}})"}]}),
    );
    let mut h = harness(vec![("main", vec![t])], SessionOptions::default()).await;
    h.session.submit(inv("fc1", "notify", json!({}), None));
    assert_eq!(output(&h.next().await)["message"], "noted (503)");
}

#[tokio::test]
async fn toolkit_effects_reach_their_handler_with_the_tool_config() {
    let email = tool(
        json!({"name": "send_receipt", "description": "d", "actions": [
        {"type": "email.send", "to": ["a@example.com", "b@example.com"], "subject": "Receipt", "body": "Thanks", "into": "result.sent"}]}),
    );
    let cal = tool(
        json!({"name": "book", "description": "d", "actions": [{"type": "calendar.list_events", "time_min": "2026-12-01T00:00:00Z"}]}),
    );
    let bad = tool(
        json!({"name": "bad_mail", "description": "d", "actions": [{"type": "email.send", "to": 42, "subject": "s", "body": "b"}]}),
    );
    let mut h = harness(
        vec![("main", vec![email, cal, bad])],
        SessionOptions::default(),
    )
    .await;
    // Give send_receipt a config, as an agent tool would have.
    let mut config = (*h.deps.config).clone();
    let entry = config
        .agents
        .get_mut("main")
        .unwrap()
        .get_mut("send_receipt")
        .unwrap();
    entry.config = Arc::new(json!({"from": "shop@example.com"}));
    let deps = SessionDeps {
        config: Arc::new(config),
        ..h.deps.clone()
    };
    let (tx, rx) = mpsc::unbounded_channel();
    let deps = SessionDeps {
        sink: Arc::new(ChannelSink(tx)),
        ..deps
    };
    h.session = CallSession::start(call_info("rtc_tk"), json!({}), deps)
        .await
        .unwrap();
    h.rx = rx;
    h.session.submit(Invocation {
        call_id: "rtc_tk".into(),
        ..inv("fc1", "send_receipt", json!({}), None)
    });
    let d = h.next().await;
    assert_eq!(
        output(&d)["data"]["sent"],
        json!({"to": ["a@example.com", "b@example.com"], "subject": "Receipt", "from": "shop@example.com", "key": "rtc_tk-fc1-0"})
    );
    h.session.submit(inv("fc2", "book", json!({}), None));
    let d = h.next().await;
    assert!(
        output(&d)["message"]
            .as_str()
            .unwrap()
            .contains("no calendar handler is configured"),
        "{}",
        d.result.output
    );
    h.session.submit(inv("fc3", "bad_mail", json!({}), None));
    let d = h.next().await;
    assert!(
        output(&d)["message"]
            .as_str()
            .unwrap()
            .contains("do not fit"),
        "{}",
        d.result.output
    );
}

#[tokio::test]
async fn a_run_ends_by_the_deadline_decided_when_its_call_came() {
    // The door decided a 300 ms deadline from the figures it had (say the tool looked fast);
    // the tool declares none, so the book's figures now would give the 10 s default. The run
    // keeps the decision: it ends by 300 ms, and its record says the same deadline.
    let server = server_with_slow(1_500).await;
    let slow = tool(
        json!({"name": "lookup", "description": "d", "actions": [{"type": "api_call", "method": "GET", "url": format!("{}/slow", server.uri()), "retry_count": 0}]}),
    );
    let mut h = harness(vec![("main", vec![slow])], SessionOptions::default()).await;
    let policy: switchboard_runtime::adaptive::Policy = serde_json::from_value(json!({
        "budget_ms": 700, "slow": false, "timeout_ms": 300, "timeout_from": "observed"
    }))
    .unwrap();
    h.session
        .submit_decided(inv("fc1", "lookup", json!({}), None), policy);
    let d = h.next().await;
    assert_eq!(output(&d)["error"], "timeout", "{}", d.result.output);
}
