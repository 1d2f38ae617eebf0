//! Races of bookings across two nodes sharing one database, on both calendars (the Google
//! simulator, a real Radicale): two callers booking one free slot at once, and a caller moving
//! their booking into a slot another caller books at the same moment, 20 rounds each. Each
//! round leaves exactly one event in the contested slot, the loser hears `slot_taken` (never a
//! failure while its event exists), and a move that loses leaves the booking where it was.

use std::future::Future;
use std::pin::Pin;

use reqwest::StatusCode;
use serde_json::{Value, json};
use switchboard_server::ServerConfig;
use switchboard_sim::google::GoogleSim;

use crate::google::{answer, connect, google_config, receptionist};
use crate::support::{self, Backend, TestApp, invoke, spawn_app_with};

const ROUNDS: u32 = 20;

/// The ids of the calendar's live events starting at `at` (`2030-03-01T11:00`, UTC).
type Lister<'a> = Box<dyn Fn(String) -> Pin<Box<dyn Future<Output = Vec<String>> + 'a>> + 'a>;

/// Two nodes over `app`'s database, the calls of both phases, and the rounds; `events_at`
/// lists a slot's live events as the calendar itself holds them.
async fn race(app: &TestApp, other: &TestApp, key: &str, events_at: Lister<'_>) {
    // Phase two's calls are their own, so no call passes the runaway guard's 60 a minute.
    for (node, call, from) in [
        (app, "caller-1", "+14155550101"),
        (other, "caller-2", "+14155550102"),
        (app, "caller-3", "+14155550103"),
        (other, "caller-4", "+14155550104"),
    ] {
        let (s, body) = node
            .post("/v1/calls", key, json!({"call_id": call, "from": from}))
            .await;
        assert_eq!(s, StatusCode::CREATED, "{body}");
    }
    for round in 0..ROUNDS {
        let start = format!("2030-03-{:02}T11:00", round + 1);
        let book = json!({"title": "Checkup", "start_time": format!("{start}:00Z")});
        let fc = format!("book-{round}");
        let (a, b) = tokio::join!(
            invoke(app, key, "caller-1", &fc, "create_event", book.clone()),
            invoke(other, key, "caller-2", &fc, "create_event", book.clone()),
        );
        let answers = [answer(&a).clone(), answer(&b).clone()];
        let won: Vec<&Value> = answers.iter().filter(|r| r["ok"] == true).collect();
        assert_eq!(won.len(), 1, "round {round}: {answers:?}");
        let lost = answers.iter().find(|r| r["ok"] == false).unwrap();
        assert_eq!(lost["error"], "slot_taken", "round {round}: {lost}");
        let live = events_at(start.clone()).await;
        assert_eq!(
            live,
            [won[0]["data"]["id"].as_str().unwrap()],
            "round {round}"
        );
    }
    for round in 0..ROUNDS {
        let day = format!("2030-04-{:02}", round + 1);
        let (old, new) = (format!("{day}T09:00"), format!("{day}T14:00"));
        let booked = invoke(
            app,
            key,
            "caller-3",
            &format!("first-{round}"),
            "create_event",
            json!({"title": "Checkup", "start_time": format!("{old}:00Z")}),
        )
        .await;
        let id = answer(&booked)["data"]["id"]
            .as_str()
            .unwrap_or_else(|| panic!("round {round}: {booked}"))
            .to_owned();
        let (move_fc, take_fc) = (format!("move-{round}"), format!("take-{round}"));
        let (moved, taken) = tokio::join!(
            invoke(
                app,
                key,
                "caller-3",
                &move_fc,
                "reschedule_event",
                json!({"event_id": id, "new_start_time": format!("{new}:00Z")}),
            ),
            invoke(
                other,
                key,
                "caller-4",
                &take_fc,
                "create_event",
                json!({"title": "Checkup", "start_time": format!("{new}:00Z")}),
            ),
        );
        let (moved, taken) = (answer(&moved).clone(), answer(&taken).clone());
        assert_ne!(
            moved["ok"], taken["ok"],
            "round {round}: exactly one gets the slot: {moved} {taken}"
        );
        assert_eq!(
            events_at(new.clone()).await.len(),
            1,
            "round {round}: {new}"
        );
        let kept = events_at(old.clone()).await;
        if moved["ok"] == true {
            assert_eq!(taken["error"], "slot_taken", "round {round}: {taken}");
            assert!(
                kept.is_empty(),
                "round {round}: the old slot is freed: {kept:?}"
            );
        } else {
            assert_eq!(moved["error"], "slot_taken", "round {round}: {moved}");
            assert_eq!(
                kept,
                [id.as_str()],
                "round {round}: the booking stays where it was"
            );
        }
    }
}

async fn google_races(backend: Backend) {
    let sim = GoogleSim::start().await.unwrap();
    let app = spawn_app_with(backend, google_config(&sim)).await;
    let key = receptionist(&app, "clinic").await;
    connect(&app, &key, &sim).await;
    let (base, state, stop, server) =
        support::start_with(&app.url, app.key.clone(), google_config(&sim)).await;
    let other = TestApp::view(&app, base);
    // Each looks at the slot before the other's event is stored.
    sim.set_insert_delay(std::time::Duration::from_millis(100));
    let events_at: Lister<'_> = Box::new(|at: String| {
        let sim = &sim;
        Box::pin(async move {
            sim.events("primary")
                .into_iter()
                .filter(|e| {
                    e["status"] != "cancelled"
                        && e["start"]["dateTime"]
                            .as_str()
                            .is_some_and(|s| s.starts_with(&at))
                })
                .filter_map(|e| e["id"].as_str().map(str::to_owned))
                .collect()
        })
    });
    race(&app, &other, &key, events_at).await;
    // Nothing a booking made was ever taken back: only the moves cancelled events.
    let cancelled = sim
        .events("primary")
        .iter()
        .filter(|e| e["status"] == "cancelled")
        .count();
    assert!(cancelled <= ROUNDS as usize, "{cancelled} events cancelled");
    let _ = stop.send(());
    let _ = server.await;
    state.store.close().await;
    app.stop().await;
}

async fn caldav_races(backend: Backend) {
    let radicale = crate::peers::Radicale::start().await;
    let cal = radicale.calendar("races").await;
    let config = ServerConfig {
        tenant_rate_per_s: 10_000,
        ..ServerConfig::default()
    };
    let app = spawn_app_with(backend, config.clone()).await;
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
    let (base, state, stop, server) = support::start_with(&app.url, app.key.clone(), config).await;
    let other = TestApp::view(&app, base);
    let (s, body) = app
        .post("/v1/calls", &key, json!({"call_id": "observer"}))
        .await;
    assert_eq!(s, StatusCode::CREATED, "{body}");
    let listed = std::sync::atomic::AtomicU32::new(0);
    let events_at: Lister<'_> = Box::new(|at: String| {
        let (app, key, listed) = (&app, &key, &listed);
        Box::pin(async move {
            let n = listed.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let r = invoke(
                app,
                key,
                "observer",
                &format!("list-{n}"),
                "list_events",
                json!({"time_min": format!("{at}:00Z"), "time_max": format!("{at}:59Z")}),
            )
            .await;
            answer(&r)["data"]["events"]
                .as_array()
                .unwrap_or_else(|| panic!("{r}"))
                .iter()
                .filter_map(|e| e["id"].as_str().map(str::to_owned))
                .collect()
        })
    });
    race(&app, &other, &key, events_at).await;
    let _ = stop.send(());
    let _ = server.await;
    state.store.close().await;
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn google_bookings_race_across_two_nodes_sqlite() {
    google_races(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn google_bookings_race_across_two_nodes_postgres() {
    google_races(Backend::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn caldav_bookings_race_across_two_nodes_sqlite() {
    caldav_races(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn caldav_bookings_race_across_two_nodes_postgres() {
    caldav_races(Backend::Postgres).await;
}
