//! CalDAV calendars in a time zone: working hours on the zone's clock across a daylight-saving
//! change, and an event another client stored with `TZID=` local times read at its real instant
//! (Radicale as the real server).

use reqwest::StatusCode;
use serde_json::json;

use crate::both_backends;
use crate::support::{Backend, TestApp, invoke, spawn_app};

/// A 09:00-10:00 New York event on Monday 2030-03-11, the day after clocks sprang forward:
/// 13:00Z-14:00Z (it would be 14:00Z in EST, or 09:00Z if local times were read as UTC).
const TZID_EVENT: &str = "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//other client//EN\r\n\
BEGIN:VTIMEZONE\r\nTZID:America/New_York\r\n\
BEGIN:DAYLIGHT\r\nTZOFFSETFROM:-0500\r\nTZOFFSETTO:-0400\r\nTZNAME:EDT\r\nDTSTART:19700308T020000\r\nRRULE:FREQ=YEARLY;BYMONTH=3;BYDAY=2SU\r\nEND:DAYLIGHT\r\n\
BEGIN:STANDARD\r\nTZOFFSETFROM:-0400\r\nTZOFFSETTO:-0500\r\nTZNAME:EST\r\nDTSTART:19701101T020000\r\nRRULE:FREQ=YEARLY;BYMONTH=11;BYDAY=1SU\r\nEND:STANDARD\r\n\
END:VTIMEZONE\r\n\
BEGIN:VEVENT\r\nUID:tz-1\r\nDTSTAMP:20300101T000000Z\r\n\
DTSTART;TZID=America/New_York:20300311T090000\r\nDTEND;TZID=America/New_York:20300311T100000\r\n\
SUMMARY:Standup\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n";

both_backends!(a_caldav_calendar_in_a_time_zone, |app| {
    let radicale = crate::peers::Radicale::start().await;
    let cal = radicale.calendar("ny").await;
    radicale.put_ics(&cal, "tz-1", TZID_EVENT).await;
    let key = app.tenant("acme").await;
    let agent = |zone: &str| {
        json!({"default": true, "tools": [{"tool": "toolkit:caldav",
            "config": {"url": cal, "time_zone": zone},
            "sensitive_config": {"username": "alice", "password": radicale.password}}]})
    };
    let (s, body) = app
        .put("/v1/agents/desk", &key, agent("America/NewYork"))
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(
        body["error"]["details"][0]["pointer"], "/tools/0/config/time_zone",
        "{body}"
    );
    let (s, body) = app
        .put("/v1/agents/desk", &key, agent("America/New_York"))
        .await;
    assert_eq!(s, StatusCode::OK, "{body}");
    app.post("/v1/calls", &key, json!({"call_id": "c1"})).await;

    // The TZID event at its real instant.
    let r = invoke(
        &app,
        &key,
        "c1",
        "f1",
        "list_events",
        json!({"time_min": "2030-03-11T00:00:00Z"}),
    )
    .await;
    let events = &r["result"]["data"]["events"];
    assert_eq!(
        (events[0]["start"].clone(), events[0]["end"].clone()),
        (json!("2030-03-11T13:00:00Z"), json!("2030-03-11T14:00:00Z")),
        "{r}"
    );
    // It is in the way of 09:00 EDT; the next free hour is 10:00 on New York's clock.
    let r = invoke(
        &app,
        &key,
        "c1",
        "f2",
        "check_availability",
        json!({"date": "2030-03-11T09:00:00-04:00", "duration_minutes": 60}),
    )
    .await;
    let data = &r["result"]["data"];
    assert_eq!(data["available"], false, "{r}");
    assert_eq!(data["conflicts"][0]["id"], "tz-1", "{r}");
    assert_eq!(
        data["next_free_slots"][0]["start"], "2030-03-11T10:00:00-04:00",
        "{r}"
    );
    // Asked late on Saturday in EST: clocks change that night, and Sunday's first slot is
    // 09:00 EDT.
    let r = invoke(
        &app,
        &key,
        "c1",
        "f3",
        "check_availability",
        json!({"date": "2030-03-09T16:30:00-05:00", "duration_minutes": 60}),
    )
    .await;
    // Saturday 16:30-17:30 runs past the 17:00 close: refused as outside the hours, with the
    // free times to offer.
    assert_eq!(r["result"]["error"], "outside_hours", "{r}");
    assert_eq!(
        r["result"]["details"]["next_free_slots"][0]["start"], "2030-03-10T09:00:00-04:00",
        "{r}"
    );
});
