//! Google Calendar through the HTTP door, against the Google simulator: connect (the API's
//! link → the tenant's console → simulated consent → callback in the same browser), check,
//! book, retry, token expiry and refresh, revocation, two nodes refreshing at once; a connect
//! link completed anywhere else connects nothing; no token in any answer, record, page or log
//! line.

use std::io::Write;
use std::sync::{Arc, Mutex};

use reqwest::{Method, StatusCode, Url};
use secrecy::{ExposeSecret, SecretString};
use serde_json::{Value, json};
use switchboard_server::ServerConfig;
use switchboard_server::state::GoogleSettings;
use switchboard_sim::google::{CLIENT_ID, CLIENT_SECRET, GoogleSim};
use switchboard_store::OAuthTake;
use switchboard_toolkits::oauth::OAuthProvider;

use crate::support::{self, Backend, TestApp, invoke, spawn_app, spawn_app_with};

/// The callback this deployment registered with Google; the test's "browser" follows the
/// simulator's redirect to the server it is testing.
const CALLBACK: &str = "https://switchboard.example.com/v1/oauth/callback";

pub(crate) fn google_config(sim: &GoogleSim) -> ServerConfig {
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
pub(crate) async fn receptionist(app: &TestApp, tenant: &str) -> String {
    let key = app.tenant(tenant).await;
    let agent = json!({"instructions": "Book appointments.", "default": true, "tools": [
        {"tool": "toolkit:google_calendar", "config": {"calendar_id": "primary", "default_event_duration": 45}}]});
    let (s, body) = app.put("/v1/agents/receptionist", &key, agent).await;
    assert_eq!(s, StatusCode::OK, "{body}");
    key
}

/// A browser: its own cookies (the console's session, flow cookies), sent by hand.
#[derive(Default)]
struct Browser {
    cookies: Vec<(String, String)>,
}

fn no_redirects() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

impl Browser {
    /// A browser signed in to `key`'s console.
    async fn signed_in(app: &TestApp, key: &str) -> (Browser, String) {
        let b = crate::console::sign_in(app, key).await;
        let (name, value) = b.cookie.split_once('=').unwrap();
        let browser = Browser {
            cookies: vec![(name.to_owned(), value.to_owned())],
        };
        (browser, b.csrf)
    }

    fn header(&self) -> String {
        self.cookies
            .iter()
            .map(|(n, v)| format!("{n}={v}"))
            .collect::<Vec<_>>()
            .join("; ")
    }

    /// Keeps the cookies an answer sets (and forgets those it clears).
    fn keep(&mut self, r: &reqwest::Response) {
        for set in r.headers().get_all("set-cookie") {
            let set = set.to_str().unwrap();
            let (name, rest) = set.split_once('=').unwrap();
            let value = rest.split(';').next().unwrap();
            self.cookies.retain(|(n, _)| n != name);
            if !set.contains("Max-Age=0") {
                self.cookies.push((name.to_owned(), value.to_owned()));
            }
        }
    }

    async fn get(&mut self, url: &str) -> reqwest::Response {
        let r = no_redirects()
            .get(url)
            .header("cookie", self.header())
            .send()
            .await
            .unwrap();
        self.keep(&r);
        r
    }

    /// Presses the connect page's button (an htmx post): the consent page's URL.
    async fn start_connect(&mut self, app: &TestApp, csrf: &str, agent: &str) -> Url {
        let r = no_redirects()
            .post(format!(
                "{}/console/agents/{agent}/connections/google_calendar",
                app.base
            ))
            .header("cookie", self.header())
            .header("X-CSRF-Token", csrf)
            .header("HX-Request", "true")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK);
        let set = r.headers()["set-cookie"].to_str().unwrap().to_owned();
        for attr in [
            "HttpOnly",
            "SameSite=Lax",
            "Path=/v1/oauth/callback",
            "Max-Age=600",
            "Secure",
        ] {
            assert!(set.contains(attr), "the flow cookie has {attr}: {set}");
        }
        self.keep(&r);
        let to = r.headers()["hx-redirect"].to_str().unwrap().to_owned();
        Url::parse(&to).unwrap()
    }

    /// Consents at the simulator and follows its redirect back to the server under test:
    /// the callback's status and page.
    async fn consent(&mut self, app: &TestApp, authorize: Url) -> (StatusCode, String, String) {
        let callback = consent_callback(app, authorize).await;
        let done = self.get(&callback).await;
        let status = done.status();
        (status, done.text().await.unwrap(), callback)
    }
}

/// The simulator's consent for `authorize`: the callback URL it sends the browser to, on the
/// server under test.
async fn consent_callback(app: &TestApp, authorize: Url) -> String {
    let q: std::collections::HashMap<String, String> =
        authorize.query_pairs().into_owned().collect();
    assert_eq!(q["code_challenge_method"], "S256");
    assert_eq!(q["redirect_uri"], CALLBACK);
    let consent = no_redirects().get(authorize).send().await.unwrap();
    assert_eq!(consent.status(), StatusCode::FOUND);
    let back = Url::parse(consent.headers()["location"].to_str().unwrap()).unwrap();
    assert!(back.as_str().starts_with(CALLBACK), "{back}");
    format!("{}/v1/oauth/callback?{}", app.base, back.query().unwrap())
}

/// The API's link → the tenant's console → the simulator's consent → the callback, in one
/// browser, as an operator would.
pub(crate) async fn connect(app: &TestApp, key: &str, sim: &GoogleSim) -> Value {
    let (s, started) = app
        .post(
            "/v1/agents/receptionist/connections/google_calendar",
            key,
            json!({}),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{started}");
    assert_eq!(
        started["connect_url"],
        "https://switchboard.example.com/console/agents/receptionist/connections/google_calendar",
        "{started}"
    );
    let (mut browser, csrf) = Browser::signed_in(app, key).await;
    let authorize = browser.start_connect(app, &csrf, "receptionist").await;
    assert!(authorize.as_str().starts_with(&sim.auth_url()));
    let (status, page, callback) = browser.consent(app, authorize).await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert!(
        browser
            .cookies
            .iter()
            .all(|(n, _)| !n.starts_with("sb_oauth_")),
        "the flow cookie is cleared"
    );
    json!({"callback": callback, "page": page})
}

pub(crate) fn answer(r: &Value) -> &Value {
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
            .contains("used already")
    );
    assert!(
        connected["page"]
            .as_str()
            .unwrap()
            .contains("Connected: tenant `clinic`, agent `receptionist`"),
        "{connected}"
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
    // An expired flow cannot be taken back; a flow is taken once, by its own browser only.
    let store = &app.state.store;
    let flow = store
        .begin_oauth("clinic", "receptionist", "google_calendar", 1_000, 2_000)
        .await
        .unwrap();
    let binding = flow.binding.expose_secret().to_owned();
    assert!(matches!(
        store
            .take_oauth_state(&flow.state, Some(&binding), 3_000)
            .await
            .unwrap(),
        OAuthTake::Unknown
    ));
    let flow = store
        .begin_oauth("clinic", "receptionist", "google_calendar", 1_000, 2_000)
        .await
        .unwrap();
    let binding = flow.binding.expose_secret().to_owned();
    for other in [None, Some("another-browsers-binding"), Some("")] {
        assert!(matches!(
            store
                .take_oauth_state(&flow.state, other, 1_500)
                .await
                .unwrap(),
            OAuthTake::OtherBrowser
        ));
    }
    assert!(matches!(
        store
            .take_oauth_state(&flow.state, Some(&binding), 1_500)
            .await
            .unwrap(),
        OAuthTake::Taken(p) if p.tenant_id == "clinic" && p.agent == "receptionist"
    ));
    assert!(matches!(
        store
            .take_oauth_state(&flow.state, Some(&binding), 1_500)
            .await
            .unwrap(),
        OAuthTake::Unknown
    ));
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
        assert_eq!(answer(&r)["error"], "calendar_unavailable", "{r}");
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

/// Ten rounds of two callers booking one free slot at the same moment: each round the
/// calendar gets exactly one event (the loser never inserts, so nothing is ever taken back),
/// the winner's carries its call and caller, and the loser hears `slot_taken` with free
/// alternatives, never that the calendar failed.
async fn two_callers_booking_one_free_slot_at_once(backend: Backend) {
    let sim = GoogleSim::start().await.unwrap();
    let app = spawn_app_with(backend, google_config(&sim)).await;
    let key = receptionist(&app, "clinic").await;
    connect(&app, &key, &sim).await;
    for (call, from) in [("caller-1", "+14155550101"), ("caller-2", "+14155550102")] {
        app.post("/v1/calls", &key, json!({"call_id": call, "from": from}))
            .await;
    }
    // Both look at the slot before either event is stored.
    sim.set_insert_delay(std::time::Duration::from_millis(100));
    for round in 0..10 {
        let start = format!("2030-01-{:02}T11:00:00Z", 7 + round);
        let fc = format!("book-{round}");
        let book = json!({"title": "Checkup", "start_time": start});
        let (a, b) = tokio::join!(
            invoke(&app, &key, "caller-1", &fc, "create_event", book.clone()),
            invoke(&app, &key, "caller-2", &fc, "create_event", book.clone()),
        );
        let answers = [answer(&a).clone(), answer(&b).clone()];
        let won: Vec<&Value> = answers.iter().filter(|r| r["ok"] == true).collect();
        assert_eq!(won.len(), 1, "round {round}: {answers:?}");
        let lost = answers.iter().find(|r| r["ok"] == false).unwrap();
        assert_eq!(lost["error"], "slot_taken", "round {round}: {lost}");
        let alternatives = lost["details"]["alternatives"].as_array().unwrap();
        assert!(!alternatives.is_empty(), "{lost}");
        assert_ne!(alternatives[0]["start"], json!(start), "{lost}");
        assert!(
            !lost["message"].as_str().unwrap().contains("fail"),
            "{lost}"
        );
        let day = &start[..10];
        let live: Vec<Value> = sim
            .events("primary")
            .into_iter()
            .filter(|e| {
                e["status"] != "cancelled"
                    && e["start"]["dateTime"].as_str().unwrap().starts_with(day)
            })
            .collect();
        assert_eq!(live.len(), 1, "round {round}: {live:?}");
        assert_eq!(live[0]["id"], won[0]["data"]["id"]);
        let private = &live[0]["extendedProperties"]["private"];
        let winner = if answers[0]["ok"] == true { 1 } else { 2 };
        assert_eq!(
            private["switchboard_call"],
            format!("caller-{winner}"),
            "{private}"
        );
        assert_eq!(
            private["switchboard_caller"],
            format!("+1415555010{winner}"),
            "{private}"
        );
    }
    assert_eq!(sim.inserts(), 10, "no loser ever inserted");
    assert!(
        sim.events("primary")
            .iter()
            .all(|e| e["status"] != "cancelled"),
        "no event was taken back"
    );
    app.stop().await;
}

#[tokio::test]
async fn two_callers_booking_one_free_slot_at_once_sqlite() {
    two_callers_booking_one_free_slot_at_once(Backend::Sqlite).await;
}

#[tokio::test]
async fn two_callers_booking_one_free_slot_at_once_postgres() {
    two_callers_booking_one_free_slot_at_once(Backend::Postgres).await;
}

/// Google's rate limit (403 `rateLimitExceeded`, 429) is `rate_limited`, told apart from a
/// refused account (403 `forbidden`: `not_connected`); an unreachable API is
/// `calendar_unavailable`.
#[tokio::test]
async fn googles_refusals_are_typed() {
    let sim = GoogleSim::start().await.unwrap();
    let app = spawn_app_with(Backend::Sqlite, google_config(&sim)).await;
    let key = receptionist(&app, "clinic").await;
    connect(&app, &key, &sim).await;
    app.post("/v1/calls", &key, json!({"call_id": "c1"})).await;
    let cases = [
        (403, "rateLimitExceeded", "rate_limited"),
        (403, "userRateLimitExceeded", "rate_limited"),
        (429, "rateLimitExceeded", "rate_limited"),
        (403, "forbidden", "not_connected"),
        (503, "backendError", "calendar_unavailable"),
    ];
    for (i, (status, reason, code)) in cases.into_iter().enumerate() {
        sim.fail_next(1, status, reason);
        let r = invoke(
            &app,
            &key,
            "c1",
            &format!("f{i}"),
            "list_events",
            json!({"time_min": "2030-01-07T09:00:00Z"}),
        )
        .await;
        assert_eq!(answer(&r)["error"], code, "{status} {reason}: {r}");
    }
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
    assert_eq!(answer(&r)["error"], "outside_hours", "{r}");
    let data = &answer(&r)["details"];
    assert_eq!(data["available"], false, "{r}");
    assert_eq!(
        data["next_free_slots"][0],
        json!({"start": "2030-03-10T09:00:00-04:00", "end": "2030-03-10T10:00:00-04:00"}),
        "{r}"
    );
    assert!(
        answer(&r)["message"]
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
        answer(&r)["details"]["next_free_slots"][0]["start"],
        "2030-03-10T09:00:00+01:00",
        "{r}"
    );
    app.stop().await;
}

/// Tenant B's operator starts a connect flow; the consent link, opened anywhere else (a
/// victim's browser with no cookie, another tenant's operator with a flow of their own),
/// connects nothing; a callback pushed into B's operator's browser for someone else's flow
/// connects nothing either. Only B's own browser completes B's flow, and its page says which
/// tenant and agent it connected.
async fn a_connect_link_completes_only_in_the_browser_that_started_it(backend: Backend) {
    let sim = GoogleSim::start().await.unwrap();
    let app = spawn_app_with(backend, google_config(&sim)).await;
    let key_b = receptionist(&app, "clinic").await;
    let key_a = app.tenant("other").await;
    let desk = json!({"instructions": "Desk.", "tools": [
        {"tool": "toolkit:google_calendar", "config": {"calendar_id": "primary"}}]});
    let (s, body) = app.put("/v1/agents/desk", &key_a, desk).await;
    assert_eq!(s, StatusCode::OK, "{body}");
    let exchanges = |sim: &GoogleSim| {
        sim.token_requests()
            .iter()
            .filter(|g| *g == "authorization_code")
            .count()
    };
    let page = "/console/agents/receptionist/connections/google_calendar";

    // The API's link is the console page, which needs a session of the tenant: without one,
    // to the sign-in page and back; another tenant's session finds no such agent.
    let (s, started) = app
        .post(
            "/v1/agents/receptionist/connections/google_calendar",
            &key_b,
            json!({}),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{started}");
    assert!(started.get("authorize_url").is_none(), "{started}");
    let r = Browser::default().get(&format!("{}{page}", app.base)).await;
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert_eq!(
        r.headers()["location"],
        "/console/signin?next=%2Fconsole%2Fagents%2Freceptionist%2Fconnections%2Fgoogle_calendar"
    );
    // Signing in there comes back to the page.
    let back = no_redirects()
        .post(format!("{}/console/signin", app.base))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!(
            "key={key_b}&next=%2Fconsole%2Fagents%2Freceptionist%2Fconnections%2Fgoogle_calendar"
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(back.status(), StatusCode::SEE_OTHER);
    assert_eq!(back.headers()["location"], page);
    let (mut tenant_a, csrf_a) = Browser::signed_in(&app, &key_a).await;
    assert_eq!(
        tenant_a.get(&format!("{}{page}", app.base)).await.status(),
        StatusCode::NOT_FOUND
    );

    // B's operator sees whose connection this is, and starts it; a post without the
    // session's CSRF token starts nothing.
    let (mut tenant_b, csrf_b) = Browser::signed_in(&app, &key_b).await;
    let shown = tenant_b.get(&format!("{}{page}", app.base)).await;
    assert_eq!(shown.status(), StatusCode::OK);
    let shown = shown.text().await.unwrap();
    assert!(
        shown.contains("<code>receptionist</code></a> of tenant <code>clinic</code>"),
        "{shown}"
    );
    assert!(shown.contains("not connected"), "{shown}");
    let forged = no_redirects()
        .post(format!("{}{page}", app.base))
        .header("cookie", tenant_b.header())
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status(), StatusCode::FORBIDDEN);
    let authorize_b = tenant_b.start_connect(&app, &csrf_b, "receptionist").await;

    // B sends its consent link to a victim: the victim consents, arrives at the callback
    // without the flow's cookie, and nothing is connected; no code is exchanged.
    let mut victim = Browser::default();
    let (status, answer, callback_b) = victim.consent(&app, authorize_b.clone()).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{answer}");
    assert!(answer.contains("started in another browser"), "{answer}");
    assert!(answer.contains("do not use it"), "{answer}");
    assert!(
        !answer.contains("clinic") && !answer.contains("receptionist"),
        "the refusal names no tenant or agent: {answer}"
    );
    assert_eq!(exchanges(&sim), 0);
    assert_eq!(
        app.get("/v1/connections", &key_b).await.1["items"],
        json!([])
    );

    // Another tenant's operator, with a flow of their own under way, gets nothing from B's
    // link either.
    let authorize_a = tenant_a.start_connect(&app, &csrf_a, "desk").await;
    let (status, answer) = {
        let r = tenant_a.get(&callback_b).await;
        (r.status(), r.text().await.unwrap())
    };
    assert_eq!(status, StatusCode::FORBIDDEN, "{answer}");
    // A forged callback of A's flow pushed into B's operator's browser (a cross-site
    // navigation: the flow cookie B holds is for B's flow only) connects nothing.
    let callback_a = consent_callback(&app, authorize_a).await;
    let r = tenant_b.get(&callback_a).await;
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    assert_eq!(exchanges(&sim), 0);
    for key in [&key_a, &key_b] {
        assert_eq!(app.get("/v1/connections", key).await.1["items"], json!([]));
    }

    // The browser that started each flow completes it, and the page names the tenant and
    // the agent.
    let r = tenant_b.get(&callback_b).await;
    assert_eq!(r.status(), StatusCode::OK);
    let done = r.text().await.unwrap();
    assert!(
        done.contains("Connected: tenant `clinic`, agent `receptionist`"),
        "{done}"
    );
    let r = tenant_a.get(&callback_a).await;
    assert_eq!(r.status(), StatusCode::OK);
    assert!(
        r.text()
            .await
            .unwrap()
            .contains("Connected: tenant `other`, agent `desk`")
    );
    assert_eq!(exchanges(&sim), 2);
    let (_, list) = app.get("/v1/connections", &key_b).await;
    assert_eq!(list["items"][0]["agent"], "receptionist", "{list}");
    let (_, list) = app.get("/v1/connections", &key_a).await;
    assert_eq!(list["items"][0]["agent"], "desk", "{list}");
    assert_eq!(list["items"].as_array().unwrap().len(), 1, "{list}");

    // The agent's console page shows the connection, with a way to reconnect.
    let agent_page = tenant_b
        .get(&format!("{}/console/agents/receptionist", app.base))
        .await
        .text()
        .await
        .unwrap();
    // (minijinja escapes `/` in attributes as `&#x2f;`.)
    let href = page.replace('/', "&#x2f;");
    assert!(
        agent_page.contains("class=\"connection-connected\"")
            && agent_page.contains(&format!("href=\"{href}\">Reconnect")),
        "{agent_page}"
    );
    app.stop().await;
}

#[tokio::test]
async fn a_connect_link_completes_only_in_the_browser_that_started_it_sqlite() {
    a_connect_link_completes_only_in_the_browser_that_started_it(Backend::Sqlite).await;
}

#[tokio::test]
async fn a_connect_link_completes_only_in_the_browser_that_started_it_postgres() {
    a_connect_link_completes_only_in_the_browser_that_started_it(Backend::Postgres).await;
}

/// The caller's own bookings on Google: found by the caller's number (another caller finds
/// none), cancelled and moved only by that caller (another gets `not_found` for the same id,
/// as for an id that does not exist); a move to a taken slot leaves the booking where it was
/// and offers alternatives; free slots of an afternoon are listed on the calendar's clock.
#[tokio::test]
async fn a_caller_finds_moves_and_cancels_only_their_own_bookings() {
    let sim = GoogleSim::start().await.unwrap();
    let app = spawn_app_with(Backend::Sqlite, google_config(&sim)).await;
    let key = receptionist(&app, "clinic").await;
    connect(&app, &key, &sim).await;
    sim.set_time_zone("primary", "America/New_York");
    for (call, from) in [("pat", "+14155550101"), ("eve", "+14155550666")] {
        app.post("/v1/calls", &key, json!({"call_id": call, "from": from}))
            .await;
    }
    let r = invoke(&app, &key, "pat", "b1", "create_event",
        json!({"title": "Checkup Pat", "start_time": "2030-01-07T10:00:00-05:00", "attendees": ["pat@example.com"]})).await;
    let id = answer(&r)["data"]["id"].as_str().unwrap().to_owned();
    sim.add_event(
        "primary",
        "busy0slot",
        "Other",
        "2030-01-07T14:00:00-05:00",
        "2030-01-07T15:00:00-05:00",
    );

    let r = invoke(&app, &key, "pat", "f1", "find_bookings", json!({})).await;
    let found = answer(&r)["data"]["bookings"].as_array().unwrap().clone();
    assert_eq!(found.len(), 1, "{r}");
    assert_eq!(found[0]["id"], json!(id), "{r}");
    assert_eq!(found[0]["start"], "2030-01-07T10:00:00-05:00", "{r}");
    let r = invoke(
        &app,
        &key,
        "pat",
        "f2",
        "find_bookings",
        json!({"email": "sam@example.com"}),
    )
    .await;
    assert_eq!(answer(&r)["data"]["bookings"], json!([]), "{r}");
    // Another caller, even naming Pat's email, finds nothing and can touch nothing.
    let r = invoke(
        &app,
        &key,
        "eve",
        "f1",
        "find_bookings",
        json!({"email": "pat@example.com", "name": "Pat"}),
    )
    .await;
    assert_eq!(answer(&r)["data"]["bookings"], json!([]), "{r}");
    let stolen = invoke(
        &app,
        &key,
        "eve",
        "c1",
        "cancel_event",
        json!({"event_id": id}),
    )
    .await;
    let missing = invoke(
        &app,
        &key,
        "eve",
        "c2",
        "cancel_event",
        json!({"event_id": "sb0000000000"}),
    )
    .await;
    assert_eq!(answer(&stolen)["error"], "not_found", "{stolen}");
    assert_eq!(
        answer(&stolen)["message"]
            .as_str()
            .unwrap()
            .replace(&id, "X"),
        answer(&missing)["message"]
            .as_str()
            .unwrap()
            .replace("sb0000000000", "X")
    );
    let r = invoke(
        &app,
        &key,
        "eve",
        "m1",
        "reschedule_event",
        json!({"event_id": id, "new_start_time": "2030-01-08T10:00:00-05:00"}),
    )
    .await;
    assert_eq!(answer(&r)["error"], "not_found", "{r}");
    let r = invoke(
        &app,
        &key,
        "eve",
        "x1",
        "cancel_event",
        json!({"event_id": "../../x"}),
    )
    .await;
    assert_eq!(answer(&r)["error"], "not_found", "{r}");

    // A move to a taken slot: refused with alternatives, the booking stays.
    let r = invoke(
        &app,
        &key,
        "pat",
        "m1",
        "reschedule_event",
        json!({"event_id": id, "new_start_time": "2030-01-07T14:30:00-05:00"}),
    )
    .await;
    assert_eq!(answer(&r)["error"], "slot_taken", "{r}");
    assert!(
        !answer(&r)["details"]["alternatives"]
            .as_array()
            .unwrap()
            .is_empty(),
        "{r}"
    );
    // Outside the hours: refused the same way.
    let r = invoke(
        &app,
        &key,
        "pat",
        "m2",
        "reschedule_event",
        json!({"event_id": id, "new_start_time": "2030-01-07T18:00:00-05:00"}),
    )
    .await;
    assert_eq!(answer(&r)["error"], "outside_hours", "{r}");
    let ours: Vec<Value> = sim
        .events("primary")
        .into_iter()
        .filter(|e| e["id"] == json!(id))
        .collect();
    assert_eq!(
        ours[0]["start"]["dateTime"], "2030-01-07T10:00:00-05:00",
        "{ours:?}"
    );
    // A free slot: moved, keeping its length (the default 45 minutes).
    let r = invoke(
        &app,
        &key,
        "pat",
        "m3",
        "reschedule_event",
        json!({"event_id": id, "new_start_time": "2030-01-07T15:00:00-05:00"}),
    )
    .await;
    assert_eq!(answer(&r)["data"]["moved"], true, "{r}");
    assert_eq!(
        answer(&r)["data"]["end"],
        "2030-01-07T15:45:00-05:00",
        "{r}"
    );
    let ours: Vec<Value> = sim
        .events("primary")
        .into_iter()
        .filter(|e| e["id"] == json!(id))
        .collect();
    assert_eq!(ours.len(), 1);
    assert_eq!(
        ours[0]["start"]["dateTime"], "2030-01-07T15:00:00-05:00",
        "{ours:?}"
    );

    // Free slots of that afternoon, on New York's clock: around the busy hour and the booking.
    let r = invoke(
        &app,
        &key,
        "pat",
        "s1",
        "find_free_slots",
        json!({"day": "2030-01-07", "part_of_day": "afternoon", "duration_minutes": 60}),
    )
    .await;
    let starts: Vec<&str> = answer(&r)["data"]["slots"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["start"].as_str().unwrap())
        .collect();
    assert_eq!(
        starts,
        [
            "2030-01-07T12:00:00-05:00",
            "2030-01-07T13:00:00-05:00",
            "2030-01-07T15:45:00-05:00"
        ],
        "{r}"
    );

    // Cancelled by its own caller; then it is gone from their list.
    let r = invoke(
        &app,
        &key,
        "pat",
        "c1",
        "cancel_event",
        json!({"event_id": id}),
    )
    .await;
    assert_eq!(answer(&r)["data"]["cancelled"], true, "{r}");
    let r = invoke(&app, &key, "pat", "f3", "find_bookings", json!({})).await;
    assert_eq!(answer(&r)["data"]["bookings"], json!([]), "{r}");
    app.stop().await;
}

/// Booking rules through the real API: a config with several bad rules is refused with every
/// problem at its pointer; then every action keeps the rules — a Sunday, a lunch break and a
/// closed date are `outside_hours` with free times inside the rules, a time whose buffer holds
/// another event is `slot_taken`, free slots skip both, and a date beyond the horizon is refused.
#[tokio::test]
async fn booking_rules_are_checked_at_save_and_kept_by_every_action() {
    let sim = GoogleSim::start().await.unwrap();
    let app = spawn_app_with(Backend::Sqlite, google_config(&sim)).await;
    let key = receptionist(&app, "clinic").await;
    connect(&app, &key, &sim).await;
    let agent = |rules: Value| {
        json!({"instructions": "Book appointments.", "default": true, "tools": [{"tool": "toolkit:google_calendar",
            "config": {"calendar_id": "primary", "time_zone": "America/New_York", "rules": rules}}]})
    };
    let bad = json!({
        "hours": {"mon": [["09:00", "12:00"], ["11:00", "13:00"]], "tue": [["25:00", "12:00"]]},
        "closed_dates": ["2030-02-30"], "slot_minutes": 0, "step_minutes": 1000, "colour": "red"});
    let (s, body) = app.put("/v1/agents/receptionist", &key, agent(bad)).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{body}");
    let mut pointers: Vec<&str> = body["error"]["details"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["pointer"].as_str().unwrap())
        .collect();
    pointers.sort_unstable();
    let rules = "/tools/0/config/rules";
    assert_eq!(
        pointers,
        [
            "closed_dates/0",
            "colour",
            "hours/mon/1",
            "hours/tue/0/0",
            "slot_minutes",
            "step_minutes"
        ]
        .map(|p| format!("{rules}/{p}")),
        "{body}"
    );
    let good = json!({
        "hours": {"mon": [["09:00", "12:00"], ["13:00", "17:00"]], "tue": [["09:00", "17:00"]],
                  "wed": [["09:00", "17:00"]], "sat": []},
        "closed_dates": ["2030-01-08"], "buffer_before_minutes": 15, "buffer_after_minutes": 10});
    let (s, body) = app
        .put("/v1/agents/receptionist", &key, agent(good.clone()))
        .await;
    assert_eq!(s, StatusCode::OK, "{body}");
    sim.add_event(
        "primary",
        "busy0slot",
        "Other",
        "2030-01-07T10:00:00-05:00",
        "2030-01-07T11:00:00-05:00",
    );
    app.post(
        "/v1/calls",
        &key,
        json!({"call_id": "c1", "from": "+14155550101"}),
    )
    .await;

    // Sunday: closed, though nothing is in the calendar.
    // check_availability answers it as every action does: the typed `error` and its message,
    // the details keeping `available: false` and the free times.
    let sunday = json!({"date": "2030-01-06T10:00:00-05:00"});
    let r = invoke(&app, &key, "c1", "a1", "check_availability", sunday).await;
    assert_eq!(answer(&r)["error"], "outside_hours", "{r}");
    assert!(
        answer(&r)["message"]
            .as_str()
            .unwrap()
            .contains("closed on Sundays"),
        "{r}"
    );
    let data = &answer(&r)["details"];
    assert_eq!(data["available"], false, "{r}");
    assert_eq!(
        data["next_free_slots"][0]["start"], "2030-01-07T09:00:00-05:00",
        "{r}"
    );
    assert_eq!(data["alternatives"], data["next_free_slots"], "{r}");
    let book = |at: &str| json!({"title": "Checkup", "start_time": at, "duration_minutes": 30});
    for (i, (at, why)) in [
        ("2030-01-06T10:00:00-05:00", "closed on Sundays"),
        (
            "2030-01-07T12:15:00-05:00",
            "09:00-12:00, 13:00-17:00 America/New_York",
        ),
        ("2030-01-08T10:00:00-05:00", "closed on 2030-01-08"),
    ]
    .into_iter()
    .enumerate()
    {
        let r = invoke(&app, &key, "c1", &format!("b{i}"), "create_event", book(at)).await;
        assert_eq!(answer(&r)["error"], "outside_hours", "{r}");
        let message = answer(&r)["message"].as_str().unwrap();
        assert!(message.contains(why), "{r}");
        let offered = answer(&r)["details"]["alternatives"].as_array().unwrap();
        assert!(!offered.is_empty(), "{r}");
        for o in offered {
            let start = o["start"].as_str().unwrap();
            assert!(!start.starts_with("2030-01-08"), "{r}");
        }
    }
    // 11:00 is free, but the event before it ends at 11:00 and a booking needs 15 minutes
    // free before it.
    let r = invoke(
        &app,
        &key,
        "c1",
        "b5",
        "create_event",
        book("2030-01-07T11:00:00-05:00"),
    )
    .await;
    assert_eq!(answer(&r)["error"], "slot_taken", "{r}");
    assert!(
        answer(&r)["message"]
            .as_str()
            .unwrap()
            .contains("too close to another booking"),
        "{r}"
    );
    assert_eq!(sim.inserts(), 0);
    // Free hours on Monday skip the lunch break and keep the buffers around the 10:00 event
    // (09:00-10:00 would leave no 10 minutes after it).
    let r = invoke(
        &app,
        &key,
        "c1",
        "s1",
        "find_free_slots",
        json!({"day": "2030-01-07", "duration_minutes": 60}),
    )
    .await;
    let starts: Vec<&str> = answer(&r)["data"]["slots"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["start"].as_str().unwrap())
        .collect();
    assert_eq!(
        starts,
        [
            "2030-01-07T13:00:00-05:00",
            "2030-01-07T14:00:00-05:00",
            "2030-01-07T15:00:00-05:00",
            "2030-01-07T16:00:00-05:00"
        ],
        "{r}"
    );
    // A booking inside the rules is made; moving it to the closed date is refused.
    let r = invoke(
        &app,
        &key,
        "c1",
        "b6",
        "create_event",
        book("2030-01-09T10:00:00-05:00"),
    )
    .await;
    assert_eq!(answer(&r)["ok"], true, "{r}");
    let id = answer(&r)["data"]["id"].as_str().unwrap().to_owned();
    let r = invoke(
        &app,
        &key,
        "c1",
        "m1",
        "reschedule_event",
        json!({"event_id": id, "new_start_time": "2030-01-08T10:00:00-05:00"}),
    )
    .await;
    assert_eq!(answer(&r)["error"], "outside_hours", "{r}");
    // A horizon of 30 days puts 2030 out of reach.
    let mut near = good;
    near["horizon_days"] = json!(30);
    let (s, body) = app.put("/v1/agents/receptionist", &key, agent(near)).await;
    assert_eq!(s, StatusCode::OK, "{body}");
    app.post("/v1/calls", &key, json!({"call_id": "c2"})).await;
    let r = invoke(
        &app,
        &key,
        "c2",
        "b1",
        "create_event",
        book("2030-01-09T11:00:00-05:00"),
    )
    .await;
    assert_eq!(answer(&r)["error"], "outside_hours", "{r}");
    assert!(
        answer(&r)["message"]
            .as_str()
            .unwrap()
            .contains("at most 30 days ahead"),
        "{r}"
    );
    // Offered instead: free times in the last week before the horizon ends.
    let offered = answer(&r)["details"]["alternatives"].as_array().unwrap();
    assert!(!offered.is_empty(), "{r}");
    assert!(
        offered
            .iter()
            .all(|o| o["start"].as_str().unwrap() < "2030"),
        "{r}"
    );
    assert_eq!(sim.inserts(), 1);
    app.stop().await;
}

/// The console shows each agent's calendar connection — never connected, ok with its last
/// refresh, broken with the reason — with a Connect / Reconnect button leading to the connect
/// flow; a booking made by a call links from the call's timeline to its event. Another
/// tenant's operator sees none of it, and no token is on any page.
#[tokio::test]
async fn the_console_shows_calendar_connections_and_links_bookings() {
    let sim = GoogleSim::start().await.unwrap();
    let app = spawn_app_with(Backend::Sqlite, google_config(&sim)).await;
    let key = receptionist(&app, "clinic").await;
    let other = receptionist(&app, "bakery").await;
    let (mut browser, _) = Browser::signed_in(&app, &key).await;
    let (mut stranger, _) = Browser::signed_in(&app, &other).await;
    let mut seen = String::new();
    let page = async |b: &mut Browser, path: &str, seen: &mut String| {
        let r = b.get(&format!("{}{path}", app.base)).await;
        let status = r.status();
        let text = r.text().await.unwrap();
        seen.push_str(&text);
        (status, text)
    };
    // (minijinja escapes `/` in attributes as `&#x2f;`.)
    let href = "/console/agents/receptionist/connections/google_calendar".replace('/', "&#x2f;");

    let (s, agents) = page(&mut browser, "/console/agents", &mut seen).await;
    assert_eq!(s, StatusCode::OK, "{agents}");
    assert!(
        agents.contains("google_calendar: <span class=\"connection-state\">never connected</span>"),
        "{agents}"
    );
    let (_, agent) = page(&mut browser, "/console/agents/receptionist", &mut seen).await;
    assert!(
        agent.contains(&format!("role=\"button\" href=\"{href}\">Connect</a>")),
        "{agent}"
    );

    connect(&app, &key, &sim).await;
    sim.set_time_zone("primary", "America/New_York");
    let (_, agents) = page(&mut browser, "/console/agents", &mut seen).await;
    assert!(
        agents.contains("<span class=\"connection-state\">ok</span> · connected ")
            && agents.contains(" · last refresh "),
        "{agents}"
    );
    // The other tenant's agent of the same name is not connected, and this tenant's
    // connection is not on its pages.
    let (_, theirs) = page(&mut stranger, "/console/agents", &mut seen).await;
    assert!(
        theirs.contains("never connected") && !theirs.contains("last refresh"),
        "{theirs}"
    );

    // A booking links from the call's timeline to its event in Google Calendar.
    app.post(
        "/v1/calls",
        &key,
        json!({"call_id": "c1", "from": "+14155550101"}),
    )
    .await;
    let r = invoke(
        &app,
        &key,
        "c1",
        "b1",
        "create_event",
        json!({"title": "Checkup", "start_time": "2030-01-07T10:00:00-05:00"}),
    )
    .await;
    assert_eq!(answer(&r)["ok"], true, "{r}");
    let id = answer(&r)["data"]["id"].as_str().unwrap().to_owned();
    let link = format!("https://www.google.com/calendar/event?eid={id}");
    assert_eq!(answer(&r)["data"]["link"], json!(link), "{r}");
    let (s, call) = page(&mut browser, "/console/calls/c1", &mut seen).await;
    assert_eq!(s, StatusCode::OK, "{call}");
    let escaped = link.replace('/', "&#x2f;").replace('=', "&#x3d;");
    assert!(
        call.contains("class=\"booking-link\"") && call.contains(&id),
        "{call}"
    );
    assert!(
        call.contains(&escaped) || call.contains(&link.replace('/', "&#x2f;")),
        "{call}"
    );
    let (s, _) = page(&mut stranger, "/console/calls/c1", &mut seen).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    // A booking whose earlier try made the event (found again, not inserted) links too.
    let earlier = switchboard_toolkits::google::event_id("clinic", "c1-b2-0");
    sim.add_event(
        "primary",
        &earlier,
        "Follow-up",
        "2030-01-08T10:00:00-05:00",
        "2030-01-08T10:30:00-05:00",
    );
    let earlier_link = format!("https://www.google.com/calendar/event?eid={earlier}");
    sim.edit_event(
        "primary",
        &earlier,
        json!({"htmlLink": earlier_link, "extendedProperties": {"private":
            {"switchboard_call": "c1", "switchboard_caller": "+14155550100"}}}),
    );
    let r = invoke(
        &app,
        &key,
        "c1",
        "b2",
        "create_event",
        json!({"title": "Follow-up", "start_time": "2030-01-08T10:00:00-05:00", "duration_minutes": 30}),
    )
    .await;
    assert_eq!(
        (
            answer(&r)["data"]["created"].clone(),
            answer(&r)["data"]["link"].clone()
        ),
        (json!(false), json!(earlier_link)),
        "{r}"
    );
    let (_, call) = page(&mut browser, "/console/calls/c1", &mut seen).await;
    assert!(
        call.contains(&format!(
            "class=\"booking-link\" href=\"{}\"",
            earlier_link.replace('/', "&#x2f;")
        )),
        "{call}"
    );

    // Revoked at Google: the next refresh breaks the connection, and the console says why.
    sim.revoke_all();
    sim.expire_access_tokens();
    let r = invoke(
        &app,
        &key,
        "c1",
        "l1",
        "list_events",
        json!({"time_min": "2030-01-07T00:00:00Z"}),
    )
    .await;
    assert_eq!(answer(&r)["error"], "not_connected", "{r}");
    let (_, agent) = page(&mut browser, "/console/agents/receptionist", &mut seen).await;
    assert!(
        agent.contains(
            "<span class=\"connection-state\">broken</span>: <span class=\"connection-error\">"
        ) && agent.contains(&format!("role=\"button\" href=\"{href}\">Reconnect</a>")),
        "{agent}"
    );
    if let Some(t) = sim.leaks_into(&seen) {
        panic!("a token leaked into a console page: {t}");
    }
    app.stop().await;
}

/// The scope a calendar effect of call `call` (caller `caller`) runs in, with the idempotency
/// key `key`: for performing a booking again as another node resuming it would.
fn scope<'a>(
    tenant: &'a str,
    call: &'a str,
    caller: Option<&'a str>,
    config: &'a Value,
    key: &'a str,
) -> switchboard_runtime::effects::ToolkitScope<'a> {
    static NO_SECRETS: std::sync::LazyLock<Value> = std::sync::LazyLock::new(|| json!({}));
    switchboard_runtime::effects::ToolkitScope {
        tenant_id: tenant,
        call_id: call,
        caller,
        config,
        secrets: &NO_SECRETS,
        idempotency_key: key,
    }
}

fn create(title: &str, start: &str) -> switchboard_runtime::effects::CalendarOp {
    switchboard_runtime::effects::CalendarOp::CreateEvent {
        title: title.into(),
        start_time: start.into(),
        duration_minutes: Some(30),
        attendees: None,
        description: None,
    }
}

/// Retried bookings against Google as it behaves: two tries of one booking at once (one gets
/// 409 on the id) both answer the one event with its link; a try after the earlier one's event
/// was cancelled books again under a fresh id instead of claiming the cancelled event; an event
/// of another call under the booking's id is not claimed (`slot_taken`). A cancelled booking is
/// neither found nor busy.
#[tokio::test]
async fn retried_google_bookings_answer_their_own_live_event() {
    let sim = GoogleSim::start().await.unwrap();
    let app = spawn_app_with(Backend::Sqlite, google_config(&sim)).await;
    let key = receptionist(&app, "clinic").await;
    connect(&app, &key, &sim).await;
    let calendar = app.state.effects.calendar.clone().unwrap();
    let config = json!({"calendar_id": "primary", "default_event_duration": 45,
        "oauth_connection": {"agent": "receptionist"}});
    let caller = Some("+14155550100");

    // Two tries of one booking at once: one inserts, the other's insert is a 409 on the id.
    sim.set_insert_delay(std::time::Duration::from_millis(300));
    let s = scope("clinic", "c1", caller, &config, "c1-f1-0");
    let op = create("Checkup", "2030-01-07T10:00:00Z");
    let (a, b) = tokio::join!(calendar.call(&s, &op), calendar.call(&s, &op));
    let (a, b) = (a.unwrap(), b.unwrap());
    sim.set_insert_delay(std::time::Duration::ZERO);
    assert_eq!(sim.inserts(), 1, "booked once: {a} {b}");
    let id = a["id"].as_str().unwrap().to_owned();
    let link = format!("https://www.google.com/calendar/event?eid={id}");
    for answer in [&a, &b] {
        assert_eq!(
            (
                answer["id"].clone(),
                answer["link"].clone(),
                answer["start"].clone(),
                answer["end"].clone()
            ),
            (
                json!(id),
                json!(link),
                json!("2030-01-07T10:00:00Z"),
                json!("2030-01-07T10:30:00Z")
            ),
            "{a} {b}"
        );
    }
    let mut created = [a["created"].clone(), b["created"].clone()];
    created.sort_by_key(|c| c.to_string());
    assert_eq!(created, [json!(false), json!(true)]);
    // Tried again later: the event is found in the calendar, answered with its link.
    let again = calendar.call(&s, &op).await.unwrap();
    assert_eq!(
        (again["created"].clone(), again["link"].clone()),
        (json!(false), json!(link))
    );

    // The caller cancels it; a cancelled booking is neither found nor in the way.
    app.post("/v1/calls", &key, json!({"call_id": "c1", "from": caller}))
        .await;
    let r = invoke(
        &app,
        &key,
        "c1",
        "x1",
        "cancel_event",
        json!({"event_id": id}),
    )
    .await;
    assert_eq!(answer(&r)["data"]["cancelled"], true, "{r}");
    let r = invoke(&app, &key, "c1", "f2", "find_bookings", json!({})).await;
    assert_eq!(answer(&r)["data"]["bookings"], json!([]), "{r}");
    let r = invoke(
        &app,
        &key,
        "c1",
        "a1",
        "check_availability",
        json!({"date": "2030-01-07T10:00:00Z", "duration_minutes": 30}),
    )
    .await;
    assert_eq!(answer(&r)["data"]["available"], true, "{r}");

    // The booking tried once more (its id belongs to the cancelled event: 409): booked again
    // under the next id of its chain, never answered with the cancelled event.
    let rebooked = calendar.call(&s, &op).await.unwrap();
    let new_id = rebooked["id"].as_str().unwrap().to_owned();
    assert_ne!(new_id, id, "{rebooked}");
    assert_eq!(rebooked["created"], true, "{rebooked}");
    let events = sim.events("primary");
    let live = events.iter().find(|e| e["id"] == json!(new_id)).unwrap();
    assert_eq!(live["status"], "confirmed");
    assert_eq!(
        live["extendedProperties"]["private"]["switchboard_call"],
        "c1"
    );
    // ... and a retry of that finds it, as its own.
    let again = calendar.call(&s, &op).await.unwrap();
    assert_eq!(
        (again["id"].clone(), again["created"].clone()),
        (json!(new_id), json!(false)),
        "{again}"
    );
    let r = invoke(&app, &key, "c1", "f3", "find_bookings", json!({})).await;
    assert_eq!(
        answer(&r)["data"]["bookings"][0]["id"],
        json!(new_id),
        "{r}"
    );

    // Another call's event under a booking's id, in its slot: not claimed.
    let foreign = switchboard_toolkits::google::event_id("clinic", "c2-f1-0");
    sim.add_event(
        "primary",
        &foreign,
        "Someone else",
        "2030-01-08T10:00:00Z",
        "2030-01-08T10:30:00Z",
    );
    sim.edit_event(
        "primary",
        &foreign,
        json!({"extendedProperties": {"private": {"switchboard_call": "c9"}}}),
    );
    let inserts = sim.inserts();
    let s2 = scope("clinic", "c2", caller, &config, "c2-f1-0");
    let refused = calendar
        .call(&s2, &create("Checkup", "2030-01-08T10:00:00Z"))
        .await
        .unwrap_err();
    assert_eq!(refused.code.as_str(), "slot_taken", "{refused:?}");
    assert_eq!(sim.inserts(), inserts);
    app.stop().await;
}

/// Cancelling and moving a Google booking send the etag they read: a change someone makes to
/// the event in between is not overwritten, and the caller hears nothing was changed.
#[tokio::test]
async fn a_google_booking_changed_meanwhile_is_not_overwritten() {
    let sim = GoogleSim::start().await.unwrap();
    let app = spawn_app_with(Backend::Sqlite, google_config(&sim)).await;
    let key = receptionist(&app, "clinic").await;
    connect(&app, &key, &sim).await;
    app.post(
        "/v1/calls",
        &key,
        json!({"call_id": "c1", "from": "+14155550100"}),
    )
    .await;
    let r = invoke(
        &app,
        &key,
        "c1",
        "b1",
        "create_event",
        json!({"title": "Checkup", "start_time": "2030-01-07T10:00:00Z", "duration_minutes": 30}),
    )
    .await;
    let id = answer(&r)["data"]["id"].as_str().unwrap().to_owned();
    let stored = |sim: &GoogleSim| {
        sim.events("primary")
            .into_iter()
            .find(|e| e["id"] == json!(id))
            .unwrap()
    };

    // Staff move it to 11:00 between the move's read and its write.
    sim.edit_after_next_read(
        "primary",
        &id,
        json!({"start": {"dateTime": "2030-01-07T11:00:00Z"}, "end": {"dateTime": "2030-01-07T11:30:00Z"}}),
    );
    let r = invoke(
        &app,
        &key,
        "c1",
        "m1",
        "reschedule_event",
        json!({"event_id": id, "new_start_time": "2030-01-07T14:00:00Z"}),
    )
    .await;
    assert_eq!(answer(&r)["error"], "calendar_unavailable", "{r}");
    assert!(
        answer(&r)["message"]
            .as_str()
            .unwrap()
            .contains("changed by someone else"),
        "{r}"
    );
    assert_eq!(stored(&sim)["start"]["dateTime"], "2030-01-07T11:00:00Z");

    // Staff rename it between the cancellation's read and its delete: still there.
    sim.edit_after_next_read("primary", &id, json!({"summary": "Checkup (confirmed)"}));
    let r = invoke(
        &app,
        &key,
        "c1",
        "x1",
        "cancel_event",
        json!({"event_id": id}),
    )
    .await;
    assert_eq!(answer(&r)["error"], "calendar_unavailable", "{r}");
    assert_eq!(stored(&sim)["status"], "confirmed");

    // Asked again, with nothing changing meanwhile: both work.
    let r = invoke(
        &app,
        &key,
        "c1",
        "m2",
        "reschedule_event",
        json!({"event_id": id, "new_start_time": "2030-01-07T14:00:00Z"}),
    )
    .await;
    assert_eq!(answer(&r)["data"]["moved"], true, "{r}");
    let r = invoke(
        &app,
        &key,
        "c1",
        "x2",
        "cancel_event",
        json!({"event_id": id}),
    )
    .await;
    assert_eq!(answer(&r)["data"]["cancelled"], true, "{r}");
    assert_eq!(stored(&sim)["status"], "cancelled");
    app.stop().await;
}

/// `cancel_notice_minutes`: checked at save at its pointer; a booking starting sooner than
/// that can be neither cancelled nor moved (`too_late_to_change`, nothing changed), one
/// further ahead can.
#[tokio::test]
async fn google_bookings_keep_the_cancel_notice() {
    let sim = GoogleSim::start().await.unwrap();
    let app = spawn_app_with(Backend::Sqlite, google_config(&sim)).await;
    let key = receptionist(&app, "clinic").await;
    let all_day = json!([["00:00", "24:00"]]);
    let hours = json!({"mon": all_day, "tue": all_day, "wed": all_day, "thu": all_day,
        "fri": all_day, "sat": all_day, "sun": all_day});
    let agent = |notice: Value| {
        json!({"instructions": "Book appointments.", "default": true, "tools": [
            {"tool": "toolkit:google_calendar", "config": {"calendar_id": "primary", "time_zone": "UTC",
                "rules": {"hours": hours, "cancel_notice_minutes": notice}}}]})
    };
    let (s, body) = app
        .put("/v1/agents/receptionist", &key, agent(json!(-5)))
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{body}");
    assert!(
        body.to_string()
            .contains("/tools/0/config/rules/cancel_notice_minutes"),
        "{body}"
    );
    let (s, body) = app
        .put("/v1/agents/receptionist", &key, agent(json!(1440)))
        .await;
    assert_eq!(s, StatusCode::OK, "{body}");
    connect(&app, &key, &sim).await;
    app.post(
        "/v1/calls",
        &key,
        json!({"call_id": "c1", "from": "+14155550100"}),
    )
    .await;
    let at = |hours: i64| {
        (chrono::Utc::now() + chrono::Duration::hours(hours))
            .format("%Y-%m-%dT%H:%M:00Z")
            .to_string()
    };
    let book = |fc: &str, start: String| {
        let (app, key) = (&app, &key);
        let fc = fc.to_owned();
        async move {
            let r = invoke(
                app,
                key,
                "c1",
                &fc,
                "create_event",
                json!({"title": "Checkup", "start_time": start, "duration_minutes": 30}),
            )
            .await;
            answer(&r)["data"]["id"].as_str().unwrap().to_owned()
        }
    };
    let soon = book("b1", at(3)).await;
    let later = book("b2", at(72)).await;
    let r = invoke(
        &app,
        &key,
        "c1",
        "x1",
        "cancel_event",
        json!({"event_id": soon}),
    )
    .await;
    assert_eq!(answer(&r)["error"], "too_late_to_change", "{r}");
    assert!(
        answer(&r)["message"]
            .as_str()
            .unwrap()
            .contains("1440 minutes"),
        "{r}"
    );
    let r = invoke(
        &app,
        &key,
        "c1",
        "m1",
        "reschedule_event",
        json!({"event_id": soon, "new_start_time": at(96)}),
    )
    .await;
    assert_eq!(answer(&r)["error"], "too_late_to_change", "{r}");
    let kept = sim
        .events("primary")
        .into_iter()
        .find(|e| e["id"] == json!(soon))
        .unwrap();
    assert_eq!(kept["status"], "confirmed");
    let r = invoke(
        &app,
        &key,
        "c1",
        "m2",
        "reschedule_event",
        json!({"event_id": later, "new_start_time": at(96)}),
    )
    .await;
    assert_eq!(answer(&r)["data"]["moved"], true, "{r}");
    let r = invoke(
        &app,
        &key,
        "c1",
        "x2",
        "cancel_event",
        json!({"event_id": later}),
    )
    .await;
    assert_eq!(answer(&r)["data"]["cancelled"], true, "{r}");
    app.stop().await;
}
