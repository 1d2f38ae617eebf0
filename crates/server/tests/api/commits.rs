//! A tool's changes land on the call's context all together or not at all: a write that no
//! longer fits, a context over its limit or a database that does not answer commits nothing and
//! answers with an error; concurrent appends to one list both land.

use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use reqwest::StatusCode;
use serde_json::{Value, json};
use switchboard_core::Limits;
use switchboard_runtime::Effects;
use switchboard_runtime::http::{HttpConfig, HttpEffects};
use switchboard_server::{AppState, ServerConfig};
use switchboard_store::{Store, StoreOptions};
use tokio::sync::watch;

use crate::support::{Backend, TestApp, spawn_app, spawn_app_with};

const WAIT: Duration = Duration::from_secs(10);

/// A loopback upstream whose `/gate` holds every request until the test opens it, so a tool can
/// be held between reading the context and committing, deterministically.
struct Gate {
    url: String,
    hits: watch::Sender<usize>,
    open: watch::Sender<bool>,
}

type GateState = (watch::Sender<usize>, watch::Sender<bool>);

async fn held((hits, open): GateState) -> Json<Value> {
    hits.send_modify(|n| *n += 1);
    let mut rx = open.subscribe();
    let _ = rx.wait_for(|o| *o).await;
    Json(json!({"ok": true}))
}

impl Gate {
    async fn start() -> Gate {
        let (hits, _) = watch::channel(0usize);
        let (open, _) = watch::channel(false);
        let state: GateState = (hits.clone(), open.clone());
        let app = axum::Router::new()
            .route(
                "/gate",
                axum::routing::get(|State(s): State<GateState>| held(s)),
            )
            .with_state(state);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/gate", listener.local_addr().unwrap());
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Gate { url, hits, open }
    }

    /// Waits until `n` requests are held.
    async fn held(&self, n: usize) {
        let mut rx = self.hits.subscribe();
        tokio::time::timeout(WAIT, rx.wait_for(|h| *h >= n))
            .await
            .expect("the tools reached the gate")
            .unwrap();
    }

    fn open(&self) {
        self.open.send_replace(true);
    }
}

/// Tenant `acme` with `tools` on its default agent; returns its key.
async fn tenant_with(app: &TestApp, tools: &[Value]) -> String {
    let key = app.tenant("acme").await;
    let mut names = Vec::new();
    for t in tools {
        let (s, body) = app.post("/v1/tools", &key, t.clone()).await;
        assert_eq!(s, StatusCode::CREATED, "{body}");
        names.push(json!({"tool": t["name"]}));
    }
    let agent = json!({"instructions": "Help.", "tools": names, "default": true});
    let (s, body) = app.put("/v1/agents/assistant", &key, agent).await;
    assert_eq!(s, StatusCode::OK, "{body}");
    key
}

async fn start_call(app: &TestApp, key: &str, id: &str) {
    let (s, body) = app.post("/v1/calls", key, json!({"call_id": id})).await;
    assert_eq!(s, StatusCode::CREATED, "{body}");
}

/// Invokes in the background, so the test can act while the tool runs.
fn invoke_later(
    app: &Arc<TestApp>,
    key: &str,
    call: &str,
    fc: &str,
    name: &str,
    args: Value,
) -> tokio::task::JoinHandle<Value> {
    let (app, key, call, fc, name) = (
        Arc::clone(app),
        key.to_owned(),
        call.to_owned(),
        fc.to_owned(),
        name.to_owned(),
    );
    tokio::spawn(async move { crate::support::invoke(&app, &key, &call, &fc, &name, args).await })
}

async fn stored(app: &TestApp, key: &str, call: &str) -> Value {
    let (s, body) = app.get(&format!("/v1/calls/{call}"), key).await;
    assert_eq!(s, StatusCode::OK, "{body}");
    body
}

fn record<'a>(call: &'a Value, fc: &str) -> &'a Value {
    call["invocations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["function_call_id"] == fc)
        .unwrap_or_else(|| panic!("no record of {fc}: {call}"))
}

async fn finish(app: Arc<TestApp>) {
    if let Ok(app) = Arc::try_unwrap(app) {
        app.stop().await;
    }
}

#[tokio::test]
async fn a_write_that_no_longer_fits_commits_none_of_the_tools_writes() {
    for backend in [Backend::Sqlite, Backend::Postgres] {
        let gate = Gate::start().await;
        let app = Arc::new(spawn_app(backend).await);
        let slowset = json!({"name": "slowset", "description": "Confirm the order.",
        "actions": [
            {"type": "api_call", "method": "GET", "url": gate.url},
            {"type": "context.set", "data": {"profile.name": "Ada", "order_confirmed": true}}
        ]});
        let fastset = json!({"name": "fastset", "description": "Set the profile.",
            "actions": [{"type": "context.set", "data": {"profile": "a string"}}]});
        let key = tenant_with(&app, &[slowset, fastset]).await;
        start_call(&app, &key, "c1").await;
        let slow = invoke_later(&app, &key, "c1", "f_slow", "slowset", json!({}));
        gate.held(1).await;
        let fast = crate::support::invoke(&app, &key, "c1", "f_fast", "fastset", json!({})).await;
        assert_eq!(fast["ok"], true, "{fast}");
        gate.open();
        let slow = tokio::time::timeout(WAIT, slow).await.unwrap().unwrap();
        assert_eq!(slow["ok"], false, "{slow}");
        assert_eq!(slow["error"], "tool_execution_failed", "{slow}");
        let message = slow["result"]["message"].as_str().unwrap();
        assert!(
            message.contains("workflow.profile.name") && message.contains("Nothing was changed"),
            "{message}"
        );
        assert_eq!(slow["result"]["details"]["path"], "workflow.profile.name");
        let call = stored(&app, &key, "c1").await;
        let workflow = &call["context"]["workflow"];
        assert_eq!(workflow["profile"], "a string", "{call}");
        assert!(workflow.get("order_confirmed").is_none(), "{call}");
        let r = record(&call, "f_slow");
        assert_eq!(r["ok"], false, "{r}");
        assert!(
            r["logs"].as_array().unwrap().iter().any(|l| l["message"]
                .as_str()
                .unwrap()
                .contains("nothing was committed")),
            "{r}"
        );
        finish(app).await;
    }
}

#[tokio::test]
async fn concurrent_appends_to_one_list_both_land() {
    for backend in [Backend::Sqlite, Backend::Postgres] {
        let gate = Gate::start().await;
        let app = Arc::new(spawn_app(backend).await);
        let add = json!({"name": "add_item", "description": "Add an item.",
        "parameters": [{"name": "item", "type": "string", "required": true}],
        "actions": [
            {"type": "api_call", "method": "GET", "url": gate.url},
            {"type": "context.set", "data": {"items[+]": "{{params.item}}"}}
        ]});
        let key = tenant_with(&app, &[add]).await;
        start_call(&app, &key, "c1").await;
        let a = invoke_later(&app, &key, "c1", "f_a", "add_item", json!({"item": "a"}));
        let b = invoke_later(&app, &key, "c1", "f_b", "add_item", json!({"item": "b"}));
        // Both read the context before either commits.
        gate.held(2).await;
        gate.open();
        for h in [a, b] {
            let out = tokio::time::timeout(WAIT, h).await.unwrap().unwrap();
            assert_eq!(out["ok"], true, "{out}");
        }
        let call = stored(&app, &key, "c1").await;
        let mut items: Vec<&str> = call["context"]["workflow"]["items"]
            .as_array()
            .unwrap_or_else(|| panic!("{call}"))
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        items.sort_unstable();
        assert_eq!(items, ["a", "b"]);
        finish(app).await;
    }
}

fn small_context() -> ServerConfig {
    ServerConfig {
        tenant_rate_per_s: 10_000,
        limits: Limits {
            max_context_bytes: 2_000,
            ..Limits::default()
        },
        ..ServerConfig::default()
    }
}

#[tokio::test]
async fn on_failure_writes_are_held_to_the_context_limit() {
    for backend in [Backend::Sqlite, Backend::Postgres] {
        let app = spawn_app_with(backend, small_context()).await;
        let note = json!({"name": "note", "description": "Note something.",
            "parameters": [{"name": "text", "type": "string", "required": true}],
            "actions": [{"type": "validate", "rules": [{"check": "params.text | length < 10", "message": "Too long."}]}],
            "on_failure": [{"type": "context.set", "data": {"failed_note": "{{params.text}}"}}]});
        let key = tenant_with(&app, &[note]).await;
        start_call(&app, &key, "c1").await;
        // Under the limit, on_failure's write lands.
        let out = crate::support::invoke(
            &app,
            &key,
            "c1",
            "f1",
            "note",
            json!({"text": "x".repeat(100)}),
        )
        .await;
        assert_eq!(out["ok"], false, "{out}");
        let call = stored(&app, &key, "c1").await;
        assert_eq!(
            call["context"]["workflow"]["failed_note"]
                .as_str()
                .map(str::len),
            Some(100)
        );
        // Over it, nothing lands and the error says why.
        let out = crate::support::invoke(
            &app,
            &key,
            "c1",
            "f2",
            "note",
            json!({"text": "y".repeat(3_000)}),
        )
        .await;
        assert_eq!(out["ok"], false, "{out}");
        let message = out["result"]["message"].as_str().unwrap();
        assert!(message.contains("max_context_bytes"), "{message}");
        let call = stored(&app, &key, "c1").await;
        assert_eq!(
            call["context"]["workflow"]["failed_note"]
                .as_str()
                .map(str::len),
            Some(100),
            "{call}"
        );
        app.stop().await;
    }
}

#[tokio::test]
async fn the_context_limit_holds_against_what_other_tools_committed_meanwhile() {
    for backend in [Backend::Sqlite, Backend::Postgres] {
        let gate = Gate::start().await;
        let app = Arc::new(spawn_app_with(backend, small_context()).await);
        let slow = json!({"name": "slow_note", "description": "Note slowly.",
        "parameters": [{"name": "text", "type": "string", "required": true}],
        "actions": [
            {"type": "api_call", "method": "GET", "url": gate.url},
            {"type": "context.set", "data": {"slow": "{{params.text}}"}}
        ]});
        let fast = json!({"name": "fast_note", "description": "Note.",
            "parameters": [{"name": "text", "type": "string", "required": true}],
            "actions": [{"type": "context.set", "data": {"fast": "{{params.text}}"}}]});
        let key = tenant_with(&app, &[slow, fast]).await;
        start_call(&app, &key, "c1").await;
        // Each fits alone; both do not.
        let text = "z".repeat(1_200);
        let held = invoke_later(
            &app,
            &key,
            "c1",
            "f_slow",
            "slow_note",
            json!({"text": text}),
        );
        gate.held(1).await;
        let out = crate::support::invoke(
            &app,
            &key,
            "c1",
            "f_fast",
            "fast_note",
            json!({"text": text}),
        )
        .await;
        assert_eq!(out["ok"], true, "{out}");
        gate.open();
        let out = tokio::time::timeout(WAIT, held).await.unwrap().unwrap();
        assert_eq!(out["ok"], false, "{out}");
        assert!(
            out["result"]["message"]
                .as_str()
                .unwrap()
                .contains("max_context_bytes"),
            "{out}"
        );
        let call = stored(&app, &key, "c1").await;
        assert!(call["context"]["workflow"].get("slow").is_none(), "{call}");
        finish(app).await;
    }
}

/// A server over a SQLite database whose write lock is waited for only briefly, so a test can
/// make commits fail by holding that lock from another connection.
struct Impatient {
    /// Owns the database file.
    owner: TestApp,
    /// The server under test.
    app: TestApp,
    key: String,
    stop: tokio::sync::oneshot::Sender<()>,
}

impl Impatient {
    async fn start(commit_retry: Duration) -> Impatient {
        Impatient::start_with(ServerConfig {
            tenant_rate_per_s: 10_000,
            commit_retry,
            ..ServerConfig::default()
        })
        .await
    }

    async fn start_with(config: ServerConfig) -> Impatient {
        let mut owner = spawn_app(Backend::Sqlite).await;
        owner.stop_server().await;
        let options = StoreOptions {
            acquire_timeout: Duration::from_millis(200),
            ..StoreOptions::default()
        };
        let store = Store::connect_with(&owner.url, owner.key.clone(), options)
            .await
            .unwrap();
        let http = HttpEffects::new(HttpConfig {
            allow_private_networks: true,
            ..HttpConfig::default()
        })
        .unwrap();
        let state = AppState::new(
            store,
            Arc::new(Effects::http_only(Arc::new(http))),
            config,
            None,
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn({
            let state = state.clone();
            async move {
                let _ = switchboard_server::serve(listener, state, async move {
                    let _ = stopped.await;
                })
                .await;
            }
        });
        let mut app = TestApp::view(&owner, base);
        app.state = state;
        let key = tenant_with(&app, &[crate::support::save_meal()]).await;
        Impatient {
            owner,
            app,
            key,
            stop,
        }
    }

    async fn finish(self) {
        let _ = self.stop.send(());
        self.app.state.store.close().await;
        self.owner.stop().await;
    }
}

/// Another connection holding SQLite's write lock (`BEGIN IMMEDIATE`).
async fn lock_database(url: &str) -> sqlx::SqliteConnection {
    use sqlx::Connection;
    let mut conn = sqlx::SqliteConnection::connect(url).await.unwrap();
    sqlx::raw_sql("BEGIN IMMEDIATE")
        .execute(&mut conn)
        .await
        .unwrap();
    conn
}

fn meal() -> Value {
    json!({"meal_type": "lunch", "dishes": ["soup"]})
}

#[tokio::test]
async fn a_commit_the_database_keeps_refusing_is_an_error_and_changes_nothing() {
    let t = Impatient::start(Duration::from_millis(300)).await;
    let (app, key) = (&t.app, t.key.as_str());
    start_call(app, key, "c1").await;
    let mut lock = lock_database(&app.url).await;
    let out = crate::support::invoke(app, key, "c1", "f1", "save_meal", meal()).await;
    sqlx::raw_sql("ROLLBACK").execute(&mut lock).await.unwrap();
    assert_eq!(out["ok"], false, "{out}");
    assert_eq!(out["error"], "tool_execution_failed", "{out}");
    assert!(
        out["result"]["message"]
            .as_str()
            .unwrap()
            .contains("could not be saved"),
        "{out}"
    );
    let call = stored(app, key, "c1").await;
    assert!(
        call["context"]["workflow"].get("logged_meals").is_none(),
        "{call}"
    );
    // What the call's session holds is what is stored.
    let live = app.state.calls.get("acme", "c1").unwrap();
    let snapshot = live.session.snapshot().await.unwrap();
    assert_eq!(
        serde_json::to_value(&snapshot.context).unwrap()["workflow"],
        call["context"]["workflow"]
    );
    // The call goes on: the next commit lands.
    let out = crate::support::invoke(app, key, "c1", "f2", "save_meal", meal()).await;
    assert_eq!(out["ok"], true, "{out}");
    let call = stored(app, key, "c1").await;
    assert_eq!(
        call["context"]["workflow"]["logged_meals"]
            .as_array()
            .map(Vec::len),
        Some(1),
        "{call}"
    );
    t.finish().await;
}

#[tokio::test]
async fn a_commit_that_fails_for_a_moment_is_retried_and_stored() {
    let t = Impatient::start(Duration::from_secs(10)).await;
    let key = t.key.clone();
    start_call(&t.app, &key, "c1").await;
    let mut lock = lock_database(&t.app.url).await;
    let app = Arc::new(TestApp::view(&t.app, t.app.base.clone()));
    let pending = invoke_later(&app, &key, "c1", "f1", "save_meal", meal());
    // Held for longer than one attempt waits for the lock, so at least one attempt fails.
    tokio::time::sleep(Duration::from_millis(700)).await;
    sqlx::raw_sql("ROLLBACK").execute(&mut lock).await.unwrap();
    let out = tokio::time::timeout(WAIT * 2, pending)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(out["ok"], true, "{out}");
    let call = stored(&app, &key, "c1").await;
    assert_eq!(
        call["context"]["workflow"]["logged_meals"][0]["meal_type"], "lunch",
        "{call}"
    );
    t.finish().await;
}

#[tokio::test]
async fn a_node_whose_lease_runs_out_serves_no_call_and_says_so_within_a_second() {
    let lease = Duration::from_millis(900);
    let t = Impatient::start_with(ServerConfig {
        tenant_rate_per_s: 10_000,
        commit_retry: Duration::from_millis(300),
        lease,
        ..ServerConfig::default()
    })
    .await;
    let (app, key) = (&t.app, t.key.as_str());
    start_call(app, key, "c1").await;
    let ready = || async {
        app.client
            .get(format!("{}/readyz", app.base))
            .send()
            .await
            .unwrap()
            .status()
    };
    assert_eq!(ready().await, StatusCode::OK);
    // The database stops taking writes: the heartbeat's renewals fail.
    let mut lock = lock_database(&app.url).await;
    let locked = std::time::Instant::now();
    let mut said_at = None;
    while locked.elapsed() < lease * 3 {
        if ready().await == StatusCode::SERVICE_UNAVAILABLE {
            said_at = Some(locked.elapsed());
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Within a second of the lease running out (the last renewal was at most a lease ago).
    let said_at = said_at.expect("/readyz never said 503");
    assert!(said_at < lease + Duration::from_secs(1), "{said_at:?}");
    // The call's requests are refused at once: at most one renewal is tried, for a second.
    let started = std::time::Instant::now();
    let (s, body) = app
        .post(
            "/v1/calls/c1/invocations",
            key,
            json!({"function_call_id": "f1", "name": "save_meal", "arguments": meal()}),
        )
        .await;
    assert_eq!(s, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(body["error"]["details"]["retry_after_s"], 1, "{body}");
    assert!(
        started.elapsed() < Duration::from_millis(1500),
        "{:?}",
        started.elapsed()
    );
    // The database answers again: the next renewal lands and the node serves again.
    sqlx::raw_sql("ROLLBACK").execute(&mut lock).await.unwrap();
    let back = std::time::Instant::now();
    while ready().await != StatusCode::OK {
        assert!(back.elapsed() < Duration::from_secs(5), "never ready again");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let out = crate::support::invoke(app, key, "c1", "f1", "save_meal", meal()).await;
    assert_eq!(out["ok"], true, "{out}");
    t.finish().await;
}

#[tokio::test]
async fn an_order_taken_while_the_database_is_away_is_answered_and_stored_once_it_returns() {
    use wiremock::matchers::{method, path};
    use wiremock::{Mock, MockServer, Request, ResponseTemplate};
    let t = Impatient::start(Duration::from_millis(300)).await;
    let (app, key) = (&t.app, t.key.clone());
    // The order API signals each order, and answers it half a second later: meanwhile the
    // database stops taking writes.
    let (taken, mut orders) = tokio::sync::mpsc::unbounded_channel::<()>();
    let upstream = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/orders"))
        .respond_with(move |_: &Request| {
            let _ = taken.send(());
            ResponseTemplate::new(201)
                .set_body_json(json!({"order_id": "A-1"}))
                .set_delay(Duration::from_millis(500))
        })
        .mount(&upstream)
        .await;
    let order = json!({"name": "place_order", "description": "Order an item.",
        "parameters": [{"name": "item", "type": "string", "required": true}],
        "actions": [
            {"type": "api_call", "method": "POST", "url": format!("{}/orders", upstream.uri()),
             "body": {"item": "{{params.item}}"}, "retry_count": 0, "response_path": "order"},
            {"type": "context.set", "data": {"orders[+]": "{{params.item}}"}}],
        "on_success": [{"type": "respond", "message": "Ordered: {{workflow.order.order_id}}."}]});
    assert_eq!(
        app.post("/v1/tools", &key, order).await.0,
        StatusCode::CREATED
    );
    let agent = json!({"instructions": "Help.", "default": true,
        "tools": [{"tool": "save_meal"}, {"tool": "place_order"}]});
    assert_eq!(
        app.put("/v1/agents/assistant", &key, agent).await.0,
        StatusCode::OK
    );
    start_call(app, &key, "c1").await;
    let shared = Arc::new(TestApp::view(app, app.base.clone()));
    let first = invoke_later(
        &shared,
        &key,
        "c1",
        "f1",
        "place_order",
        json!({"item": "pizza"}),
    );
    orders.recv().await.unwrap();
    let mut lock = lock_database(&app.url).await;
    let first = tokio::time::timeout(WAIT, first).await.unwrap().unwrap();
    // The order was taken: the model hears it, not "nothing was changed".
    assert_eq!(first["ok"], true, "{first}");
    assert!(first["output"].as_str().unwrap().contains("A-1"), "{first}");
    // The model's retry — another function call id, the same order — joins the first.
    let again = crate::support::invoke(
        app,
        &key,
        "c1",
        "f2",
        "place_order",
        json!({"item": "pizza"}),
    )
    .await;
    assert_eq!(again["duplicate_of"], "f1", "{again}");
    assert_eq!(upstream.received_requests().await.unwrap().len(), 1);
    let waiting = stored(app, &key, "c1").await;
    assert_eq!(waiting["invocations_total"], 0, "{waiting}");
    // The database takes writes again: both records land, with the order in the context.
    sqlx::raw_sql("ROLLBACK").execute(&mut lock).await.unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    loop {
        let call = stored(app, &key, "c1").await;
        if call["invocations_total"] == 2 {
            // Read again: a view reads the context before the records, and the first record's
            // context lands with it.
            let call = stored(app, &key, "c1").await;
            assert_eq!(
                call["context"]["workflow"]["orders"],
                json!(["pizza"]),
                "{call}"
            );
            break;
        }
        assert!(std::time::Instant::now() < deadline, "never stored: {call}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(upstream.received_requests().await.unwrap().len(), 1);
    t.finish().await;
}
