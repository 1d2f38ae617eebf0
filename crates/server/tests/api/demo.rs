//! The demo tenant: its calendar agent is ready for CalDAV and passes the toolkit's checks.

use reqwest::StatusCode;
use serde_json::json;
use switchboard_server::demo;

use crate::both_backends;
use crate::support::{Backend, TestApp, spawn_app};

both_backends!(the_demo_ships_a_caldav_ready_frontdesk, |app| {
    let key = demo::seed(&app.state).await.unwrap();
    let key = secrecy::ExposeSecret::expose_secret(&key).to_owned();
    let (s, agent) = app.get("/v1/agents/frontdesk", &key).await;
    assert_eq!(s, StatusCode::OK, "{agent}");
    assert_eq!(agent["tools"][0]["tool"], "toolkit:caldav");
    assert_eq!(agent["tools"][0]["config"]["url"], demo::CALDAV_URL);
    let (_, set) = app.get("/v1/agents/frontdesk/toolset", &key).await;
    let mut names: Vec<&str> = set["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "cancel_event",
            "check_availability",
            "create_event",
            "find_bookings",
            "find_free_slots",
            "list_events",
            "request_transfer",
            "reschedule_event"
        ]
    );
    // What the demo stored is what the API accepts (the toolkit's config schema).
    let (s, body) = app
        .put(
            "/v1/agents/frontdesk",
            &key,
            json!({"instructions": "Book.", "tools": [{"tool": "toolkit:caldav", "config": agent["tools"][0]["config"]}]}),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{body}");
    // Seeding again keeps what exists.
    demo::seed(&app.state).await.unwrap();
    assert_eq!(
        app.get("/v1/agents/frontdesk", &key).await.1["instructions"],
        "Book."
    );
});
