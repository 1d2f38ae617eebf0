//! A phone call books an appointment end to end, through the Realtime door (the OpenAI SIP
//! simulator) and real peers on loopback (Radicale for the calendar, aiosmtpd for email): the
//! caller is offered other times for a taken slot, books a free one, gets an email
//! confirmation, and is recognised when calling again.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};
use switchboard_server::ServerConfig;
use switchboard_sim::{ModelHandle, Simulator};

use crate::support::{Backend, spawn_app_with};

const SECRET: &str = "whsec_c2VjcmV0LWtleS1mb3ItdGVzdGluZy13ZWJob29rcy0xMjM0NTY=";
const NUMBER: &str = "+18005550100";
const CALLER: &str = "+14155550123";
const WAIT: Duration = Duration::from_secs(10);

/// The model calls `name` in a response of its own and gets its output.
async fn call_tool(m: &mut ModelHandle, fc: &str, name: &str, args: Value) -> Value {
    let r = m.start_response().await;
    m.function_call(&r, fc, name, &args.to_string()).await;
    m.finish_response(&r, "completed").await;
    loop {
        let ev = m
            .recv_type("conversation.item.create", WAIT)
            .await
            .unwrap_or_else(|| panic!("no output for {fc}; seen {:?}", m.seen()));
        if ev["item"]["type"] == "function_call_output" && ev["item"]["call_id"] == fc {
            return serde_json::from_str(ev["item"]["output"].as_str().unwrap()).unwrap();
        }
    }
}

#[tokio::test]
async fn a_caller_books_by_phone_gets_an_email_and_is_recognised_next_time() {
    let radicale = crate::peers::Radicale::start().await;
    let cal = radicale.calendar("clinic").await;
    radicale
        .put_event(
            &cal,
            "staff",
            "Staff meeting",
            "20300107T100000Z",
            "20300107T110000Z",
        )
        .await;
    let smtp = crate::peers::SmtpPeer::start().await;
    let sim = Simulator::start().await.expect("simulator");
    sim.set_api_key("sk-tenant-openai");
    let app = spawn_app_with(
        Backend::Sqlite,
        ServerConfig {
            tenant_rate_per_s: 10_000,
            openai: switchboard_realtime::Endpoints::from_api_base(&sim.base_url()),
            ..ServerConfig::default()
        },
    )
    .await;
    let key = app.tenant("clinic").await;
    let desk = json!({"instructions": "You book appointments at the clinic.", "default": true, "tools": [
        {"tool": "toolkit:caldav", "config": {"url": cal, "default_event_duration": 30},
         "sensitive_config": {"username": "alice", "password": radicale.password}},
        {"tool": "toolkit:email", "config": {"smtp_host": "127.0.0.1", "smtp_port": smtp.port,
         "security": "plain", "from_email": "desk@clinic.example", "from_name": "Clinic desk"}},
        {"tool": "toolkit:memory", "config": {"load_profile": true}},
    ]});
    let (s, body) = app.put("/v1/agents/desk", &key, desk).await;
    assert_eq!(s, StatusCode::OK, "{body}");
    let features = json!({"realtime": {"phone_numbers": {NUMBER: "desk"}}});
    assert_eq!(
        app.put("/v1/features", &key, features).await.0,
        StatusCode::OK
    );
    for (name, value) in [
        ("openai_api_key", "sk-tenant-openai"),
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
    let webhook = format!("{}/v1/realtime/webhook/clinic", app.base);
    let ring = |call_id: &'static str| {
        let (sim, webhook) = (&sim, webhook.clone());
        async move {
            let status = sim
                .send_incoming_call(&webhook, SECRET, call_id, CALLER, NUMBER)
                .await
                .expect("webhook");
            assert_eq!(status, 200);
            let accept = sim
                .wait_request("accept", call_id, WAIT)
                .await
                .expect("accepted");
            let model = sim.model(call_id, WAIT).await.expect("attached");
            (accept, model)
        }
    };

    // First call: the model sees the toolkits' functions.
    let (accept, mut m) = ring("rtc_first").await;
    let names: Vec<&str> = accept.body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    for f in [
        "check_availability",
        "create_event",
        "list_events",
        "send_email",
        "remember",
        "recall",
    ] {
        assert!(names.contains(&f), "{f} is offered: {names:?}");
    }
    // 10:00 is taken: the model is told what conflicts and which times are free.
    let taken = call_tool(
        &mut m,
        "fc1",
        "check_availability",
        json!({"date": "2030-01-07T10:00:00Z", "duration_minutes": 30}),
    )
    .await;
    assert_eq!(taken["data"]["available"], false, "{taken}");
    assert_eq!(
        taken["data"]["next_free_slots"][0]["start"], "2030-01-07T11:00:00Z",
        "{taken}"
    );
    // The caller takes the first free time.
    let booked = call_tool(&mut m, "fc2", "create_event",
        json!({"title": "Checkup", "start_time": "2030-01-07T11:00:00Z", "attendees": ["pat@example.com"]})).await;
    assert_eq!(booked["data"]["created"], true, "{booked}");
    let sent = call_tool(
        &mut m,
        "fc3",
        "send_email",
        json!({"to": "pat@example.com",
        "subject": "Your appointment", "body": "See you on 7 January at 11:00."}),
    )
    .await;
    assert_eq!(sent["ok"], true, "{sent}");
    let remembered = call_tool(
        &mut m,
        "fc4",
        "remember",
        json!({"content": "prefers morning appointments"}),
    )
    .await;
    assert_eq!(remembered["ok"], true, "{remembered}");
    // The slot is now taken in the calendar itself.
    let again = call_tool(
        &mut m,
        "fc5",
        "check_availability",
        json!({"date": "2030-01-07T11:00:00Z", "duration_minutes": 30}),
    )
    .await;
    assert_eq!(again["data"]["available"], false, "{again}");
    let mail = smtp.received();
    assert!(mail.contains("Subject: Your appointment"), "{mail}");
    assert!(mail.contains("See you on 7 January at 11:00."), "{mail}");
    let (s, _) = app.delete("/v1/calls/rtc_first", &key).await;
    assert!(s.is_success(), "{s}");

    // Second call from the same number: the agent knows the caller from the start.
    let (accept, mut m) = ring("rtc_second").await;
    let instructions = accept.body["instructions"].as_str().unwrap_or_default();
    assert!(
        instructions.contains("prefers morning appointments"),
        "{instructions}"
    );
    let recalled = call_tool(&mut m, "fc1", "recall", json!({"query": "appointments"})).await;
    assert!(
        recalled
            .to_string()
            .contains("prefers morning appointments"),
        "{recalled}"
    );
    let (_, first) = app.get("/v1/calls/rtc_first", &key).await;
    assert_eq!(first["invocations_total"], 5, "{first}");
    assert!(sim.violations().is_empty(), "{:?}", sim.violations());
    app.stop().await;
}
