//! `spawn_app`: a real server on 127.0.0.1:0 over a fresh database (a SQLite file, or a new
//! PostgreSQL database made for the test and dropped after it).

use std::sync::Arc;

use reqwest::{Method, StatusCode};
use secrecy::ExposeSecret;
use serde_json::{Value, json};
use switchboard_runtime::Effects;
use switchboard_runtime::http::{HttpConfig, HttpEffects};
use switchboard_server::{AppState, ServerConfig};
use switchboard_store::{MasterKey, Store};
use tokio::sync::oneshot;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

pub struct TestApp {
    pub base: String,
    pub admin: String,
    pub client: reqwest::Client,
    pub state: AppState,
    pub url: String,
    pub key: MasterKey,
    shutdown: Option<oneshot::Sender<()>>,
    server: Option<tokio::task::JoinHandle<()>>,
    cleanup: Cleanup,
}

enum Cleanup {
    /// A view of another app's database: nothing to remove.
    None,
    File(std::path::PathBuf),
    Database {
        admin_url: String,
        name: String,
    },
}

fn admin_url() -> String {
    std::env::var("SWITCHBOARD_TEST_DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_owned())
}

fn random(n: usize) -> String {
    std::iter::repeat_with(fastrand::lowercase)
        .take(n)
        .collect()
}

async fn database(backend: Backend) -> (String, Cleanup) {
    match backend {
        Backend::Sqlite => {
            let path = std::env::temp_dir().join(format!("sb-api-{}.db", random(12)));
            (format!("sqlite://{}", path.display()), Cleanup::File(path))
        }
        Backend::Postgres => {
            let admin = admin_url();
            let name = format!("sb_api_{}", random(12));
            let pool = sqlx::PgPool::connect(&admin)
                .await
                .expect("PostgreSQL at SWITCHBOARD_TEST_DATABASE_URL");
            sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
                .execute(&pool)
                .await
                .expect("create the test database");
            pool.close().await;
            let base = admin
                .rsplit_once('/')
                .map(|(b, _)| b.to_owned())
                .unwrap_or(admin.clone());
            (
                format!("{base}/{name}"),
                Cleanup::Database {
                    admin_url: admin,
                    name,
                },
            )
        }
    }
}

/// A running server: its address, state, stop signal and task.
pub type Server = (
    String,
    AppState,
    oneshot::Sender<()>,
    tokio::task::JoinHandle<()>,
);

/// Starts a server over a database that already exists (a restart, or a second node).
pub async fn start_on(url: &str, key: MasterKey) -> Server {
    start_with(
        url,
        key,
        ServerConfig {
            tenant_rate_per_s: 10_000,
            ..ServerConfig::default()
        },
    )
    .await
}

/// Starts a server with its own settings over an existing database.
pub async fn start_with(url: &str, key: MasterKey, config: ServerConfig) -> Server {
    start_with_metrics(url, key, config, None).await
}

/// `start_with`, rendering `/metrics` from the given recorder.
pub async fn start_with_metrics(
    url: &str,
    key: MasterKey,
    config: ServerConfig,
    metrics: Option<switchboard_server::prometheus::Metrics>,
) -> Server {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    start_on_listener(listener, url, key, config, metrics).await
}

/// `start_with_metrics` on a listener bound already.
async fn start_on_listener(
    listener: tokio::net::TcpListener,
    url: &str,
    key: MasterKey,
    config: ServerConfig,
    metrics: Option<switchboard_server::prometheus::Metrics>,
) -> Server {
    let store = Store::connect(url, key).await.expect("connect");
    store.migrate().await.expect("migrate");
    let http = HttpEffects::new(HttpConfig {
        allow_private_networks: true,
        ..HttpConfig::default()
    })
    .expect("http");
    let state = AppState::new(
        store,
        Arc::new(Effects::http_only(Arc::new(http))),
        config,
        metrics,
    );
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    let (tx, rx) = oneshot::channel::<()>();
    let server = tokio::spawn({
        let state = state.clone();
        async move {
            let _ = switchboard_server::serve(listener, state, async move {
                let _ = rx.await;
            })
            .await;
        }
    });
    (base, state, tx, server)
}

/// Makes `app`'s node look dead to the others (its lease ended, as when its process is
/// killed), so another node takes its calls over. Give `app` a long lease, so its heartbeat
/// does not revive it.
pub async fn lease_lapsed(app: &TestApp) {
    app.state
        .store
        .retire_node(&app.state.node.id)
        .await
        .expect("retire the node");
}

pub async fn spawn_app(backend: Backend) -> TestApp {
    spawn_app_with(
        backend,
        ServerConfig {
            tenant_rate_per_s: 10_000,
            ..ServerConfig::default()
        },
    )
    .await
}

/// `spawn_app` with the server's own settings (e.g. OpenAI's API base pointing at a simulator).
pub async fn spawn_app_with(backend: Backend, config: ServerConfig) -> TestApp {
    spawn_app_with_metrics(backend, config, None).await
}

/// `spawn_app_with`, rendering `/metrics` from the given recorder.
pub async fn spawn_app_with_metrics(
    backend: Backend,
    config: ServerConfig,
    metrics: Option<switchboard_server::prometheus::Metrics>,
) -> TestApp {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    spawn_app_on(listener, backend, config, metrics).await
}

/// `spawn_app_with_metrics` on a listener bound already (for settings that name the server's
/// own address, such as an OAuth callback).
pub async fn spawn_app_on(
    listener: tokio::net::TcpListener,
    backend: Backend,
    config: ServerConfig,
    metrics: Option<switchboard_server::prometheus::Metrics>,
) -> TestApp {
    let (url, cleanup) = database(backend).await;
    let key = MasterKey::generate();
    let (base, state, tx, server) =
        start_on_listener(listener, &url, key.clone(), config, metrics).await;
    let (_, admin) = state
        .store
        .create_api_key(None, "test admin")
        .await
        .expect("admin key");
    TestApp {
        base,
        admin: admin.expose_secret().to_owned(),
        client: reqwest::Client::new(),
        state,
        url,
        key,
        shutdown: Some(tx),
        server: Some(server),
        cleanup,
    }
}

impl TestApp {
    /// Another server's address over the same database and keys (for restart and two-node tests).
    pub fn view(app: &TestApp, base: String) -> TestApp {
        TestApp {
            base,
            admin: app.admin.clone(),
            client: app.client.clone(),
            state: app.state.clone(),
            url: app.url.clone(),
            key: app.key.clone(),
            shutdown: None,
            server: None,
            cleanup: Cleanup::None,
        }
    }

    /// Sends a request; returns the status and the JSON body (`null` when empty).
    pub async fn call(
        &self,
        method: Method,
        path: &str,
        key: &str,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        let mut req = self.client.request(method, format!("{}{path}", self.base));
        if !key.is_empty() {
            req = req.bearer_auth(key);
        }
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req.send().await.expect("request");
        let status = resp.status();
        let text = resp.text().await.expect("body");
        (
            status,
            serde_json::from_str(&text).unwrap_or(if text.is_empty() {
                Value::Null
            } else {
                Value::String(text)
            }),
        )
    }

    pub async fn get(&self, path: &str, key: &str) -> (StatusCode, Value) {
        self.call(Method::GET, path, key, None).await
    }

    pub async fn post(&self, path: &str, key: &str, body: Value) -> (StatusCode, Value) {
        self.call(Method::POST, path, key, Some(body)).await
    }

    pub async fn put(&self, path: &str, key: &str, body: Value) -> (StatusCode, Value) {
        self.call(Method::PUT, path, key, Some(body)).await
    }

    pub async fn delete(&self, path: &str, key: &str) -> (StatusCode, Value) {
        self.call(Method::DELETE, path, key, None).await
    }

    /// Creates a tenant through the admin API and returns its first key.
    pub async fn tenant(&self, id: &str) -> String {
        let (s, body) = self
            .post("/v1/tenants", &self.admin, json!({"id": id}))
            .await;
        assert_eq!(s, StatusCode::CREATED, "{body}");
        let (s, body) = self
            .post(
                &format!("/v1/tenants/{id}/api-keys"),
                &self.admin,
                json!({"label": "test"}),
            )
            .await;
        assert_eq!(s, StatusCode::CREATED, "{body}");
        body["key"].as_str().expect("key").to_owned()
    }

    /// Stops the server (ending its live calls) and removes the database.
    pub async fn stop(mut self) {
        self.stop_server().await;
        self.state.store.close().await;
        match &self.cleanup {
            Cleanup::None => {}
            Cleanup::File(path) => {
                for suffix in ["", "-wal", "-shm"] {
                    let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
                }
            }
            Cleanup::Database { admin_url, name } => {
                if let Ok(pool) = sqlx::PgPool::connect(admin_url).await {
                    let _ = sqlx::query(sqlx::AssertSqlSafe(format!(
                        "DROP DATABASE IF EXISTS {name} WITH (FORCE)"
                    )))
                    .execute(&pool)
                    .await;
                    pool.close().await;
                }
            }
        }
    }

    /// Stops only the server, keeping the database (for restart tests).
    pub async fn stop_server(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(server) = self.server.take() {
            let _ = server.await;
        }
    }
}

/// Runs `body` against a fresh app on each backend; the database is removed even when it fails.
#[macro_export]
macro_rules! both_backends {
    ($name:ident, |$app:ident| $body:block) => {
        mod $name {
            use super::*;

            async fn run($app: std::sync::Arc<TestApp>) $body

            async fn on(backend: Backend) {
                let app = std::sync::Arc::new(spawn_app(backend).await);
                let result = tokio::spawn(run(std::sync::Arc::clone(&app))).await;
                if let Ok(app) = std::sync::Arc::try_unwrap(app) {
                    app.stop().await;
                }
                if let Err(e) = result {
                    std::panic::resume_unwind(e.into_panic());
                }
            }

            #[tokio::test]
            async fn sqlite() {
                on(Backend::Sqlite).await;
            }

            #[tokio::test]
            async fn postgres() {
                on(Backend::Postgres).await;
            }
        }
    };
}

pub fn save_meal() -> Value {
    json!({
        "name": "save_meal",
        "description": "Log a meal the user consumed",
        "parameters": [
            {"name": "meal_type", "type": "string", "enum": ["breakfast", "lunch", "dinner"], "required": true},
            {"name": "dishes", "type": "array", "items": {"type": "string"}, "required": true}
        ],
        "actions": [
            {"type": "validate", "rules": [{"check": "params.dishes | length > 0", "message": "Ask which dishes."}]},
            {"type": "context.set", "data": {"logged_meals[+]": "{{params}}"}}
        ],
        "on_success": [{"type": "respond", "message": "I've logged your {{params.meal_type}}!"}]
    })
}

pub fn refer() -> Value {
    json!({"refer": {"enabled": true, "require_confirmation": true, "destinations": [
        {"destination_id": "sales", "label": "Sales", "target_uri": "sip:sales@example.com", "priority": 10},
        {"destination_id": "support", "label": "Support", "target_uri": "+14155552000", "priority": 5}]}})
}

/// A tenant with save_meal, transfer, and a default agent using them; returns its key.
pub async fn acme(app: &TestApp, id: &str) -> String {
    let key = app.tenant(id).await;
    assert_eq!(
        app.put("/v1/features", &key, refer()).await.0,
        StatusCode::OK
    );
    assert_eq!(
        app.post("/v1/tools", &key, save_meal()).await.0,
        StatusCode::CREATED
    );
    let agent = json!({"instructions": "Help.", "tools": [{"tool": "save_meal", "config": {"unit": "g"}, "sensitive_config": {"api_key": "sk-very-secret-1"}}], "default": true});
    let (s, body) = app.put("/v1/agents/assistant", &key, agent).await;
    assert_eq!(s, StatusCode::OK, "{body}");
    key
}

pub async fn invoke(
    app: &TestApp,
    key: &str,
    call: &str,
    fc: &str,
    name: &str,
    args: Value,
) -> Value {
    let (s, body) = app
        .post(
            &format!("/v1/calls/{call}/invocations"),
            key,
            json!({"function_call_id": fc, "name": name, "arguments": args}),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{body}");
    body
}
