//! Phone calls answered by GPT-Live, against the simulator's GPT-Live side: choosing the API per
//! number, dual webhook delivery, the accept body, the sideband tool loop (parallel calls, one
//! `response.create` per backend turn, the input budget, re-attach), handoff, transfer and
//! hang-up — with the same agent and tools as a Realtime call.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};
use switchboard_sim::{LiveSim, Simulator};
use wiremock::matchers::{method, path};
use wiremock::{Mock, ResponseTemplate};

use crate::phone_support::{CALLER, LIVE_NUMBER, Phone, PhoneSetup, RT_NUMBER, SECRET, WAIT};
use crate::support::{Backend, save_meal};

/// A server whose OpenAI is the simulator, and tenant `acme` answering `RT_NUMBER` through
/// Realtime and `LIVE_NUMBER` through GPT-Live with agent `assistant` (slow, long, async and
/// ending tools, handoff to `billing`, transfer).
pub(crate) async fn phone(backend: Backend) -> Phone {
    let mocks = vec![
        Mock::given(method("POST"))
            .and(path("/orders"))
            .respond_with(
                ResponseTemplate::new(201)
                    .set_body_json(json!({"order_id": "A-1"}))
                    .set_delay(Duration::from_millis(500)),
            ),
        Mock::given(method("GET")).and(path("/big")).respond_with(
            ResponseTemplate::new(200).set_body_json(json!({"text": "é".repeat(20_000)})),
        ),
    ];
    let phone = Phone::start(
        backend,
        PhoneSetup {
            mocks,
            phone: json!({
                "phone_numbers": {RT_NUMBER: "assistant", LIVE_NUMBER: {"agent": "assistant", "api": "live"}},
                "voice": "marin", "backend_model": "gpt-5.2-mini"}),
            tools,
        },
    )
    .await;
    let agent_tools: Vec<Value> = [
        "save_meal",
        "place_order",
        "big_report",
        "to_billing",
        "hang_up",
        "report",
        "transfer_and_note",
    ]
    .iter()
    .map(|t| json!({"tool": t}))
    .collect();
    let assistant = json!({"instructions": "You are Alex at Acme.", "default": true,
        "handoffs": ["billing"], "tools": agent_tools, "voice": "cedar",
        "live": {"model": "gpt-live-1.1", "voice_instructions": "Speak warmly and briefly."}});
    let body = phone.put_agent("assistant", assistant).await;
    assert_eq!(
        body["live"]["voice_instructions"],
        "Speak warmly and briefly."
    );
    let billing =
        json!({"instructions": "You are Billie in billing.", "tools": [{"tool": "pay_invoice"}]});
    phone.put_agent("billing", billing).await;
    phone
}

/// The tools of the GPT-Live tests, calling upstream `u`.
fn tools(u: &str) -> Vec<Value> {
    vec![
        save_meal(),
        json!({"name": "place_order", "description": "Place an order.",
               "parameters": [{"name": "item", "type": "string", "required": true}],
               "messages": {"start": "Placing your order now.", "delayed": "Still placing it, one moment.", "delayed_after_ms": 200},
               "actions": [{"type": "api_call", "method": "POST", "url": format!("{u}/orders"), "body": {"item": "{{params.item}}"}}],
               "on_success": [{"type": "respond", "message": "Order {{response.body.order_id}} placed."}]}),
        json!({"name": "big_report", "description": "A very long report.",
               "actions": [{"type": "api_call", "method": "GET", "url": format!("{u}/big")}],
               "on_success": [{"type": "respond", "message": "{{response.body.text}}"}]}),
        json!({"name": "to_billing", "description": "Hand the call to billing.",
               "actions": [{"type": "handoff", "agent": "billing", "reason": "billing question"}]}),
        json!({"name": "hang_up", "description": "End the call.",
               "actions": [{"type": "end_call", "message": "Thanks for calling, goodbye!"}]}),
        json!({"name": "pay_invoice", "description": "Pay an invoice.",
               "actions": [{"type": "respond", "message": "Paid."}]}),
        json!({"name": "report", "description": "Make a report in the background.", "async": true,
               "actions": [{"type": "api_call", "method": "POST", "url": format!("{u}/orders"), "body": {"item": "report"}}],
               "on_success": [{"type": "respond", "message": "The report is ready."}]}),
        json!({"name": "transfer_and_note", "description": "Transfer to support, then note it.",
               "actions": [{"type": "transfer", "destination": "support"},
                           {"type": "api_call", "method": "POST", "url": format!("{u}/orders"), "body": {"item": "transfer note"}}],
               "on_success": [{"type": "respond", "message": "Transferred."}]}),
    ]
}

/// The output sent for `call`, parsed.
pub(crate) async fn output(live: &LiveSim, session: &str, call: &str) -> Value {
    assert!(
        live.wait_until(session, WAIT, |l| l
            .outputs(session)
            .iter()
            .any(|(c, _)| c == call))
            .await,
        "no output for {call}"
    );
    let outputs = live.outputs(session);
    let (_, text) = outputs.iter().find(|(c, _)| c == call).expect("output");
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.clone()))
}

#[tokio::test]
async fn the_same_agent_and_tools_serve_a_realtime_call_and_a_live_call() {
    let phone = phone(Backend::Sqlite).await;
    // Realtime, as before.
    phone
        .sim
        .send_incoming_call(&phone.webhook(), SECRET, "rtc_1", CALLER, RT_NUMBER)
        .await
        .expect("webhook");
    let mut m = phone.sim.model("rtc_1", WAIT).await.expect("attached");
    let r = m.start_response().await;
    let args = json!({"meal_type": "lunch", "dishes": ["soup"]});
    m.function_call(&r, "call_rt", "save_meal", &args.to_string())
        .await;
    m.finish_response(&r, "completed").await;
    let ev = m
        .recv_type("conversation.item.create", WAIT)
        .await
        .expect("realtime output");
    let rt_out: Value =
        serde_json::from_str(ev["item"]["output"].as_str().expect("text")).expect("json");

    // GPT-Live: the accept body is the wrapped Live session with the agent's tools delegated.
    let backend = phone.ring_live("live_1").await;
    let session = phone.live.session("live_1").expect("accepted session");
    assert_eq!(session["type"], "live");
    assert_eq!(session["model"], "gpt-live-1.1");
    assert_eq!(session["instructions"], "Speak warmly and briefly.");
    assert_eq!(session["audio"]["output"]["voice"], "cedar");
    let responses = &session["delegation"]["responses"];
    assert_eq!(session["delegation"]["type"], "responses");
    assert_eq!(responses["model"], "gpt-5.2-mini");
    assert_eq!(responses["instructions"], "You are Alex at Acme.");
    assert_eq!(responses["parallel_tool_calls"], true);
    let names: Vec<&str> = responses["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(
        names.contains(&"save_meal") && names.contains(&"request_transfer"),
        "{names:?}"
    );
    let calls = backend.call_tools(&[("save_meal", args.clone())]);
    let live_out = output(&phone.live, "live_1", &calls[0]).await;
    assert_eq!(
        live_out, rt_out,
        "one tool, one answer, whichever API asked"
    );
    assert!(backend.wait_continued(&calls[0], WAIT).await, "continued");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(phone.live.response_creates("live_1"), 1);
    assert_eq!(phone.live.outputs("live_1").len(), 1, "answered once");
    // An async tool: answered at once, its result told to the voice model when it is ready.
    let calls = backend.call_tools(&[("report", json!({}))]);
    output(&phone.live, "live_1", &calls[0]).await;
    assert!(
        phone
            .live
            .wait_until("live_1", WAIT, |l| l
                .commentary("live_1")
                .iter()
                .any(|c| c.contains("The report is ready.")))
            .await,
        "{:?}",
        phone.live.commentary("live_1")
    );
    // Bad GPT-Live settings on an agent are refused with the field named.
    for (live, field, status) in [
        (json!({"model": ""}), "live.model", StatusCode::BAD_REQUEST),
        (
            json!({"backend": "x"}),
            "unknown field `backend`",
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        // Not an object: serde would read the settings from an array.
        (
            json!([null, null]),
            "live",
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            json!({"voice": 3}),
            "live",
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
    ] {
        let (s, body) = phone
            .app
            .put(
                "/v1/agents/other",
                &phone.key,
                json!({"instructions": "x", "live": live}),
            )
            .await;
        assert_eq!(s, status, "{body}");
        assert!(body.to_string().contains(field), "{body}");
    }
    // The call is recorded like any other.
    let (s, view) = phone.app.get("/v1/calls/live_1", &phone.key).await;
    assert_eq!(s, StatusCode::OK, "{view}");
    assert_eq!(
        view["invocations"].as_array().map(Vec::len),
        Some(2),
        "{view}"
    );
    phone.stop().await;
}

#[tokio::test]
async fn only_the_configured_apis_event_is_acted_on_and_one_call_switches_a_number() {
    let phone = phone(Backend::Sqlite).await;
    // A Realtime event for a GPT-Live number is acknowledged and ignored.
    let body = Simulator::incoming_call_event("rtc_dual", CALLER, LIVE_NUMBER).to_string();
    phone.sim.add_call("rtc_dual");
    let at = chrono_now();
    let status = Simulator::post_webhook(&phone.webhook(), SECRET, "wh_dual_rt", at, &body)
        .await
        .expect("webhook");
    assert_eq!(status, 200);
    // The deprecated Live event for the same call is acted on.
    phone.live.add_session("live_dual");
    let ev = LiveSim::incoming_event("live_dual", CALLER, LIVE_NUMBER, true).to_string();
    let status = Simulator::post_webhook(&phone.webhook(), SECRET, "wh_dual_live", at, &ev)
        .await
        .expect("webhook");
    assert_eq!(status, 200);
    phone
        .live
        .wait_request("accept", "live_dual", WAIT)
        .await
        .expect("the Live event is acted on");
    // A GPT-Live session on another transport is not a phone call: acknowledged, ignored.
    let mut webrtc = LiveSim::incoming_event("live_webrtc", CALLER, LIVE_NUMBER, false);
    webrtc["data"]["type"] = json!("webrtc");
    let status = Simulator::post_webhook(
        &phone.webhook(),
        SECRET,
        "wh_webrtc",
        at,
        &webrtc.to_string(),
    )
    .await
    .expect("webhook");
    assert_eq!(status, 200);
    // A repeat delivery is a duplicate.
    Simulator::post_webhook(&phone.webhook(), SECRET, "wh_dual_live", at, &ev)
        .await
        .expect("webhook");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        phone.sim.count("accept", "rtc_dual"),
        0,
        "Realtime left alone"
    );
    assert_eq!(phone.live.count("accept", "live_dual"), 1);
    assert_eq!(phone.live.count("accept", "live_webrtc"), 0);
    assert_eq!(phone.live.count("reject", "live_webrtc"), 0);

    // One API call moves the Realtime number to GPT-Live.
    let (s, body) = phone
        .app
        .put(
            &format!("/v1/phone_numbers/{RT_NUMBER}"),
            &phone.key,
            json!({"agent": "assistant", "api": "live"}),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{body}");
    assert_eq!(body["phone_numbers"][RT_NUMBER]["api"], "live");
    assert_eq!(body["voice"], "marin", "other settings are kept");
    let (s, body) = phone
        .app
        .put(
            &format!("/v1/phone_numbers/{RT_NUMBER}"),
            &phone.key,
            json!({"api": "gpt"}),
        )
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{body}");
    // A body that is not an object (serde would read the struct from an array), or a field of
    // the wrong type, is refused and changes nothing.
    for bad in [
        json!([null, null]),
        json!({"agent": 7}),
        json!({"number": "x"}),
    ] {
        let (s, body) = phone
            .app
            .put(
                &format!("/v1/phone_numbers/{RT_NUMBER}"),
                &phone.key,
                bad.clone(),
            )
            .await;
        assert!(s.is_client_error(), "{bad}: {s} {body}");
    }
    let (_, features) = phone.app.get("/v1/features", &phone.key).await;
    assert_eq!(
        features["realtime"]["phone_numbers"][RT_NUMBER]["api"], "live",
        "{features}"
    );
    phone
        .sim
        .send_incoming_call(&phone.webhook(), SECRET, "rtc_moved", CALLER, RT_NUMBER)
        .await
        .expect("webhook");
    phone
        .live
        .send_incoming(
            &phone.webhook(),
            SECRET,
            "live_moved",
            CALLER,
            RT_NUMBER,
            false,
        )
        .await
        .expect("webhook");
    phone
        .live
        .wait_request("accept", "live_moved", WAIT)
        .await
        .expect("GPT-Live answers the moved number");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(phone.sim.count("accept", "rtc_moved"), 0);
    phone.stop().await;
}

fn chrono_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(0))
}

#[tokio::test]
async fn parallel_calls_are_all_answered_before_one_response_create() {
    let phone = phone(Backend::Sqlite).await;
    let backend = phone.ring_live("live_par").await;
    let calls = backend.call_tools(&[
        ("place_order", json!({"item": "pizza"})),
        (
            "save_meal",
            json!({"meal_type": "dinner", "dishes": ["pizza"]}),
        ),
    ]);
    // The quick one is answered while the slow one runs: no continuation yet.
    output(&phone.live, "live_par", &calls[1]).await;
    assert_eq!(phone.live.response_creates("live_par"), 0);
    let order = output(&phone.live, "live_par", &calls[0]).await;
    assert!(order.to_string().contains("A-1"), "{order}");
    assert!(backend.wait_continued(&calls[0], WAIT).await);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(phone.live.response_creates("live_par"), 1);
    // The slow tool's start message, and its delayed one (it ran past 200 ms), went as
    // commentary for the voice model; the quick tool has none.
    assert_eq!(
        phone.live.commentary("live_par"),
        ["Placing your order now.", "Still placing it, one moment."]
    );
    phone.stop().await;
}

#[tokio::test]
async fn outputs_stay_within_the_backends_input_budget() {
    let phone = phone(Backend::Sqlite).await;
    let backend = phone.ring_live("live_big").await;
    // Longer than a turn's budget: cut, with the marker, on a character boundary.
    let calls = backend.call_tools(&[("big_report", json!({}))]);
    let out = output(&phone.live, "live_big", &calls[0]).await;
    let text = out.as_str().map_or_else(|| out.to_string(), str::to_owned);
    assert!(text.len() <= 30 * 1024, "{}", text.len());
    assert!(text.ends_with(switchboard_realtime::CUT_MARKER), "marked");
    assert!(backend.wait_continued(&calls[0], WAIT).await);
    // The session's budget is nearly spent: OpenAI refuses the next output, which is sent
    // again as the marker alone; the turn still continues once.
    let spent: usize = phone
        .live
        .outputs("live_big")
        .iter()
        .map(|(_, o)| o.len())
        .sum();
    phone.live.set_input_budget(spent + 200);
    let calls = backend.call_tools(&[("big_report", json!({}))]);
    assert!(
        backend.wait_continued(&calls[0], WAIT).await,
        "continued after the refusal"
    );
    let outputs = phone.live.outputs("live_big");
    let mine: Vec<&String> = outputs
        .iter()
        .filter(|(c, _)| c == &calls[0])
        .map(|(_, o)| o)
        .collect();
    assert_eq!(mine.len(), 2, "{mine:?}");
    assert!(mine[1].contains("was cut"), "{}", mine[1]);
    tokio::time::sleep(Duration::from_millis(200)).await;
    // One for the first turn; for the second, the one refused with the output and the one
    // after the marker.
    assert_eq!(phone.live.response_creates("live_big"), 3);
    phone.stop().await;
}

#[tokio::test]
async fn a_dropped_sideband_is_reattached_and_the_answer_arrives() {
    let phone = phone(Backend::Postgres).await;
    let backend = phone.ring_live("live_drop").await;
    let calls = backend.call_tools(&[("place_order", json!({"item": "tea"}))]);
    backend.drop_connection().await;
    let backend = phone
        .live
        .backend("live_drop", WAIT)
        .await
        .expect("re-attached");
    let out = output(&phone.live, "live_drop", &calls[0]).await;
    assert!(out.to_string().contains("A-1"), "{out}");
    assert!(backend.wait_continued(&calls[0], WAIT).await);
    assert_eq!(phone.live.attachments("live_drop"), 2);
    assert_eq!(phone.live.outputs("live_drop").len(), 1);
    phone.stop().await;
}

#[tokio::test]
async fn handoff_transfer_and_goodbye_use_gpt_lives_means() {
    let phone = phone(Backend::Sqlite).await;
    let backend = phone.ring_live("live_end").await;
    // Handoff: the backend reasons as billing from the next delegation on.
    let calls = backend.call_tools(&[("to_billing", json!({}))]);
    output(&phone.live, "live_end", &calls[0]).await;
    assert!(backend.wait_continued(&calls[0], WAIT).await);
    let updates = phone.live.session_updates("live_end");
    assert_eq!(updates.len(), 1, "{updates:?}");
    let session = phone.live.session("live_end").expect("session");
    let responses = &session["delegation"]["responses"];
    assert_eq!(responses["instructions"], "You are Billie in billing.");
    assert!(responses["tools"].to_string().contains("pay_invoice"));
    // Transfer: one REFER per target; the calls are answered, the backend not continued.
    let backend = phone.ring_live("live_xfer").await;
    let calls = backend.call_tools(&[("request_transfer", json!({"destination_id": "support"}))]);
    let first = output(&phone.live, "live_xfer", &calls[0]).await;
    let refer = phone
        .live
        .wait_request("refer", "live_xfer", WAIT)
        .await
        .unwrap_or_else(|| panic!("REFER; output {first}"));
    assert_eq!(refer.body, json!({"target_uri": "tel:+14155552000"}));
    output(&phone.live, "live_xfer", &calls[0]).await;
    let again = backend.call_tools(&[("request_transfer", json!({"destination_id": "support"}))]);
    output(&phone.live, "live_xfer", &again[0]).await;
    assert_eq!(phone.live.count("refer", "live_xfer"), 1);
    assert_eq!(phone.live.response_creates("live_xfer"), 0);

    // end_call's answer, then the goodbye, then the hang-up.
    let backend = phone.ring_live("live_bye").await;
    let calls = backend.call_tools(&[("hang_up", json!({}))]);
    assert!(
        phone
            .live
            .wait_until("live_bye", WAIT, |l| !l.commentary("live_bye").is_empty())
            .await
    );
    assert_eq!(
        phone.live.commentary("live_bye"),
        ["Thanks for calling, goodbye!"]
    );
    let frames: Vec<Value> = phone
        .live
        .frames("live_bye")
        .into_iter()
        .filter(|f| f["kind"] == "client_event")
        .map(|f| f["body"].clone())
        .collect();
    let at = |kind: &str| frames.iter().position(|e| e["type"] == kind);
    assert!(
        at("response.item.create")
            .is_some_and(|o| at("session.commentary.append").is_some_and(|c| o < c)),
        "end_call's output before the goodbye: {frames:?}"
    );
    assert_eq!(output(&phone.live, "live_bye", &calls[0]).await["ok"], true);
    assert_eq!(
        phone.live.count("hangup", "live_bye"),
        0,
        "not before the goodbye is said"
    );
    backend.say("Thanks for calling, goodbye!");
    phone
        .live
        .wait_request("hangup", "live_bye", WAIT)
        .await
        .expect("hung up");
    assert_eq!(phone.live.count("hangup", "live_bye"), 1);
    let app = &phone.app;
    let key = phone.key.clone();
    let record = |call: String, fc: String| {
        let key = key.clone();
        async move {
            for _ in 0..100 {
                let (_, view) = app.get(&format!("/v1/calls/{call}"), &key).await;
                if view["status"] == "ended" {
                    return view["invocations"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .find(|r| r["function_call_id"] == fc.as_str())
                        .cloned()
                        .unwrap_or_else(|| panic!("no record of {fc}: {view}"));
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            panic!("{call} did not end");
        }
    };
    let bye = record("live_bye".into(), calls[0].clone()).await;
    assert_eq!(
        (bye["ok"].clone(), bye["error"].clone()),
        (json!(true), Value::Null),
        "{bye}"
    );

    // A transfer whose tool goes on after the REFER, the caller gone meanwhile: recorded done.
    let backend = phone.ring_live("live_leaves").await;
    let calls = backend.call_tools(&[("transfer_and_note", json!({}))]);
    phone
        .live
        .wait_request("refer", "live_leaves", WAIT)
        .await
        .expect("REFER");
    backend.caller_hangs_up();
    let note = record("live_leaves".into(), calls[0].clone()).await;
    assert_eq!(
        (note["ok"].clone(), note["error"].clone()),
        (json!(true), Value::Null),
        "the REFER happened: {note}"
    );
    phone.stop().await;
}

/// The output sent for `call`, parsed, waiting up to `wait`.
async fn output_within(live: &LiveSim, session: &str, call: &str, wait: Duration) -> Value {
    assert!(
        live.wait_until(session, wait, |l| l
            .outputs(session)
            .iter()
            .any(|(c, _)| c == call))
            .await,
        "no output for {call}"
    );
    output(live, session, call).await
}

#[tokio::test]
async fn a_transfer_refused_at_its_destination_and_its_fallback_says_so_and_the_call_goes_on() {
    let phone = phone(Backend::Sqlite).await;
    phone.fall_back("sales", "support").await;
    let backend = phone.ring_live("live_xfer_no").await;
    phone.live.fail_next("refer", 500, 1);
    phone.live.fail_next("refer", 486, 1);
    let calls = backend.call_tools(&[("request_transfer", json!({"destination_id": "sales"}))]);
    let out = output(&phone.live, "live_xfer_no", &calls[0]).await;
    assert_eq!(out["error"], "call_transfer_failed", "{out}");
    assert_eq!(
        out["details"]["reason"],
        "the phone API refused the transfer (486 simulated_failure)"
    );
    let attempts = out["details"]["attempts"].as_array().expect("attempts");
    assert_eq!(
        attempts
            .iter()
            .map(|a| a["destination_id"].clone())
            .collect::<Vec<_>>(),
        [json!("sales"), json!("support")],
        "{out}"
    );
    assert_eq!(
        phone.live.count("refer", "live_xfer_no"),
        2,
        "one fallback, once"
    );
    // Not left silent: the backend is continued to speak about it; not hung up.
    assert!(backend.wait_continued(&calls[0], WAIT).await);
    assert_eq!(phone.live.count("hangup", "live_xfer_no"), 0);
    let record = phone.record("live_xfer_no", &calls[0]).await;
    assert_eq!(record["error"], "call_transfer_failed");
    let kept: Value = serde_json::from_str(record["output"].as_str().expect("output")).unwrap();
    assert_eq!(
        kept["details"]["attempts"], out["details"]["attempts"],
        "{record}"
    );
    // The call goes on.
    let meal = json!({"meal_type": "dinner", "dishes": ["rice"]});
    let next = backend.call_tools(&[("save_meal", meal)]);
    assert_eq!(
        output(&phone.live, "live_xfer_no", &next[0]).await["ok"],
        true
    );
    phone.stop().await;
}

#[tokio::test]
async fn a_refer_without_an_answer_in_time_is_a_failed_transfer() {
    let phone = phone(Backend::Sqlite).await;
    let backend = phone.ring_live("live_xfer_slow").await;
    phone
        .live
        .stall_next("refer", switchboard_realtime::REFER_TIMEOUT * 2, 1);
    let calls = backend.call_tools(&[("request_transfer", json!({"destination_id": "support"}))]);
    let out = output_within(
        &phone.live,
        "live_xfer_slow",
        &calls[0],
        switchboard_realtime::REFER_TIMEOUT + WAIT,
    )
    .await;
    assert_eq!(out["error"], "call_transfer_failed", "{out}");
    assert_eq!(
        out["details"]["reason"],
        "the phone API did not take the transfer: no answer in time"
    );
    assert!(backend.wait_continued(&calls[0], WAIT).await);
    assert_eq!(phone.live.count("hangup", "live_xfer_slow"), 0);
    phone.stop().await;
}
