//! The caller's own bookings on a real CalDAV server (Radicale): found by the caller's
//! number, moved and cancelled only by that caller; a move to a taken slot leaves the booking
//! where it was.

use reqwest::StatusCode;
use serde_json::json;

use crate::both_backends;
use crate::support::{Backend, TestApp, invoke, spawn_app};

both_backends!(
    a_caldav_caller_moves_and_cancels_only_their_own_bookings,
    |app| {
        let radicale = crate::peers::Radicale::start().await;
        let cal = radicale.calendar("own").await;
        let key = app.tenant("acme").await;
        let (s, body) = app
        .put(
            "/v1/agents/desk",
            &key,
            json!({"default": true, "tools": [{"tool": "toolkit:caldav", "config": {"url": cal, "time_zone": "UTC"},
                "sensitive_config": {"username": "alice", "password": radicale.password}}]}),
        )
        .await;
        assert_eq!(s, StatusCode::OK, "{body}");
        for (call, from) in [("pat", "+14155550101"), ("eve", "+14155550666")] {
            app.post("/v1/calls", &key, json!({"call_id": call, "from": from}))
                .await;
        }
        let r = invoke(
            &app,
            &key,
            "pat",
            "b1",
            "create_event",
            json!({"title": "Checkup", "start_time": "2030-01-07T10:00:00Z"}),
        )
        .await;
        let id = r["result"]["data"]["id"].as_str().unwrap().to_owned();
        let r = invoke(
            &app,
            &key,
            "eve",
            "b1",
            "create_event",
            json!({"title": "Checkup", "start_time": "2030-01-07T13:00:00Z"}),
        )
        .await;
        assert_eq!(r["result"]["ok"], true, "{r}");

        let r = invoke(&app, &key, "pat", "f1", "find_bookings", json!({})).await;
        let found = r["result"]["data"]["bookings"].as_array().unwrap().clone();
        assert_eq!(found.len(), 1, "{r}");
        assert_eq!(found[0]["id"], json!(id), "{r}");
        let r = invoke(
            &app,
            &key,
            "eve",
            "c1",
            "cancel_event",
            json!({"event_id": id}),
        )
        .await;
        assert_eq!(r["result"]["error"], "not_found", "{r}");
        // Pat's move onto Eve's slot: refused, the booking stays at 10:00.
        let r = invoke(
            &app,
            &key,
            "pat",
            "m1",
            "reschedule_event",
            json!({"event_id": id, "new_start_time": "2030-01-07T13:15:00Z"}),
        )
        .await;
        assert_eq!(r["result"]["error"], "slot_taken", "{r}");
        let r = invoke(&app, &key, "pat", "f2", "find_bookings", json!({})).await;
        assert_eq!(
            r["result"]["data"]["bookings"][0]["start"], "2030-01-07T10:00:00Z",
            "{r}"
        );
        let r = invoke(
            &app,
            &key,
            "pat",
            "m2",
            "reschedule_event",
            json!({"event_id": id, "new_start_time": "2030-01-07T11:00:00Z"}),
        )
        .await;
        assert_eq!(r["result"]["data"]["moved"], true, "{r}");
        let r = invoke(&app, &key, "pat", "f3", "find_bookings", json!({})).await;
        assert_eq!(
            r["result"]["data"]["bookings"][0]["start"], "2030-01-07T11:00:00Z",
            "{r}"
        );
        let r = invoke(
            &app,
            &key,
            "pat",
            "s1",
            "find_free_slots",
            json!({"day": "2030-01-07", "part_of_day": "morning", "duration_minutes": 60}),
        )
        .await;
        assert_eq!(
            r["result"]["data"]["slots"],
            json!([
        {"start": "2030-01-07T09:00:00Z", "end": "2030-01-07T10:00:00Z"},
        {"start": "2030-01-07T10:00:00Z", "end": "2030-01-07T11:00:00Z"}]),
            "{r}"
        );
        let r = invoke(
            &app,
            &key,
            "pat",
            "c1",
            "cancel_event",
            json!({"event_id": id}),
        )
        .await;
        assert_eq!(r["result"]["data"]["cancelled"], true, "{r}");
        let r = invoke(&app, &key, "pat", "f4", "find_bookings", json!({})).await;
        assert_eq!(r["result"]["data"]["bookings"], json!([]), "{r}");
    }
);

both_backends!(a_caldav_calendar_keeps_its_booking_rules, |app| {
    let radicale = crate::peers::Radicale::start().await;
    let cal = radicale.calendar("rules").await;
    let key = app.tenant("acme").await;
    let rules = json!({"hours": {"mon": [["09:00", "12:00"], ["13:00", "17:00"]], "tue": [["09:00", "17:00"]]},
        "closed_dates": ["2030-01-08"], "buffer_before_minutes": 30, "slot_minutes": 60});
    let (s, body) = app
        .put(
            "/v1/agents/desk",
            &key,
            json!({"default": true, "tools": [{"tool": "toolkit:caldav",
                "config": {"url": cal, "time_zone": "UTC", "rules": rules},
                "sensitive_config": {"username": "alice", "password": radicale.password}}]}),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{body}");
    app.post(
        "/v1/calls",
        &key,
        json!({"call_id": "pat", "from": "+14155550101"}),
    )
    .await;
    // Sunday: closed; the first time inside the rules is offered instead.
    let r = invoke(
        &app,
        &key,
        "pat",
        "a1",
        "check_availability",
        json!({"date": "2030-01-06T10:00:00Z"}),
    )
    .await;
    assert_eq!(r["result"]["error"], "outside_hours", "{r}");
    assert_eq!(r["result"]["details"]["available"], false, "{r}");
    assert_eq!(
        r["result"]["details"]["next_free_slots"][0],
        json!({"start": "2030-01-07T09:00:00Z", "end": "2030-01-07T10:00:00Z"}),
        "{r}"
    );
    let r = invoke(
        &app,
        &key,
        "pat",
        "b1",
        "create_event",
        json!({"title": "Checkup", "start_time": "2030-01-06T10:00:00Z"}),
    )
    .await;
    assert_eq!(r["result"]["error"], "outside_hours", "{r}");
    assert_eq!(
        r["result"]["details"]["alternatives"][0],
        json!({"start": "2030-01-07T09:00:00Z", "end": "2030-01-07T10:00:00Z"}),
        "{r}"
    );
    // Inside the rules: booked for the rules' slot length, with a link to the event that
    // names no credentials.
    let r = invoke(
        &app,
        &key,
        "pat",
        "b2",
        "create_event",
        json!({"title": "Checkup", "start_time": "2030-01-07T09:00:00Z"}),
    )
    .await;
    assert_eq!(r["result"]["data"]["end"], "2030-01-07T10:00:00Z", "{r}");
    let link = r["result"]["data"]["link"].as_str().unwrap();
    assert!(
        link.starts_with(cal.as_str()) && link.ends_with(".ics"),
        "{r}"
    );
    assert!(!link.contains(radicale.password), "{r}");
    let id = r["result"]["data"]["id"].as_str().unwrap().to_owned();
    // Free slots keep 30 minutes free before each booking and skip the lunch break.
    let r = invoke(
        &app,
        &key,
        "pat",
        "s1",
        "find_free_slots",
        json!({"day": "2030-01-07"}),
    )
    .await;
    let starts: Vec<&str> = r["result"]["data"]["slots"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["start"].as_str().unwrap())
        .collect();
    assert_eq!(
        starts,
        [
            "2030-01-07T10:30:00Z",
            "2030-01-07T13:00:00Z",
            "2030-01-07T14:00:00Z",
            "2030-01-07T15:00:00Z",
            "2030-01-07T16:00:00Z"
        ],
        "{r}"
    );
    // A move onto the closed date is refused; the booking stays.
    let r = invoke(
        &app,
        &key,
        "pat",
        "m1",
        "reschedule_event",
        json!({"event_id": id, "new_start_time": "2030-01-08T10:00:00Z"}),
    )
    .await;
    assert_eq!(r["result"]["error"], "outside_hours", "{r}");
    assert!(
        r["result"]["message"]
            .as_str()
            .unwrap()
            .contains("closed on 2030-01-08"),
        "{r}"
    );
    // A move says the booking stayed, not that nothing was booked.
    let said = r["result"]["message"].as_str().unwrap();
    assert!(
        said.contains("the booking was not moved") && !said.contains("nothing was booked"),
        "{r}"
    );
    let r = invoke(&app, &key, "pat", "f1", "find_bookings", json!({})).await;
    assert_eq!(
        r["result"]["data"]["bookings"][0]["start"], "2030-01-07T09:00:00Z",
        "{r}"
    );
});

both_backends!(a_caldav_booking_keeps_the_cancel_notice, |app| {
    let radicale = crate::peers::Radicale::start().await;
    let cal = radicale.calendar("notice").await;
    let key = app.tenant("acme").await;
    let all_day = json!([["00:00", "24:00"]]);
    let rules = json!({"hours": {"mon": all_day, "tue": all_day, "wed": all_day, "thu": all_day,
        "fri": all_day, "sat": all_day, "sun": all_day}, "cancel_notice_minutes": 720});
    let (s, body) = app
        .put(
            "/v1/agents/desk",
            &key,
            json!({"default": true, "tools": [{"tool": "toolkit:caldav",
                "config": {"url": cal, "time_zone": "UTC", "rules": rules},
                "sensitive_config": {"username": "alice", "password": radicale.password}}]}),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{body}");
    app.post(
        "/v1/calls",
        &key,
        json!({"call_id": "pat", "from": "+14155550101"}),
    )
    .await;
    let at = |hours: i64| {
        (chrono::Utc::now() + chrono::Duration::hours(hours))
            .format("%Y-%m-%dT%H:%M:00Z")
            .to_string()
    };
    let mut ids = Vec::new();
    for (fc, h) in [("b1", 2), ("b2", 48)] {
        let r = invoke(
            &app,
            &key,
            "pat",
            fc,
            "create_event",
            json!({"title": "Checkup", "start_time": at(h), "duration_minutes": 30}),
        )
        .await;
        ids.push(r["result"]["data"]["id"].as_str().unwrap().to_owned());
    }
    let r = invoke(
        &app,
        &key,
        "pat",
        "c1",
        "cancel_event",
        json!({"event_id": ids[0]}),
    )
    .await;
    assert_eq!(r["result"]["error"], "too_late_to_change", "{r}");
    let r = invoke(
        &app,
        &key,
        "pat",
        "m1",
        "reschedule_event",
        json!({"event_id": ids[0], "new_start_time": at(72)}),
    )
    .await;
    assert_eq!(r["result"]["error"], "too_late_to_change", "{r}");
    let r = invoke(&app, &key, "pat", "f1", "find_bookings", json!({})).await;
    assert_eq!(
        r["result"]["data"]["bookings"].as_array().unwrap().len(),
        2,
        "{r}"
    );
    let r = invoke(
        &app,
        &key,
        "pat",
        "c2",
        "cancel_event",
        json!({"event_id": ids[1]}),
    )
    .await;
    assert_eq!(r["result"]["data"]["cancelled"], true, "{r}");
});
