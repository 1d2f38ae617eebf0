//! Google Calendar through the HTTP door, against the Google simulator: connect (start →
//! simulated consent → callback), check, book, retry, token expiry and refresh, revocation,
//! two nodes refreshing at once; no token in any answer, record, page or log line.

use std::io::Write;
use std::sync::{Arc, Mutex};

use reqwest::{Method, StatusCode, Url};
use secrecy::SecretString;
use serde_json::{Value, json};
use switchboard_server::ServerConfig;
use switchboard_server::state::GoogleSettings;
use switchboard_sim::google::{CLIENT_ID, CLIENT_SECRET, GoogleSim};
use switchboard_toolkits::oauth::OAuthProvider;

use crate::support::{self, Backend, TestApp, invoke, spawn_app, spawn_app_with};

/// The callback this deployment registered with Google; the test's "browser" follows the
/// simulator's redirect to the server it is testing.
const CALLBACK: &str = "https://switchboard.example.com/v1/oauth/callback";

fn google_config(sim: &GoogleSim) -> ServerConfig {
    ServerConfig {
        tenant_rate_per_s: 10_000,
        google: Some(GoogleSettings {
            provider: OAuthProvider {
                client_id: CLIENT_ID.to_owned(),
                client_secret: SecretString::from(CLIENT_SECRET),
                auth_url: Url::parse(&sim.auth_url()).unwrap(),
                token_url: Url::parse(&sim.token_url()).unwrap(),
                redirect_url: Url::parse(CALLBACK).unwrap(),
                scopes: vec!["https://www.googleapis.com/auth/calendar.events".to_owned()],
            },
            api_base: Url::parse(&sim.api_base()).unwrap(),
        }),
        ..ServerConfig::default()
    }
}

/// Log lines of this test's thread, to look for tokens in.
#[derive(Clone, Default)]
struct Logs(Arc<Mutex<Vec<u8>>>);

impl Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A tenant with an agent using Google Calendar; returns its key.
async fn receptionist(app: &TestApp, tenant: &str) -> String {
    let key = app.tenant(tenant).await;
    let agent = json!({"instructions": "Book appointments.", "default": true, "tools": [
        {"tool": "toolkit:google_calendar", "config": {"calendar_id": "primary", "default_event_duration": 45}}]});
    let (s, body) = app.put("/v1/agents/receptionist", &key, agent).await;
    assert_eq!(s, StatusCode::OK, "{body}");
    key
}

/// Start → the simulator's consent → the callback, as an operator's browser would.
async fn connect(app: &TestApp, key: &str, sim: &GoogleSim) -> Value {
    let (s, started) = app
        .post(
            "/v1/agents/receptionist/connections/google_calendar",
            key,
            json!({}),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{started}");
    let authorize = Url::parse(started["authorize_url"].as_str().unwrap()).unwrap();
    assert!(authorize.as_str().starts_with(&sim.auth_url()));
    let q: std::collections::HashMap<String, String> =
        authorize.query_pairs().into_owned().collect();
    assert_eq!(q["code_challenge_method"], "S256");
    assert_eq!(q["redirect_uri"], CALLBACK);
    let browser = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let consent = browser.get(authorize).send().await.unwrap();
    assert_eq!(consent.status(), StatusCode::FOUND);
    let back = Url::parse(consent.headers()["location"].to_str().unwrap()).unwrap();
    assert!(back.as_str().starts_with(CALLBACK), "{back}");
    let callback = format!("{}/v1/oauth/callback?{}", app.base, back.query().unwrap());
    let done = browser.get(&callback).send().await.unwrap();
    let status = done.status();
    let text = done.text().await.unwrap();
    assert_eq!(status, StatusCode::OK, "{text}");
    json!({"callback": callback, "page": text})
}

fn answer(r: &Value) -> &Value {
    &r["result"]
}

async fn scenario(app: Arc<TestApp>, sim: GoogleSim) {
    let key = receptionist(&app, "clinic").await;
    assert_eq!(app.get("/v1/connections", &key).await.1["items"], json!([]));
    // Before connecting, the model hears the calendar is not connected.
    app.post("/v1/calls", &key, json!({"call_id": "c0"})).await;
    let r = invoke(
        &app,
        &key,
        "c0",
        "f0",
        "list_events",
        json!({"time_min": "2030-01-07T09:00:00Z"}),
    )
    .await;
    assert_eq!(answer(&r)["ok"], false, "{r}");
    assert!(
        answer(&r)["message"]
            .as_str()
            .unwrap()
            .contains("not connected"),
        "{r}"
    );

    let connected = connect(&app, &key, &sim).await;
    // The state is single use.
    let (s, again) = app
        .call(
            Method::GET,
            connected["callback"]
                .as_str()
                .unwrap()
                .trim_start_matches(&app.base),
            "",
            None,
        )
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{again}");
    assert!(
        again["error"]["message"]
            .as_str()
            .unwrap()
            .contains("start the connection again")
    );
    let (_, list) = app.get("/v1/connections", &key).await;
    assert_eq!(
        (
            list["items"][0]["agent"].clone(),
            list["items"][0]["status"].clone()
        ),
        (json!("receptionist"), json!("connected")),
        "{list}"
    );

    app.post(
        "/v1/calls",
        &key,
        json!({"call_id": "c1", "from": "+14155550100"}),
    )
    .await;
    // The calendar's zone: working hours (09:00-17:00) are read on New York's clock.
    sim.set_time_zone("primary", "America/New_York");
    // Free → available.
    let r = invoke(
        &app,
        &key,
        "c1",
        "f1",
        "check_availability",
        json!({"date": "2030-01-07T10:00:00-05:00", "duration_minutes": 30}),
    )
    .await;
    assert_eq!(answer(&r)["data"]["available"], true, "{r}");
    // Busy → the conflicts and the next free slots, in the caller's offset.
    sim.add_event(
        "primary",
        "someone0else",
        "Other patient",
        "2030-01-07T14:00:00-05:00",
        "2030-01-07T15:10:00-05:00",
    );
    let r = invoke(
        &app,
        &key,
        "c1",
        "f2",
        "check_availability",
        json!({"date": "2030-01-07T14:30:00-05:00"}),
    )
    .await;
    let data = &answer(&r)["data"];
    assert_eq!(data["available"], false, "{r}");
    assert_eq!(data["conflicts"].as_array().unwrap().len(), 1, "{r}");
    assert_eq!(
        data["next_free_slots"][0]["start"], "2030-01-07T15:15:00-05:00",
        "{r}"
    );
    // Book: the default duration, attendees and description reach Google; the event carries
    // the calendar's zone.
    let r = invoke(
        &app,
        &key,
        "c1",
        "f3",
        "create_event",
        json!({"title": "Checkup", "start_time": "2030-01-07T10:00:00-05:00",
        "attendees": ["pat@example.com"], "description": "First visit"}),
    )
    .await;
    let booked = answer(&r)["data"].clone();
    assert_eq!(
        (booked["created"].clone(), booked["end"].clone()),
        (json!(true), json!("2030-01-07T10:45:00-05:00")),
        "{r}"
    );
    let stored = sim.events("primary");
    let ours = stored.iter().find(|e| e["id"] == booked["id"]).unwrap();
    assert_eq!(ours["attendees"], json!([{"email": "pat@example.com"}]));
    assert_eq!(ours["description"], "First visit");
    assert_eq!(ours["start"]["dateTime"], "2030-01-07T10:00:00-05:00");
    assert_eq!(ours["start"]["timeZone"], "America/New_York");
    // The same function call again is answered from the record; the effect performed again
    // with the same idempotency key (another node resuming it) finds its event.
    let r = invoke(
        &app,
        &key,
        "c1",
        "f3",
        "create_event",
        json!({"title": "Checkup", "start_time": "2030-01-07T10:00:00-05:00"}),
    )
    .await;
    assert_eq!(r["replayed"], true, "{r}");
    let calendar = app.state.effects.calendar.clone().unwrap();
    let config = json!({"calendar_id": "primary", "default_event_duration": 45,
        "oauth_connection": {"agent": "receptionist"}});
    let secrets = json!({});
    let scope = switchboard_runtime::effects::ToolkitScope {
        tenant_id: "clinic",
        call_id: "c1",
        caller: None,
        config: &config,
        secrets: &secrets,
        idempotency_key: "c1-f3-0",
    };
    let op = switchboard_runtime::effects::CalendarOp::CreateEvent {
        title: "Checkup".into(),
        start_time: "2030-01-07T10:00:00-05:00".into(),
        duration_minutes: None,
        attendees: None,
        description: None,
    };
    let again = calendar.call(&scope, &op).await.unwrap();
    assert_eq!(
        (again["id"].clone(), again["created"].clone()),
        (booked["id"].clone(), json!(false)),
        "{again}"
    );
    assert_eq!(sim.inserts(), 1, "booked once");
    // A slot someone else holds is refused with alternatives; nothing is booked.
    let r = invoke(
        &app,
        &key,
        "c1",
        "f4",
        "create_event",
        json!({"title": "Late", "start_time": "2030-01-07T14:00:00-05:00"}),
    )
    .await;
    assert_eq!(answer(&r)["ok"], false, "{r}");
    assert!(
        answer(&r)["message"]
            .as_str()
            .unwrap()
            .contains("2030-01-07T15:15:00-05:00"),
        "{r}"
    );
    assert_eq!(sim.inserts(), 1);
    // Listing: single events ordered by start.
    let r = invoke(
        &app,
        &key,
        "c1",
        "f5",
        "list_events",
        json!({"time_min": "2030-01-07T00:00:00-05:00"}),
    )
    .await;
    let titles: Vec<&str> = answer(&r)["data"]["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["title"].as_str().unwrap())
        .collect();
    assert_eq!(titles, ["Checkup", "Other patient"], "{r}");

    // The access token expires: one refresh (rotating the refresh token), and the call goes on.
    sim.expire_access_tokens();
    let r = invoke(
        &app,
        &key,
        "c1",
        "f6",
        "list_events",
        json!({"time_min": "2030-01-07T00:00:00Z"}),
    )
    .await;
    assert_eq!(answer(&r)["ok"], true, "{r}");
    let refreshes = |sim: &GoogleSim| {
        sim.token_requests()
            .iter()
            .filter(|g| *g == "refresh_token")
            .count()
    };
    assert_eq!(refreshes(&sim), 1);
    // Expired again: the rotated refresh token works (the old one no longer would).
    sim.expire_access_tokens();
    let r = invoke(
        &app,
        &key,
        "c1",
        "f7",
        "list_events",
        json!({"time_min": "2030-01-07T00:00:00Z"}),
    )
    .await;
    assert_eq!(
        (answer(&r)["ok"].clone(), refreshes(&sim)),
        (json!(true), 2),
        "{r}"
    );

    // Another tenant sees nothing of it.
    let other = app.tenant("other").await;
    assert_eq!(
        app.get("/v1/connections", &other).await.1["items"],
        json!([])
    );
    assert_eq!(
        app.delete(
            "/v1/agents/receptionist/connections/google_calendar",
            &other
        )
        .await
        .0,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        app.post(
            "/v1/agents/receptionist/connections/google_calendar",
            &other,
            json!({})
        )
        .await
        .0,
        StatusCode::NOT_FOUND
    );

    // Revoked: the model hears the calendar is not connected, the operator sees it broken.
    sim.revoke_all();
    let r = invoke(
        &app,
        &key,
        "c1",
        "f8",
        "check_availability",
        json!({"date": "2030-01-08T10:00:00Z"}),
    )
    .await;
    assert_eq!(answer(&r)["ok"], false, "{r}");
    assert!(
        answer(&r)["message"]
            .as_str()
            .unwrap()
            .contains("calendar is not connected"),
        "{r}"
    );
    let (_, list) = app.get("/v1/connections", &key).await;
    assert_eq!(list["items"][0]["status"], "broken", "{list}");
    assert!(
        list["items"][0]["error"]
            .as_str()
            .unwrap()
            .contains("invalid_grant"),
        "{list}"
    );
    // Broken stays broken without asking Google again; the call goes on.
    let before = sim.token_requests().len();
    let r = invoke(
        &app,
        &key,
        "c1",
        "f9",
        "list_events",
        json!({"time_min": "2030-01-07T00:00:00Z"}),
    )
    .await;
    assert!(
        answer(&r)["message"]
            .as_str()
            .unwrap()
            .contains("not connected"),
        "{r}"
    );
    assert_eq!(sim.token_requests().len(), before);

    // No token or code anywhere the tenant can look.
    let mut seen = String::new();
    for path in [
        "/v1/calls/c1",
        "/v1/calls/c0",
        "/v1/connections",
        "/v1/agents/receptionist",
        "/v1/agents/receptionist/toolset",
    ] {
        seen.push_str(&app.get(path, &key).await.1.to_string());
    }
    seen.push_str(connected["page"].as_str().unwrap());
    // The agent's name is not taken for a secret (it is not redacted from the call).
    let (_, view) = app.get("/v1/calls/c1", &key).await;
    assert!(view.to_string().contains("\"receptionist\""), "{view}");
    if let Some(t) = sim.leaks_into(&seen) {
        panic!("a token leaked: {t}");
    }
    // Disconnect removes it.
    assert_eq!(
        app.delete("/v1/agents/receptionist/connections/google_calendar", &key)
            .await
            .0,
        StatusCode::NO_CONTENT
    );
    assert_eq!(app.get("/v1/connections", &key).await.1["items"], json!([]));
}

async fn connect_book_refresh_revoke(backend: Backend) {
    let logs = Logs::default();
    let subscriber = tracing_subscriber::fmt()
        .with_writer({
            let logs = logs.clone();
            move || logs.clone()
        })
        .with_max_level(tracing::Level::DEBUG)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    let sim = GoogleSim::start().await.unwrap();
    let app = Arc::new(spawn_app_with(backend, google_config(&sim)).await);
    scenario(Arc::clone(&app), sim.clone()).await;
    let text = String::from_utf8_lossy(&logs.0.lock().unwrap()).into_owned();
    assert!(
        text.contains("oauth_connection_broken"),
        "the logs were captured"
    );
    for t in sim.issued() {
        assert!(!text.contains(&t), "a token in the logs: {t}");
    }
    if let Ok(app) = Arc::try_unwrap(app) {
        app.stop().await;
    }
}

#[tokio::test]
async fn connect_book_refresh_revoke_sqlite() {
    connect_book_refresh_revoke(Backend::Sqlite).await;
}

#[tokio::test]
async fn connect_book_refresh_revoke_postgres() {
    connect_book_refresh_revoke(Backend::Postgres).await;
}

async fn two_nodes_refresh_once(backend: Backend) {
    let sim = GoogleSim::start().await.unwrap();
    let app = spawn_app_with(backend, google_config(&sim)).await;
    let key = receptionist(&app, "clinic").await;
    connect(&app, &key, &sim).await;
    let (base, state, stop, server) =
        support::start_with(&app.url, app.key.clone(), google_config(&sim)).await;
    let other = TestApp::view(&app, base);
    app.post("/v1/calls", &key, json!({"call_id": "a"})).await;
    other.post("/v1/calls", &key, json!({"call_id": "b"})).await;
    sim.set_refresh_delay(std::time::Duration::from_millis(300));
    sim.expire_access_tokens();
    let args = json!({"time_min": "2030-01-07T00:00:00Z"});
    let (ra, rb) = tokio::join!(
        invoke(&app, &key, "a", "f1", "list_events", args.clone()),
        invoke(&other, &key, "b", "f1", "list_events", args.clone()),
    );
    assert_eq!(
        (answer(&ra)["ok"].clone(), answer(&rb)["ok"].clone()),
        (json!(true), json!(true)),
        "{ra} {rb}"
    );
    let refreshes = sim
        .token_requests()
        .iter()
        .filter(|g| *g == "refresh_token")
        .count();
    assert_eq!(refreshes, 1, "two nodes, one refresh");
    let _ = stop.send(());
    let _ = server.await;
    state.store.close().await;
    app.stop().await;
}

#[tokio::test]
async fn two_nodes_refresh_once_sqlite() {
    two_nodes_refresh_once(Backend::Sqlite).await;
}

#[tokio::test]
async fn two_nodes_refresh_once_postgres() {
    two_nodes_refresh_once(Backend::Postgres).await;
}

#[tokio::test]
async fn connecting_needs_an_oauth_toolkit_and_a_configured_client() {
    let app = spawn_app(Backend::Sqlite).await;
    let key = receptionist(&app, "clinic").await;
    let (s, body) = app
        .post(
            "/v1/agents/receptionist/connections/google_calendar",
            &key,
            json!({}),
        )
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--google-client-id"),
        "{body}"
    );
    let (s, body) = app
        .post(
            "/v1/agents/receptionist/connections/caldav",
            &key,
            json!({}),
        )
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("sensitive_config"),
        "{body}"
    );
    assert_eq!(
        app.post("/v1/agents/receptionist/connections/nope", &key, json!({}))
            .await
            .0,
        StatusCode::NOT_FOUND
    );
    let (s, body) = app
        .call(
            Method::GET,
            "/v1/oauth/callback?state=forged&code=x",
            "",
            None,
        )
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{body}");
    // An expired flow cannot be taken back.
    let store = &app.state.store;
    let (state, _) = store
        .begin_oauth("clinic", "receptionist", "google_calendar", 1_000, 2_000)
        .await
        .unwrap();
    assert!(
        store
            .take_oauth_state(&state, 3_000)
            .await
            .unwrap()
            .is_none()
    );
    let (state, _) = store
        .begin_oauth("clinic", "receptionist", "google_calendar", 1_000, 2_000)
        .await
        .unwrap();
    assert!(
        store
            .take_oauth_state(&state, 1_500)
            .await
            .unwrap()
            .is_some()
    );
    assert!(
        store
            .take_oauth_state(&state, 1_500)
            .await
            .unwrap()
            .is_none()
    );
    app.stop().await;
}

#[tokio::test]
async fn google_unreachable_is_a_clear_answer_and_the_call_goes_on() {
    let sim = GoogleSim::start().await.unwrap();
    let mut config = google_config(&sim);
    // Google's API down (nothing listens there); its OAuth endpoints up.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    if let Some(g) = config.google.as_mut() {
        g.api_base = Url::parse(&format!("http://127.0.0.1:{port}/calendar/v3/")).unwrap();
    }
    let app = spawn_app_with(Backend::Sqlite, config).await;
    let key = receptionist(&app, "clinic").await;
    connect(&app, &key, &sim).await;
    app.post("/v1/calls", &key, json!({"call_id": "c1"})).await;
    for fc in ["f1", "f2"] {
        let r = invoke(
            &app,
            &key,
            "c1",
            fc,
            "check_availability",
            json!({"date": "2030-01-07T10:00:00Z"}),
        )
        .await;
        let message = answer(&r)["message"].as_str().unwrap();
        assert_eq!(answer(&r)["ok"], false, "{r}");
        assert!(
            message.contains(&format!("http://127.0.0.1:{port} could not be reached")),
            "{message}"
        );
        assert!(
            !message.contains("/calendar/v3"),
            "no path in errors: {message}"
        );
    }
    app.stop().await;
}

#[tokio::test]
async fn two_callers_booking_one_free_slot_at_once_exactly_one_gets_it() {
    let sim = GoogleSim::start().await.unwrap();
    let app = spawn_app_with(Backend::Sqlite, google_config(&sim)).await;
    let key = receptionist(&app, "clinic").await;
    connect(&app, &key, &sim).await;
    app.post("/v1/calls", &key, json!({"call_id": "caller-1"}))
        .await;
    app.post("/v1/calls", &key, json!({"call_id": "caller-2"}))
        .await;
    // Both check the slot before either event is stored.
    sim.set_insert_delay(std::time::Duration::from_millis(200));
    let book = json!({"title": "Checkup", "start_time": "2030-01-07T11:00:00Z"});
    let (a, b) = tokio::join!(
        invoke(&app, &key, "caller-1", "f1", "create_event", book.clone()),
        invoke(&app, &key, "caller-2", "f1", "create_event", book.clone()),
    );
    let answers = [answer(&a).clone(), answer(&b).clone()];
    let won: Vec<&Value> = answers.iter().filter(|r| r["ok"] == true).collect();
    assert_eq!(won.len(), 1, "{answers:?}");
    let lost = answers.iter().find(|r| r["ok"] == false).unwrap();
    let message = lost["message"].as_str().unwrap();
    assert!(
        message.contains("already taken") && message.contains("2030-01-07T11:45:00Z"),
        "{message}"
    );
    let live: Vec<Value> = sim
        .events("primary")
        .into_iter()
        .filter(|e| e["status"] != "cancelled")
        .collect();
    assert_eq!(live.len(), 1, "{live:?}");
    assert_eq!(live[0]["id"], won[0]["data"]["id"]);
    app.stop().await;
}

#[tokio::test]
async fn free_slots_follow_the_calendars_zone_across_daylight_saving() {
    let sim = GoogleSim::start().await.unwrap();
    let app = spawn_app_with(Backend::Sqlite, google_config(&sim)).await;
    let key = receptionist(&app, "clinic").await;
    connect(&app, &key, &sim).await;
    sim.set_time_zone("primary", "America/New_York");
    app.post("/v1/calls", &key, json!({"call_id": "c1"})).await;
    // Saturday 16:30 EST for an hour: past the day's hours. New York springs forward that
    // night, so the next slot is Sunday 09:00 EDT (13:00Z), not 09:00 in the asked offset.
    let ask = json!({"date": "2030-03-09T16:30:00-05:00", "duration_minutes": 60});
    let r = invoke(&app, &key, "c1", "f1", "check_availability", ask.clone()).await;
    let data = &answer(&r)["data"];
    assert_eq!(data["available"], false, "{r}");
    assert_eq!(
        data["next_free_slots"][0],
        json!({"start": "2030-03-10T09:00:00-04:00", "end": "2030-03-10T10:00:00-04:00"}),
        "{r}"
    );
    assert!(
        data["reason"]
            .as_str()
            .unwrap()
            .contains("09:00-17:00 America/New_York"),
        "{r}"
    );
    // A zone in the config is not an IANA name: refused at save, with the nearest name.
    let agent = |zone: &str| {
        json!({"default": true, "tools": [{"tool": "toolkit:google_calendar",
            "config": {"calendar_id": "primary", "time_zone": zone}}]})
    };
    let (s, body) = app
        .put("/v1/agents/receptionist", &key, agent("Europe/Berln"))
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(
        body["error"]["details"][0]["pointer"], "/tools/0/config/time_zone",
        "{body}"
    );
    assert!(
        body["error"]["details"][0]["fix"]
            .as_str()
            .unwrap()
            .contains("Europe/Berlin"),
        "{body}"
    );
    // The config's zone wins over the calendar's: Berlin has not changed its clocks yet.
    let (s, body) = app
        .put("/v1/agents/receptionist", &key, agent("Europe/Berlin"))
        .await;
    assert_eq!(s, StatusCode::OK, "{body}");
    app.post("/v1/calls", &key, json!({"call_id": "c2"})).await;
    let r = invoke(&app, &key, "c2", "f1", "check_availability", ask).await;
    assert_eq!(
        answer(&r)["data"]["next_free_slots"][0]["start"],
        "2030-03-10T09:00:00+01:00",
        "{r}"
    );
    app.stop().await;
}
