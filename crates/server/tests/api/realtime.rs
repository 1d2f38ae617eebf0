//! Phone calls through the Realtime door, against the OpenAI Realtime SIP simulator: the webhook,
//! accept, the WebSocket tool loop, barge-in, handoff, transfer, hang-up, slow and async tools.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};
use switchboard_sim::{ModelHandle, Simulator};
use wiremock::matchers::{method, path};
use wiremock::{Mock, ResponseTemplate};

use crate::phone_support::{CALLER, Phone, PhoneSetup, RT_NUMBER as NUMBER, SECRET, WAIT};
use crate::support::{Backend, refer, save_meal};

/// A server whose OpenAI is the simulator, and tenant `acme` answering `NUMBER` with agent
/// `assistant` (save_meal, slow tools, handoff to `billing`, hang-up, transfer).
async fn phone(backend: Backend) -> Phone {
    let mocks = vec![
        Mock::given(method("GET")).and(path("/slow")).respond_with(
            ResponseTemplate::new(200)
                .set_body_json(json!({"status": "shipped"}))
                .set_delay(Duration::from_millis(600)),
        ),
        Mock::given(method("GET"))
            .and(path("/slower"))
            .respond_with(
                ResponseTemplate::new(200)
                    .set_body_json(json!({"status": "clean"}))
                    .set_delay(Duration::from_millis(2600)),
            ),
        Mock::given(method("POST"))
            .and(path("/orders"))
            .respond_with(
                ResponseTemplate::new(201)
                    .set_body_json(json!({"order_id": "A-1"}))
                    .set_delay(Duration::from_millis(600)),
            ),
    ];
    let phone = Phone::start(
        backend,
        PhoneSetup {
            mocks,
            phone: json!({"phone_numbers": {NUMBER: "assistant"}, "voice": "marin"}),
            tools,
        },
    )
    .await;
    let agent_tools: Vec<Value> = [
        "save_meal",
        "track_order",
        "place_order",
        "report",
        "to_billing",
        "hang_up",
        "transfer_and_note",
        "audit",
    ]
    .iter()
    .map(|t| json!({"tool": t}))
    .collect();
    let assistant = json!({"instructions": "You are Alex at Acme.", "default": true, "handoffs": ["billing"], "tools": agent_tools});
    phone.put_agent("assistant", assistant).await;
    let billing =
        json!({"instructions": "You are Billie in billing.", "tools": [{"tool": "pay_invoice"}]});
    phone.put_agent("billing", billing).await;
    phone
}

/// The tools of the Realtime tests, calling upstream `u`.
fn tools(u: &str) -> Vec<Value> {
    vec![
        save_meal(),
        json!({"name": "track_order", "description": "Where an order is.",
               "parameters": [{"name": "order", "type": "string", "required": true}],
               "messages": {"delayed": "Still checking, one moment.", "delayed_after_ms": 200},
               "actions": [{"type": "api_call", "method": "GET", "url": format!("{u}/slow")}],
               "on_success": [{"type": "respond", "message": "It is {{response.body.status}}."}]}),
        json!({"name": "audit", "description": "Audit the account.",
               "messages": {"delayed": "One moment, still on it.", "delayed_after_ms": 100},
               "actions": [{"type": "api_call", "method": "GET", "url": format!("{u}/slower")}],
               "on_success": [{"type": "respond", "message": "It is {{response.body.status}}."}]}),
        json!({"name": "place_order", "description": "Place an order.",
               "parameters": [{"name": "item", "type": "string", "required": true}],
               "actions": [{"type": "api_call", "method": "POST", "url": format!("{u}/orders"), "body": {"item": "{{params.item}}"}}],
               "on_success": [{"type": "respond", "message": "Order {{response.body.order_id}} placed."}]}),
        json!({"name": "report", "description": "Make a report in the background.", "async": true,
               "actions": [{"type": "api_call", "method": "GET", "url": format!("{u}/slow")}],
               "on_success": [{"type": "respond", "message": "The report is ready."}]}),
        json!({"name": "to_billing", "description": "Hand the call to billing.",
               "actions": [{"type": "handoff", "agent": "billing", "reason": "billing question"}]}),
        json!({"name": "hang_up", "description": "End the call.",
               "actions": [{"type": "end_call", "message": "Thanks for calling, goodbye!"}]}),
        json!({"name": "pay_invoice", "description": "Pay an invoice.",
               "actions": [{"type": "respond", "message": "Paid."}]}),
        json!({"name": "transfer_and_note", "description": "Transfer to support, then note it.",
               "actions": [{"type": "transfer", "destination": "support"},
                           {"type": "api_call", "method": "POST", "url": format!("{u}/orders"), "body": {"item": "transfer note"}}],
               "on_success": [{"type": "respond", "message": "Transferred."}]}),
    ]
}

/// One model response asking for one function call, completed.
async fn ask(m: &mut ModelHandle, fc: &str, name: &str, args: Value) -> String {
    let r = m.start_response().await;
    m.function_call(&r, fc, name, &args.to_string()).await;
    m.finish_response(&r, "completed").await;
    r
}

async fn output(m: &mut ModelHandle, fc: &str) -> Value {
    loop {
        let ev = m
            .recv_type("conversation.item.create", WAIT)
            .await
            .unwrap_or_else(|| panic!("no output for {fc}; seen {:?}", m.seen()));
        if ev["item"]["type"] == "function_call_output" && ev["item"]["call_id"] == fc {
            let text = ev["item"]["output"].as_str().expect("output is a string");
            return serde_json::from_str(text).expect("output is JSON");
        }
    }
}

/// No `response.create` arrives within a short while.
async fn no_response_create(m: &mut ModelHandle) {
    assert!(
        m.recv_type("response.create", Duration::from_millis(400))
            .await
            .is_none(),
        "unexpected response.create"
    );
}

async fn wait_until(what: &str, mut check: impl FnMut() -> bool) {
    for _ in 0..100 {
        if check() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("timed out waiting for {what}");
}

async fn call_view(phone: &Phone, call_id: &str) -> Value {
    let (s, body) = phone
        .app
        .get(&format!("/v1/calls/{call_id}"), &phone.key)
        .await;
    assert_eq!(s, StatusCode::OK, "{body}");
    body
}

#[tokio::test]
async fn incoming_call_is_accepted_and_its_tool_calls_answered() {
    for backend in [Backend::Sqlite, Backend::Postgres] {
        let phone = phone(backend).await;
        let mut m = phone.ring_realtime("rtc_basic").await;
        let accept = phone
            .sim
            .wait_request("accept", "rtc_basic", WAIT)
            .await
            .unwrap();
        assert_eq!(
            accept.authorization.as_deref(),
            Some("Bearer sk-tenant-openai")
        );
        assert_eq!(accept.body["type"], "realtime");
        assert_eq!(accept.body["instructions"], "You are Alex at Acme.");
        assert_eq!(accept.body["model"], "gpt-realtime");
        assert_eq!(accept.body["audio"]["output"]["voice"], "marin");
        let names: Vec<&str> = accept.body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        assert!(
            names.contains(&"save_meal") && names.contains(&"request_transfer"),
            "{names:?}"
        );
        assert!(!names.contains(&"pay_invoice"));
        // Unknown events and error events change nothing.
        m.send(json!({"type": "input_audio_buffer.dtmf_event_received", "event": "9", "received_at": 1}))
            .await;
        m.send(json!({"type": "error", "error": {"type": "invalid_request_error", "code": "invalid_event", "message": "x", "param": null, "event_id": "event_1"}}))
            .await;
        ask(
            &mut m,
            "call_1",
            "save_meal",
            json!({"meal_type": "lunch", "dishes": ["soup"]}),
        )
        .await;
        let out = output(&mut m, "call_1").await;
        assert_eq!(out["ok"], true, "{out}");
        assert_eq!(out["message"], "I've logged your lunch!");
        m.recv_type("response.create", WAIT)
            .await
            .expect("response.create");
        let call = call_view(&phone, "rtc_basic").await;
        assert_eq!(call["context"]["call"]["from"], CALLER);
        assert_eq!(call["context"]["call"]["to"], NUMBER);
        assert_eq!(
            call["context"]["workflow"]["logged_meals"][0]["meal_type"],
            "lunch"
        );
        assert_eq!(call["invocations"].as_array().unwrap().len(), 1);
        assert_eq!(call["live_on_this_node"], true);
        phone.stop().await;
    }
}

#[tokio::test]
async fn bad_stale_and_unsigned_webhooks_are_refused_and_nothing_is_accepted() {
    let phone = phone(Backend::Sqlite).await;
    let body = Simulator::incoming_call_event("rtc_forged", CALLER, NUMBER).to_string();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    phone.sim.add_call("rtc_forged");
    let wrong = "whsec_d3Jvbmctc2VjcmV0LWtleS1mb3ItdGVzdGluZy0xMjM0NTY3OA==";
    for (secret, ts) in [(wrong, now), (SECRET, now - 310), (SECRET, now + 310)] {
        let status = Simulator::post_webhook(&phone.webhook(), secret, "wh_1", ts, &body)
            .await
            .unwrap();
        assert_eq!(status, 401, "secret {secret} ts {ts}");
    }
    // No signature headers at all.
    let resp = reqwest::Client::new()
        .post(phone.webhook())
        .body(body.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 401);
    let err: Value = resp.json().await.unwrap();
    assert!(
        err["error"]["message"]
            .as_str()
            .unwrap()
            .contains("webhook-"),
        "{err}"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(phone.sim.count("accept", "rtc_forged"), 0);
    phone.stop().await;
}

#[tokio::test]
async fn a_repeated_webhook_id_accepts_the_call_once() {
    let phone = phone(Backend::Sqlite).await;
    let body = Simulator::incoming_call_event("rtc_dup", CALLER, NUMBER).to_string();
    phone.sim.add_call("rtc_dup");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    for _ in 0..3 {
        let status = Simulator::post_webhook(&phone.webhook(), SECRET, "wh_same", now, &body)
            .await
            .unwrap();
        assert_eq!(status, 200);
    }
    let _m = phone.sim.model("rtc_dup", WAIT).await.expect("attached");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(phone.sim.count("accept", "rtc_dup"), 1);
    phone.stop().await;
}

/// Calls are set up a bounded number at a time: with every place taken, a call's webhook is
/// still answered at once, and the call waits, unaccepted and unrecorded, until a place frees.
#[tokio::test]
async fn a_call_waits_for_a_set_up_place_and_its_webhook_does_not() {
    let phone = phone(Backend::Sqlite).await;
    let setups = std::sync::Arc::clone(&phone.app.state.call_setups);
    let taken = setups
        .acquire_many(switchboard_server::state::CALL_SETUPS_AT_ONCE as u32)
        .await
        .unwrap();
    let status = phone
        .sim
        .send_incoming_call(&phone.webhook(), SECRET, "rtc_waits", CALLER, NUMBER)
        .await
        .expect("webhook");
    assert_eq!(status, 200, "answered while no call can be set up");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(phone.sim.count("accept", "rtc_waits"), 0);
    let (status, _) = phone.app.get("/v1/calls/rtc_waits", &phone.key).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "not recorded yet");
    drop(taken);
    let mut m = phone.sim.model("rtc_waits", WAIT).await.expect("attached");
    ask(
        &mut m,
        "call_1",
        "save_meal",
        json!({"meal_type": "lunch", "dishes": ["soup"]}),
    )
    .await;
    assert_eq!(output(&mut m, "call_1").await["ok"], true);
    assert_eq!(
        setups.available_permits(),
        switchboard_server::state::CALL_SETUPS_AT_ONCE,
        "a call that is up holds no set-up place"
    );
    phone.stop().await;
}

#[tokio::test]
async fn a_number_without_an_agent_and_no_default_is_rejected() {
    let phone = phone(Backend::Sqlite).await;
    // Make no agent the default: calls to unknown numbers have nowhere to go.
    let (s, agent) = phone.app.get("/v1/agents/assistant", &phone.key).await;
    assert_eq!(s, StatusCode::OK);
    let tools: Vec<Value> = agent["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| json!({"tool": t["tool"]}))
        .collect();
    let def = json!({"instructions": agent["instructions"], "handoffs": ["billing"], "default": false, "tools": tools});
    assert_eq!(
        phone
            .app
            .put("/v1/agents/assistant", &phone.key, def)
            .await
            .0,
        StatusCode::OK
    );
    let status = phone
        .sim
        .send_incoming_call(
            &phone.webhook(),
            SECRET,
            "rtc_nobody",
            CALLER,
            "+19995550000",
        )
        .await
        .unwrap();
    assert_eq!(status, 200);
    let reject = phone
        .sim
        .wait_request("reject", "rtc_nobody", WAIT)
        .await
        .expect("rejected");
    assert_eq!(reject.body["status_code"], 404);
    assert_eq!(phone.sim.count("accept", "rtc_nobody"), 0);
    phone.stop().await;
}

#[tokio::test]
async fn barge_in_cancels_a_read_tool_and_asks_for_no_response() {
    let phone = phone(Backend::Sqlite).await;
    let mut m = phone.ring_realtime("rtc_read").await;
    let r = m.start_response().await;
    m.function_call(&r, "call_r", "track_order", r#"{"order":"A-1"}"#)
        .await;
    m.barge_in().await;
    let out = output(&mut m, "call_r").await;
    assert_eq!(out["ok"], false);
    assert_eq!(out["error"], "cancelled", "{out}");
    no_response_create(&mut m).await;
    phone.stop().await;
}

#[tokio::test]
async fn barge_in_mid_write_tool_still_delivers_its_real_result() {
    let phone = phone(Backend::Sqlite).await;
    let mut m = phone.ring_realtime("rtc_write").await;
    let r = m.start_response().await;
    m.function_call(&r, "call_w", "place_order", r#"{"item":"pizza"}"#)
        .await;
    m.barge_in().await;
    let out = output(&mut m, "call_w").await;
    assert_eq!(out["ok"], true, "{out}");
    assert_eq!(out["message"], "Order A-1 placed.");
    no_response_create(&mut m).await;
    phone.stop().await;
}

#[tokio::test]
async fn request_transfer_in_an_interrupted_response_sends_no_refer() {
    let phone = phone(Backend::Sqlite).await;
    let mut m = phone.ring_realtime("rtc_xfer_cut").await;
    let r = m.start_response().await;
    m.function_call(
        &r,
        "call_t",
        "request_transfer",
        r#"{"destination_id":"sales"}"#,
    )
    .await;
    m.barge_in().await;
    let out = output(&mut m, "call_t").await;
    assert_eq!(out["ok"], false, "{out}");
    assert_eq!(out["error"], "cancelled", "{out}");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(phone.sim.count("refer", "rtc_xfer_cut"), 0);
    phone.stop().await;
}

#[tokio::test]
async fn two_calls_in_one_response_get_two_outputs_and_one_response_create() {
    let phone = phone(Backend::Sqlite).await;
    let mut m = phone.ring_realtime("rtc_par").await;
    let r = m.start_response().await;
    m.function_call(
        &r,
        "call_a",
        "save_meal",
        r#"{"meal_type":"lunch","dishes":["soup"]}"#,
    )
    .await;
    m.function_call(&r, "call_b", "place_order", r#"{"item":"pizza"}"#)
        .await;
    m.finish_response(&r, "completed").await;
    m.recv_type("response.create", WAIT)
        .await
        .expect("one response.create");
    assert_eq!(phone.sim.outputs("rtc_par").len(), 2);
    no_response_create(&mut m).await;
    assert_eq!(phone.sim.response_creates("rtc_par").len(), 1);
    phone.stop().await;
}

#[tokio::test]
async fn a_transfer_refers_once_and_asks_for_no_response() {
    let phone = phone(Backend::Sqlite).await;
    let mut m = phone.ring_realtime("rtc_xfer").await;
    ask(
        &mut m,
        "call_t1",
        "request_transfer",
        json!({"destination_id": "support"}),
    )
    .await;
    let refer = phone
        .sim
        .wait_request("refer", "rtc_xfer", WAIT)
        .await
        .expect("REFER");
    assert_eq!(refer.body, json!({"target_uri": "tel:+14155552000"}));
    // Asked again: the call is being transferred already; no second REFER.
    ask(
        &mut m,
        "call_t2",
        "request_transfer",
        json!({"destination_id": "support"}),
    )
    .await;
    assert_eq!(output(&mut m, "call_t2").await["error"], "already_done");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(phone.sim.count("refer", "rtc_xfer"), 1);
    assert!(phone.sim.response_creates("rtc_xfer").is_empty());
    phone.stop().await;
}

#[tokio::test]
async fn a_failed_transfer_tells_the_model_and_the_call_goes_on() {
    let phone = phone(Backend::Sqlite).await;
    let mut m = phone.ring_realtime("rtc_xfer_fail").await;
    phone.sim.fail_next("refer", 500, 1);
    ask(
        &mut m,
        "call_t",
        "request_transfer",
        json!({"destination_id": "sales"}),
    )
    .await;
    let out = output(&mut m, "call_t").await;
    assert_eq!(out["ok"], false);
    assert_eq!(out["error"], "call_transfer_failed", "{out}");
    assert_eq!(
        out["details"]["reason"], "the phone API refused the transfer (500 simulated_failure)",
        "{out}"
    );
    m.recv_type("response.create", WAIT)
        .await
        .expect("the model handles it");
    assert_eq!(phone.sim.count("refer", "rtc_xfer_fail"), 1);
    // The call goes on.
    ask(
        &mut m,
        "call_2",
        "save_meal",
        json!({"meal_type": "dinner", "dishes": ["rice"]}),
    )
    .await;
    assert_eq!(output(&mut m, "call_2").await["ok"], true);
    phone.stop().await;
}

#[tokio::test]
async fn a_refused_transfer_tries_the_destinations_fallback_once_and_the_record_shows_both() {
    let phone = phone(Backend::Sqlite).await;
    phone.fall_back("sales", "support").await;
    let mut m = phone.ring_realtime("rtc_xfer_fb").await;
    phone.sim.fail_next("refer", 503, 1);
    ask(
        &mut m,
        "call_t",
        "request_transfer",
        json!({"destination_id": "sales"}),
    )
    .await;
    let out = output(&mut m, "call_t").await;
    assert_eq!(out["ok"], true, "{out}");
    assert_eq!(out["data"]["destination_id"], "support", "{out}");
    assert_eq!(
        out["data"]["failed_attempts"][0]["destination_id"], "sales",
        "{out}"
    );
    let bodies: Vec<Value> = phone
        .sim
        .requests()
        .into_iter()
        .filter(|r| r.action == "refer" && r.call_id == "rtc_xfer_fb")
        .map(|r| r.body)
        .collect();
    assert_eq!(
        bodies,
        [
            json!({"target_uri": "sip:sales@example.com"}),
            json!({"target_uri": "tel:+14155552000"})
        ]
    );
    // The record keeps the answer: where the call went, and the refusal before.
    let record = phone.record("rtc_xfer_fb", "call_t").await;
    assert_eq!(record["ok"], true, "{record}");
    let kept: Value = serde_json::from_str(record["output"].as_str().expect("output")).unwrap();
    assert_eq!(kept["data"], out["data"], "{record}");
    phone.stop().await;
}

#[tokio::test]
async fn a_handoff_updates_the_session_before_the_output() {
    let phone = phone(Backend::Sqlite).await;
    let mut m = phone.ring_realtime("rtc_handoff").await;
    ask(&mut m, "call_h", "to_billing", json!({})).await;
    let update = m
        .recv_type("session.update", WAIT)
        .await
        .expect("session.update");
    assert_eq!(
        update["session"]["instructions"],
        "You are Billie in billing."
    );
    let names: Vec<&str> = update["session"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"pay_invoice") && !names.contains(&"save_meal"),
        "{names:?}"
    );
    // The output comes after the update.
    let out = output(&mut m, "call_h").await;
    assert_eq!(out["ok"], true, "{out}");
    m.recv_type("response.create", WAIT)
        .await
        .expect("response.create");
    ask(&mut m, "call_p", "pay_invoice", json!({})).await;
    assert_eq!(output(&mut m, "call_p").await["message"], "Paid.");
    let call = call_view(&phone, "rtc_handoff").await;
    assert_eq!(call["context"]["call"]["agent"], "billing", "{call}");
    phone.stop().await;
}

/// The record of one function call in the call's view.
async fn record(phone: &Phone, call_id: &str, fc: &str) -> Value {
    let view = call_view(phone, call_id).await;
    view["invocations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["function_call_id"] == fc)
        .cloned()
        .unwrap_or_else(|| panic!("no record of {fc}: {view}"))
}

/// `end_call` is answered (its output before the goodbye), the goodbye is said, then the call
/// is hung up; the record says `ok`, not that the hang-up cancelled it.
#[tokio::test]
async fn end_call_is_answered_then_says_goodbye_then_hangs_up() {
    let phone = phone(Backend::Sqlite).await;
    let mut m = phone.ring_realtime("rtc_bye").await;
    ask(&mut m, "call_bye", "hang_up", json!({})).await;
    let goodbye = m.recv_type("response.create", WAIT).await.expect("goodbye");
    assert!(
        goodbye["response"]["instructions"]
            .as_str()
            .unwrap()
            .contains("Thanks for calling, goodbye!"),
        "{goodbye}"
    );
    let seen = m.seen();
    let answered = seen.iter().position(|e| {
        e["type"] == "conversation.item.create" && e["item"]["call_id"] == "call_bye"
    });
    assert!(
        answered.is_some_and(|at| at + 1 < seen.len()),
        "end_call's output before the goodbye: {seen:?}"
    );
    let out: Value =
        serde_json::from_str(seen[answered.unwrap()]["item"]["output"].as_str().unwrap()).unwrap();
    assert_eq!(out["ok"], true, "{out}");
    // Not hung up while the goodbye is being said.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(phone.sim.count("hangup", "rtc_bye"), 0);
    let r = m.active_response().expect("the goodbye response");
    m.finish_response(&r, "completed").await;
    phone
        .sim
        .wait_request("hangup", "rtc_bye", WAIT)
        .await
        .expect("hung up");
    assert_eq!(phone.sim.count("hangup", "rtc_bye"), 1);
    let app = &phone.app;
    let key = phone.key.clone();
    wait_until("the call to end", || {
        app.state.calls.get("acme", "rtc_bye").is_none()
    })
    .await;
    let (_, call) = app.get("/v1/calls/rtc_bye", &key).await;
    assert_eq!(call["status"], "ended", "{call}");
    let bye = record(&phone, "rtc_bye", "call_bye").await;
    assert_eq!(
        (bye["ok"].clone(), bye["error"].clone()),
        (json!(true), Value::Null),
        "{bye}"
    );
    assert_eq!(phone.sim.outputs("rtc_bye").len(), 1);
    phone.stop().await;
}

/// A transfer whose tool goes on after the REFER (it notes the transfer upstream) is answered
/// `ok` even when OpenAI closes the socket as the call leaves: the line waits for the answer
/// of the tool whose REFER it carried out before the call's end cancels what still runs.
#[tokio::test]
async fn a_transfer_is_recorded_as_done_when_the_call_leaves_before_its_tool_ends() {
    let phone = phone(Backend::Sqlite).await;
    let mut m = phone.ring_realtime("rtc_xfer_leaves").await;
    ask(&mut m, "call_tn", "transfer_and_note", json!({})).await;
    phone
        .sim
        .wait_request("refer", "rtc_xfer_leaves", WAIT)
        .await
        .expect("REFER");
    // The call leaves at once; the tool's note upstream takes 600 ms more.
    m.close().await;
    let app = &phone.app;
    wait_until("the call to end", || {
        app.state.calls.get("acme", "rtc_xfer_leaves").is_none()
    })
    .await;
    let note = record(&phone, "rtc_xfer_leaves", "call_tn").await;
    assert_eq!(
        (note["ok"].clone(), note["error"].clone()),
        (json!(true), Value::Null),
        "the REFER happened: {note}"
    );
    assert_eq!(phone.sim.count("refer", "rtc_xfer_leaves"), 1);
    phone.stop().await;
}

#[tokio::test]
async fn a_dropped_socket_is_reattached_and_the_output_delivered() {
    let phone = phone(Backend::Sqlite).await;
    let mut m = phone.ring_realtime("rtc_drop").await;
    ask(&mut m, "call_slow", "place_order", json!({"item": "pizza"})).await;
    m.drop_connection().await;
    let mut m = phone
        .sim
        .model("rtc_drop", WAIT)
        .await
        .expect("re-attached");
    let out = output(&mut m, "call_slow").await;
    assert_eq!(out["message"], "Order A-1 placed.", "{out}");
    m.recv_type("response.create", WAIT)
        .await
        .expect("response.create");
    phone.stop().await;
}

#[tokio::test]
async fn an_answer_ready_during_a_filler_cuts_it_and_the_continuation_follows_at_once() {
    let phone = phone(Backend::Sqlite).await;
    let mut m = phone.ring_realtime("rtc_slow").await;
    ask(&mut m, "call_s", "track_order", json!({"order": "A-1"})).await;
    let filler = m.recv_type("response.create", WAIT).await.expect("filler");
    assert!(
        filler["response"]["instructions"]
            .as_str()
            .unwrap()
            .contains("Still checking"),
        "{filler}"
    );
    assert_eq!(filler["response"]["tool_choice"], "none");
    let said = m.active_response().expect("the filler is being said");
    // The filler is still being said when the result arrives: it is cut, not waited for.
    let out = output(&mut m, "call_s").await;
    assert_eq!(out["ok"], true);
    let answered = std::time::Instant::now();
    let cancel = m
        .recv_type("response.cancel", WAIT)
        .await
        .expect("the filler is cancelled");
    assert_eq!(cancel["response_id"], said.as_str(), "{cancel}");
    let next = m
        .recv_type("response.create", WAIT)
        .await
        .expect("answer response");
    assert!(next.get("response").is_none(), "{next}");
    assert!(
        answered.elapsed() < Duration::from_millis(300),
        "the continuation waited {:?}",
        answered.elapsed()
    );
    assert_ne!(m.active_response(), Some(said), "a new response speaks");
    assert_eq!(phone.sim.response_creates("rtc_slow").len(), 2);
    phone.stop().await;
}

#[tokio::test]
async fn a_filler_said_before_the_answer_is_not_cancelled() {
    let phone = phone(Backend::Sqlite).await;
    let mut m = phone.ring_realtime("rtc_short_filler").await;
    ask(&mut m, "call_s", "track_order", json!({"order": "A-1"})).await;
    m.recv_type("response.create", WAIT).await.expect("filler");
    let r = m.active_response().expect("filler response");
    m.finish_response(&r, "completed").await;
    let out = output(&mut m, "call_s").await;
    assert_eq!(out["ok"], true);
    let next = m
        .recv_type("response.create", WAIT)
        .await
        .expect("answer response");
    assert!(next.get("response").is_none(), "{next}");
    assert!(
        !m.seen().iter().any(|e| e["type"] == "response.cancel"),
        "nothing to cut: {:?}",
        m.seen()
    );
    phone.stop().await;
}

#[tokio::test]
async fn a_slow_tool_gets_fillers_spaced_under_the_budget_each_in_new_words() {
    let phone = phone(Backend::Sqlite).await;
    let mut m = phone.ring_realtime("rtc_slower").await;
    ask(&mut m, "call_s", "audit", json!({})).await;
    let mut fillers = Vec::new();
    let mut gaps = Vec::new();
    let first = m.recv_type("response.create", WAIT).await.expect("filler");
    fillers.push(
        first["response"]["instructions"]
            .as_str()
            .unwrap()
            .to_owned(),
    );
    // Each filler is said in 300 ms; the next one comes once the caller heard nothing for the
    // agent's turn budget (700 ms by default), until the answer is ready (2.6 s in).
    let continuation = loop {
        tokio::time::sleep(Duration::from_millis(300)).await;
        if let Some(r) = m.active_response() {
            m.finish_response(&r, "completed").await;
        }
        let quiet = std::time::Instant::now();
        let next = m.recv_type("response.create", WAIT).await.expect("more");
        if next.get("response").is_none() {
            break next;
        }
        gaps.push(quiet.elapsed());
        fillers.push(
            next["response"]["instructions"]
                .as_str()
                .unwrap()
                .to_owned(),
        );
    };
    assert!(continuation.get("response").is_none());
    assert!(fillers.len() >= 2, "{fillers:?}");
    assert!(
        fillers[0].contains("One moment, still on it."),
        "{fillers:?}"
    );
    for later in &fillers[1..] {
        assert!(later.contains("words you have not used yet"), "{later}");
    }
    let mut distinct = fillers.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(
        distinct.len(),
        fillers.len(),
        "no filler twice: {fillers:?}"
    );
    for gap in &gaps {
        assert!(
            *gap >= Duration::from_millis(600) && *gap < Duration::from_millis(900),
            "silence between fillers {gap:?} (gaps {gaps:?})"
        );
    }
    assert!(
        m.seen()
            .iter()
            .any(|e| e["type"] == "conversation.item.create" && e["item"]["call_id"] == "call_s"),
        "the answer went out before its continuation"
    );
    phone.stop().await;
}

#[tokio::test]
async fn an_async_tool_answers_at_once_and_reports_later() {
    let phone = phone(Backend::Sqlite).await;
    let mut m = phone.ring_realtime("rtc_async").await;
    ask(&mut m, "call_rep", "report", json!({})).await;
    let first = output(&mut m, "call_rep").await;
    assert_eq!(first["message"], "started", "{first}");
    let r = {
        m.recv_type("response.create", WAIT)
            .await
            .expect("response.create");
        m.active_response().expect("active")
    };
    m.finish_response(&r, "completed").await;
    let news = loop {
        let ev = m
            .recv_type("conversation.item.create", WAIT)
            .await
            .expect("news");
        if ev["item"]["type"] == "message" {
            break ev;
        }
    };
    assert_eq!(news["item"]["role"], "system");
    assert!(
        news["item"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("The report is ready."),
        "{news}"
    );
    m.recv_type("response.create", WAIT)
        .await
        .expect("the model tells the caller");
    phone.stop().await;
}

#[tokio::test]
async fn fifty_concurrent_calls_each_get_their_answers() {
    let phone = phone(Backend::Sqlite).await;
    let mut tasks = Vec::new();
    for i in 0..50 {
        let sim = phone.sim.clone();
        let hook = phone.webhook();
        tasks.push(tokio::spawn(async move {
            let id = format!("rtc_many_{i}");
            assert_eq!(
                sim.send_incoming_call(&hook, SECRET, &id, CALLER, NUMBER)
                    .await
                    .unwrap(),
                200
            );
            let mut m = sim
                .model(&id, Duration::from_secs(20))
                .await
                .expect("attached");
            for j in 0..3 {
                let fc = format!("call_{i}_{j}");
                ask(
                    &mut m,
                    &fc,
                    "save_meal",
                    json!({"meal_type": "lunch", "dishes": [format!("dish {j}")]}),
                )
                .await;
                assert_eq!(output(&mut m, &fc).await["ok"], true);
                m.recv_type("response.create", Duration::from_secs(10))
                    .await
                    .expect("response.create");
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let (_, call) = phone.app.get("/v1/calls/rtc_many_7", &phone.key).await;
    assert_eq!(
        call["context"]["workflow"]["logged_meals"]
            .as_array()
            .unwrap()
            .len(),
        3,
        "{call}"
    );
    phone.stop().await;
}

/// One 2026-07-28 MCP request (no session, the revision on the request), with `credential`;
/// the HTTP status and the JSON-RPC message answering it.
async fn mcp(
    phone: &Phone,
    url: &str,
    credential: &str,
    method: &str,
    params: Value,
) -> (StatusCode, Value) {
    let mut params = params;
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    let mut req = phone
        .app
        .client
        .post(url)
        .bearer_auth(credential)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", method);
    if let Some(name) = params["name"].as_str() {
        req = req.header("mcp-name", name);
    }
    let r = req
        .json(&json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params}))
        .send()
        .await
        .unwrap();
    let status = r.status();
    let text = r.text().await.unwrap();
    // A JSON body, or a request-scoped event stream whose data line is the answer.
    let json = serde_json::from_str(&text).unwrap_or_else(|_| {
        text.lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
            .find(|m| m["id"] == 7)
            .unwrap_or(Value::Null)
    });
    (status, json)
}

/// `end_call` asked over the call's MCP endpoint (OpenAI's own MCP tool call) is answered to
/// that request at once, then the goodbye is said on the line and the call hung up: no model
/// response of the line is waited for, and the line does not wait for an answer it never gets.
#[tokio::test]
async fn end_call_over_the_calls_mcp_endpoint_is_answered_then_hangs_up() {
    let phone = phone(Backend::Sqlite).await;
    let mut features = refer();
    features["realtime"] = json!({"phone_numbers": {NUMBER: "assistant"}, "mcp_agents": ["assistant"],
        "public_url": phone.app.base});
    let (s, body) = phone.app.put("/v1/features", &phone.key, features).await;
    assert_eq!(s, StatusCode::OK, "{body}");
    let mut m = phone.ring_realtime("rtc_mcp_bye").await;
    let accept = phone
        .sim
        .wait_request("accept", "rtc_mcp_bye", WAIT)
        .await
        .unwrap();
    let url = accept.body["tools"][0]["server_url"]
        .as_str()
        .unwrap()
        .to_owned();
    let credential = accept.body["tools"][0]["headers"]["Authorization"]
        .as_str()
        .unwrap()
        .strip_prefix("Bearer ")
        .unwrap()
        .to_owned();
    let asked = std::time::Instant::now();
    let (s, answer) = mcp(
        &phone,
        &url,
        &credential,
        "tools/call",
        json!({"name": "hang_up", "arguments": {}}),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{answer}");
    assert_eq!(answer["result"]["isError"], false, "{answer}");
    assert!(
        asked.elapsed() < WAIT,
        "answered at once: {:?}",
        asked.elapsed()
    );
    let goodbye = m.recv_type("response.create", WAIT).await.expect("goodbye");
    assert!(
        goodbye["response"]["instructions"]
            .as_str()
            .unwrap()
            .contains("Thanks for calling, goodbye!"),
        "{goodbye}"
    );
    let r = m.active_response().expect("the goodbye response");
    m.finish_response(&r, "completed").await;
    phone
        .sim
        .wait_request("hangup", "rtc_mcp_bye", WAIT)
        .await
        .expect("hung up");
    assert!(
        phone.sim.outputs("rtc_mcp_bye").is_empty(),
        "answered over MCP, not on the line"
    );
    phone.stop().await;
}

#[tokio::test]
async fn an_mcp_agent_hands_openai_its_calls_own_mcp_endpoint() {
    let phone = phone(Backend::Sqlite).await;
    let mut features = refer();
    features["realtime"] = json!({"phone_numbers": {NUMBER: "assistant"}, "mcp_agents": ["assistant"],
        "public_url": phone.app.base});
    let (s, body) = phone
        .app
        .put("/v1/features", &phone.key, features.clone())
        .await;
    assert_eq!(s, StatusCode::OK, "{body}");
    let mut m = phone.ring_realtime("rtc_mcp").await;
    let accept = phone
        .sim
        .wait_request("accept", "rtc_mcp", WAIT)
        .await
        .unwrap();
    let tools = accept.body["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 1, "{tools:?}");
    assert_eq!(tools[0]["type"], "mcp");
    let url = tools[0]["server_url"].as_str().unwrap().to_owned();
    assert_eq!(url, format!("{}/v1/calls/rtc_mcp/mcp", phone.app.base));
    // Not the tenant's key: a credential for this call alone.
    let credential = tools[0]["headers"]["Authorization"]
        .as_str()
        .unwrap()
        .strip_prefix("Bearer ")
        .unwrap()
        .to_owned();
    assert!(credential.starts_with("sbc_"), "{credential}");
    assert!(!credential.contains(&phone.key));

    // OpenAI lists the call's tools and calls one: an invocation of the phone call itself.
    let (s, list) = mcp(&phone, &url, &credential, "tools/list", json!({})).await;
    assert_eq!(s, StatusCode::OK, "{list}");
    assert_eq!(list["result"]["ttlMs"], 0, "{list}");
    assert_eq!(list["result"]["cacheScope"], "private", "{list}");
    let names: Vec<&str> = list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"save_meal") && names.contains(&"to_billing"),
        "{names:?}"
    );
    let meal =
        json!({"name": "save_meal", "arguments": {"meal_type": "lunch", "dishes": ["soup"]}});
    let (s, answer) = mcp(&phone, &url, &credential, "tools/call", meal).await;
    assert_eq!(s, StatusCode::OK, "{answer}");
    assert_eq!(answer["result"]["isError"], false, "{answer}");
    assert_eq!(answer["result"]["_meta"]["switchboard/call_id"], "rtc_mcp");
    // The model's own function call on the line shares the context.
    ask(
        &mut m,
        "call_line",
        "save_meal",
        json!({"meal_type": "dinner", "dishes": ["rice"]}),
    )
    .await;
    assert_eq!(output(&mut m, "call_line").await["ok"], true);
    let call = call_view(&phone, "rtc_mcp").await;
    assert_eq!(
        call["context"]["workflow"]["logged_meals"],
        json!([{"meal_type": "lunch", "dishes": ["soup"]}, {"meal_type": "dinner", "dishes": ["rice"]}]),
        "{call}"
    );
    assert_eq!(call["invocations"].as_array().unwrap().len(), 2, "{call}");
    // The MCP call was answered over MCP, not on the line.
    assert_eq!(phone.sim.outputs("rtc_mcp").len(), 1);

    // A handoff through MCP brings the line's model the new agent, and the list changes.
    let (_, answer) = mcp(
        &phone,
        &url,
        &credential,
        "tools/call",
        json!({"name": "to_billing", "arguments": {}}),
    )
    .await;
    assert_eq!(answer["result"]["isError"], false, "{answer}");
    let update = m
        .recv_type("session.update", WAIT)
        .await
        .expect("session.update");
    assert_eq!(
        update["session"]["instructions"],
        "You are Billie in billing."
    );
    let (_, list) = mcp(&phone, &url, &credential, "tools/list", json!({})).await;
    let names: Vec<&str> = list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"pay_invoice") && !names.contains(&"save_meal"),
        "{names:?}"
    );

    // The credential opens nothing else: not the REST API, not another call's endpoint.
    let (s, _) = phone.app.get("/v1/calls/rtc_mcp", &credential).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    let _other = phone.ring_realtime("rtc_mcp_other").await;
    let other_url = format!("{}/v1/calls/rtc_mcp_other/mcp", phone.app.base);
    let (s, _) = mcp(&phone, &other_url, &credential, "tools/list", json!({})).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    // It expires with its call.
    let (s, _) = phone.app.delete("/v1/calls/rtc_mcp", &phone.key).await;
    assert!(s.is_success(), "{s}");
    let (s, _) = mcp(&phone, &url, &credential, "tools/list", json!({})).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);

    // A public URL is required with mcp_agents.
    features["realtime"]["public_url"] = Value::Null;
    let (s, body) = phone.app.put("/v1/features", &phone.key, features).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("public_url"),
        "{body}"
    );
    phone.stop().await;
}

#[tokio::test]
async fn after_a_transfer_every_function_call_still_gets_its_output() {
    let phone = phone(Backend::Sqlite).await;
    let mut m = phone.ring_realtime("rtc_xfer_out").await;
    ask(
        &mut m,
        "call_t",
        "request_transfer",
        json!({"destination_id": "support"}),
    )
    .await;
    phone
        .sim
        .wait_request("refer", "rtc_xfer_out", WAIT)
        .await
        .expect("REFER");
    // The transfer's own call is answered, without a response.create.
    let out = output(&mut m, "call_t").await;
    assert_eq!(out["ok"], true, "{out}");
    // So is a call the model makes while the call is leaving.
    ask(
        &mut m,
        "call_late",
        "save_meal",
        json!({"meal_type": "dinner", "dishes": ["rice"]}),
    )
    .await;
    assert_eq!(output(&mut m, "call_late").await["ok"], true);
    no_response_create(&mut m).await;
    assert!(phone.sim.response_creates("rtc_xfer_out").is_empty());
    assert_eq!(phone.sim.outputs("rtc_xfer_out").len(), 2);
    phone.stop().await;
}

#[tokio::test]
async fn a_normal_close_ends_the_line_without_a_reattach() {
    let phone = phone(Backend::Sqlite).await;
    let m = phone.ring_realtime("rtc_close").await;
    m.close().await;
    let app = &phone.app;
    wait_until("the call to end", || {
        app.state.calls.get("acme", "rtc_close").is_none()
    })
    .await;
    assert!(
        phone
            .sim
            .model("rtc_close", Duration::from_millis(500))
            .await
            .is_none(),
        "the socket was attached again after a normal close"
    );
    let call = call_view(&phone, "rtc_close").await;
    assert_eq!(call["status"], "ended", "{call}");
    phone.stop().await;
}

/// POSTs a delivery signed with `secret` and timestamp `ts`; returns the status and the body.
async fn deliver(url: &str, secret: &str, ts: &str, signed_ts: i64, body: &str) -> (u16, Value) {
    let resp = reqwest::Client::new()
        .post(url)
        .header("webhook-id", "wh_probe")
        .header("webhook-timestamp", ts)
        .header(
            "webhook-signature",
            Simulator::sign(secret, "wh_probe", signed_ts, body),
        )
        .header("content-type", "application/json")
        .body(body.to_owned())
        .send()
        .await
        .unwrap();
    (
        resp.status().as_u16(),
        resp.json().await.unwrap_or(Value::Null),
    )
}

fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

#[tokio::test]
async fn unknown_tenants_and_tenants_without_a_secret_are_answered_alike() {
    let phone = phone(Backend::Sqlite).await;
    phone.app.tenant("quiet-tenant").await;
    let body = Simulator::incoming_call_event("rtc_probe", CALLER, NUMBER).to_string();
    let now = unix_now();
    let ts = now.to_string();
    let url = |t: &str| format!("{}/v1/realtime/webhook/{t}", phone.app.base);
    let wrong = "whsec_d3Jvbmctc2VjcmV0LWtleS1mb3ItdGVzdGluZy0xMjM0NTY3OA==";
    let answers = [
        (
            "quiet-tenant",
            deliver(&url("quiet-tenant"), SECRET, &ts, now, &body).await,
        ),
        (
            "ghost-tenant",
            deliver(&url("ghost-tenant"), SECRET, &ts, now, &body).await,
        ),
        ("acme", deliver(&url("acme"), wrong, &ts, now, &body).await),
    ];
    for (tenant, (status, answer)) in &answers {
        assert_eq!(*status, 401, "{tenant}: {answer}");
        assert!(
            !answer.to_string().contains(tenant),
            "{tenant} is named: {answer}"
        );
        assert_eq!(
            answer["error"], answers[0].1.1["error"],
            "{tenant} is told apart"
        );
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(phone.sim.count("accept", "rtc_probe"), 0);
    phone.stop().await;
}

#[tokio::test]
async fn signed_webhooks_with_timestamps_out_of_range_are_refused() {
    let phone = phone(Backend::Sqlite).await;
    let body = Simulator::incoming_call_event("rtc_overflow", CALLER, NUMBER).to_string();
    phone.sim.add_call("rtc_overflow");
    let now = unix_now();
    for ts in [i64::MIN, -1, 0, i64::MAX, now - 400, now + 400] {
        // Correctly signed over the very timestamp sent.
        let (status, answer) = deliver(&phone.webhook(), SECRET, &ts.to_string(), ts, &body).await;
        assert_eq!(status, 401, "timestamp {ts}: {answer}");
        assert!(
            answer["error"]["message"]
                .as_str()
                .unwrap()
                .contains("webhook-timestamp"),
            "{answer}"
        );
    }
    for ts in [
        "+".to_owned() + &now.to_string(),
        format!("{now}.0"),
        "1e9".into(),
    ] {
        let (status, answer) = deliver(&phone.webhook(), SECRET, &ts, now, &body).await;
        assert_eq!(status, 401, "timestamp {ts}: {answer}");
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(phone.sim.count("accept", "rtc_overflow"), 0);
    // A sane timestamp with the same signing is taken.
    let (status, answer) = deliver(&phone.webhook(), SECRET, &now.to_string(), now, &body).await;
    assert_eq!(status, 200, "{answer}");
    phone
        .sim
        .wait_request("accept", "rtc_overflow", WAIT)
        .await
        .expect("accepted");
    phone.stop().await;
}
