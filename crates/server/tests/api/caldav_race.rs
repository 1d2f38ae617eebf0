//! Two callers booking one free CalDAV slot at the same moment: exactly one gets it, the other
//! is offered free times, and the calendar holds one event (Radicale as the real server).

use reqwest::StatusCode;
use serde_json::json;

use crate::both_backends;
use crate::support::{Backend, TestApp, invoke, spawn_app};

both_backends!(two_callers_racing_for_one_caldav_slot, |app| {
    let radicale = crate::peers::Radicale::start().await;
    let cal = radicale.calendar("race").await;
    let key = app.tenant("acme").await;
    let (s, body) = app
        .put(
            "/v1/agents/desk",
            &key,
            json!({"default": true, "tools": [{"tool": "toolkit:caldav", "config": {"url": cal},
                "sensitive_config": {"username": "alice", "password": radicale.password}}]}),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{body}");
    for (call, from) in [("one", "+14155550101"), ("two", "+14155550102")] {
        app.post("/v1/calls", &key, json!({"call_id": call, "from": from}))
            .await;
    }
    for (round, start) in [
        "2030-01-07T10:00:00Z",
        "2030-01-07T13:00:00Z",
        "2030-01-08T09:00:00Z",
    ]
    .into_iter()
    .enumerate()
    {
        let fc = format!("book-{round}");
        let args = json!({"title": "Checkup", "start_time": start});
        let (a, b) = tokio::join!(
            invoke(&app, &key, "one", &fc, "create_event", args.clone()),
            invoke(&app, &key, "two", &fc, "create_event", args.clone()),
        );
        let answers = [a["result"].clone(), b["result"].clone()];
        let won = answers.iter().filter(|r| r["ok"] == true).count();
        assert_eq!(won, 1, "{start}: {answers:?}");
        let lost = answers.iter().find(|r| r["ok"] == false).unwrap();
        assert_eq!(lost["error"], "slot_taken", "{lost}");
        assert!(
            !lost["details"]["alternatives"]
                .as_array()
                .unwrap()
                .is_empty(),
            "{lost}"
        );
        let listed = invoke(
            &app,
            &key,
            "one",
            &format!("list-{round}"),
            "list_events",
            json!({"time_min": start, "time_max": start.replace("00:00Z", "59:00Z")}),
        )
        .await;
        assert_eq!(
            listed["result"]["data"]["events"].as_array().unwrap().len(),
            1,
            "{listed}"
        );
    }
});

both_backends!(two_callers_booking_overlapping_caldav_slots, |app| {
    let radicale = crate::peers::Radicale::start().await;
    let cal = radicale.calendar("overlap").await;
    let key = app.tenant("acme").await;
    let (s, body) = app
        .put(
            "/v1/agents/desk",
            &key,
            json!({"default": true, "tools": [{"tool": "toolkit:caldav", "config": {"url": cal},
                "sensitive_config": {"username": "alice", "password": radicale.password}}]}),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{body}");
    for (call, from) in [("one", "+14155550101"), ("two", "+14155550102")] {
        app.post("/v1/calls", &key, json!({"call_id": call, "from": from}))
            .await;
    }
    // Half-hour bookings whose starts differ (their resource names differ too): at most one
    // of each pair may land.
    for (round, (a, b, day)) in [
        ("2030-01-07T10:00:00Z", "2030-01-07T10:15:00Z", "2030-01-07"),
        ("2030-01-08T13:00:00Z", "2030-01-08T12:45:00Z", "2030-01-08"),
        ("2030-01-09T09:00:00Z", "2030-01-09T09:20:00Z", "2030-01-09"),
        ("2030-01-10T11:10:00Z", "2030-01-10T11:00:00Z", "2030-01-10"),
    ]
    .into_iter()
    .enumerate()
    {
        let fc = format!("book-{round}");
        let (x, y) = tokio::join!(
            invoke(
                &app,
                &key,
                "one",
                &fc,
                "create_event",
                json!({"title": "Checkup", "start_time": a, "duration_minutes": 30})
            ),
            invoke(
                &app,
                &key,
                "two",
                &fc,
                "create_event",
                json!({"title": "Checkup", "start_time": b, "duration_minutes": 30})
            ),
        );
        let answers = [x["result"].clone(), y["result"].clone()];
        let listed = invoke(
            &app,
            &key,
            "one",
            &format!("list-{round}"),
            "list_events",
            json!({"time_min": format!("{day}T00:00:00Z"), "time_max": format!("{day}T23:59:00Z")}),
        )
        .await;
        let events = listed["result"]["data"]["events"].as_array().unwrap();
        assert_eq!(events.len(), 1, "{a} / {b}: {answers:?} {listed}");
        let won: Vec<&serde_json::Value> = answers.iter().filter(|r| r["ok"] == true).collect();
        assert_eq!(won.len(), 1, "{a} / {b}: {answers:?}");
        assert_eq!(won[0]["data"]["id"], events[0]["id"], "{answers:?}");
        let lost = answers.iter().find(|r| r["ok"] == false).unwrap();
        assert_eq!(lost["error"], "slot_taken", "{lost}");
        assert!(
            !lost["details"]["alternatives"]
                .as_array()
                .unwrap()
                .is_empty(),
            "{lost}"
        );
    }
});
