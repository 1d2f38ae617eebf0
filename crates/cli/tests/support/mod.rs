//! What the process tests share: `switchboard serve` as a real process (killed with SIGKILL
//! when dropped), a fresh PostgreSQL database per test, bounded test bodies, and an HTTP
//! client for the API.
#![allow(dead_code)]

pub mod proxy;

use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

/// Bound on a whole test body: past it, the body is dropped (its processes killed) and the test fails.
pub const TEST_LIMIT: Duration = Duration::from_secs(240);
/// Bound on a server's start (migrations included).
pub const START_LIMIT: Duration = Duration::from_secs(60);
/// The nodes' lease in these tests: a killed node's calls are taken over this long after.
pub const LEASE_MS: u64 = 1500;

pub fn random(n: usize) -> String {
    std::iter::repeat_with(fastrand::lowercase)
        .take(n)
        .collect()
}

/// A directory of the test's own, removed when dropped.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new() -> TempDir {
        let dir = std::env::temp_dir().join(format!("sb-proc-{}", random(12)));
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        // `SWITCHBOARD_KEEP_TEST_DIRS=1` keeps the servers' logs for a post-mortem.
        if std::env::var_os("SWITCHBOARD_KEEP_TEST_DIRS").is_some() {
            eprintln!("kept {}", self.0.display());
            return;
        }
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A running `switchboard serve`; killed (SIGKILL) and reaped when dropped.
pub struct Serve {
    child: Child,
    pub base: String,
    log: PathBuf,
    /// The port it listens on (a restart may take it again).
    pub port: u16,
}

impl Serve {
    /// Starts `switchboard serve` on `database` with the master key in `dir`, and waits until
    /// `/readyz` answers 200. Picks a free port, and another one if it was taken meanwhile.
    pub async fn start(database: &str, dir: &Path, name: &str) -> Serve {
        let lease = ["--lease-ms".to_owned(), LEASE_MS.to_string()];
        Serve::start_with(database, dir, name, &lease, None).await
    }

    /// [`Serve::start`] with more arguments, on `port` when given (a restarted node taking its
    /// address again).
    pub async fn start_with(
        database: &str,
        dir: &Path,
        name: &str,
        extra: &[String],
        port: Option<u16>,
    ) -> Serve {
        Serve::start_within(database, dir, name, extra, port, None).await
    }

    /// [`Serve::start_with`] under an open-files limit of `open_files` (set by the shell that
    /// starts it, as `ulimit -n` would), when given.
    pub async fn start_within(
        database: &str,
        dir: &Path,
        name: &str,
        extra: &[String],
        port: Option<u16>,
        open_files: Option<u64>,
    ) -> Serve {
        let mut last_log = String::new();
        for attempt in 0..5 {
            let port = port.unwrap_or_else(|| {
                std::net::TcpListener::bind("127.0.0.1:0")
                    .unwrap()
                    .local_addr()
                    .unwrap()
                    .port()
            });
            let log = dir.join(format!("{name}-{attempt}-{}.log", random(6)));
            let mut command = match open_files {
                Some(limit) => {
                    let mut sh = Command::new("sh");
                    sh.arg("-c")
                        .arg(format!("ulimit -n {limit} && exec \"$0\" \"$@\""))
                        .arg(env!("CARGO_BIN_EXE_switchboard"));
                    sh
                }
                None => Command::new(env!("CARGO_BIN_EXE_switchboard")),
            };
            let child = command
                .args(["serve", "--database", database, "--listen"])
                .arg(format!("127.0.0.1:{port}"))
                .arg("--key-file")
                .arg(dir.join("master.key"))
                .args(["--log-format", "text", "--allow-private-network"])
                .args(extra)
                .env_remove("DATABASE_URL")
                .env_remove("SWITCHBOARD_MASTER_KEY")
                .env_remove("SWITCHBOARD_KEY_FILE")
                .env_remove("SWITCHBOARD_LISTEN")
                .env("SWITCHBOARD_LOG", "info")
                .env("NO_COLOR", "1")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(&log).unwrap())
                .spawn()
                .unwrap();
            let mut serve = Serve {
                child,
                base: format!("http://127.0.0.1:{port}"),
                log,
                port,
            };
            match serve.wait_ready().await {
                Ok(()) => return serve,
                Err(exited) => {
                    last_log = serve.log();
                    if !(exited && last_log.contains("cannot listen")) {
                        break;
                    }
                    // A fixed port may still be held a moment by the process just killed.
                    tokio::time::sleep(Duration::from_millis(250)).await;
                }
            }
        }
        panic!("`switchboard serve` ({name}) did not become ready; its log:\n{last_log}");
    }

    /// `Err(true)` when the process exited, `Err(false)` when it was not ready in time.
    pub async fn wait_ready(&mut self) -> Result<(), bool> {
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(2))
            .build()
            .unwrap();
        let deadline = Instant::now() + START_LIMIT;
        while Instant::now() < deadline {
            if self.child.try_wait().unwrap().is_some() {
                return Err(true);
            }
            if let Ok(r) = client.get(format!("{}/readyz", self.base)).send().await
                && r.status() == StatusCode::OK
            {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Err(false)
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The admin key a first start on an empty database prints (once).
    pub fn admin_key(&self) -> String {
        let log = self.log();
        log.lines()
            .find_map(|l| l.split_once("created the admin key"))
            .and_then(|(_, rest)| rest.rsplit(": ").next())
            .map(|k| k.trim().to_owned())
            .unwrap_or_else(|| panic!("no admin key in the log:\n{log}"))
    }

    /// SIGKILL: no shutdown, no flushing, nothing.
    pub fn kill9(&mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An HTTP client with a bound on every request.
pub fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap()
}

pub async fn send(
    client: &reqwest::Client,
    method: Method,
    url: String,
    key: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let mut req = client.request(method, url).bearer_auth(key);
    if let Some(b) = body {
        req = req.json(&b);
    }
    let r = req.send().await.unwrap();
    let status = r.status();
    let text = r.text().await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

impl Serve {
    pub async fn call(&self, method: Method, path: &str, key: &str, body: Option<Value>) -> Value {
        let (s, v) = send(
            &client(),
            method.clone(),
            format!("{}{path}", self.base),
            key,
            body,
        )
        .await;
        assert!(s.is_success(), "{method} {path} on {}: {s} {v}", self.base);
        v
    }

    pub async fn get(&self, path: &str, key: &str) -> Value {
        self.call(Method::GET, path, key, None).await
    }

    pub async fn post(&self, path: &str, key: &str, body: Value) -> Value {
        self.call(Method::POST, path, key, Some(body)).await
    }

    pub async fn put(&self, path: &str, key: &str, body: Value) -> Value {
        self.call(Method::PUT, path, key, Some(body)).await
    }

    /// A tenant and its API key, made with the admin key.
    pub async fn tenant(&self, admin: &str, id: &str) -> String {
        self.post("/v1/tenants", admin, json!({"id": id})).await;
        let created = self
            .post(&format!("/v1/tenants/{id}/api-keys"), admin, json!({}))
            .await;
        created["key"].as_str().unwrap().to_owned()
    }

    /// Invokes a tool in a call; the answer must be a success.
    /// Retried, as a client does, while the call is unavailable (503: its owner died and its
    /// lease has not run out yet).
    pub async fn invoke(&self, key: &str, call: &str, fc: &str, name: &str, args: Value) -> Value {
        let url = format!("{}/v1/calls/{call}/invocations", self.base);
        let body = json!({"function_call_id": fc, "name": name, "arguments": args});
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let (s, r) = send(
                &client(),
                Method::POST,
                url.clone(),
                key,
                Some(body.clone()),
            )
            .await;
            if s == StatusCode::SERVICE_UNAVAILABLE && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
            assert!(s.is_success(), "{name} ({fc}) on {}: {s} {r}", self.base);
            assert_eq!(r["ok"], true, "{name} ({fc}) on {}: {r}", self.base);
            return r;
        }
    }
}

/// Runs `body` with the URL of a fresh PostgreSQL database, and drops the database after it,
/// also when the body fails (the failure is raised again afterwards) or runs out of time.
pub async fn with_postgres<F, Fut>(body: F)
where
    F: FnOnce(String) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    with_postgres_within(TEST_LIMIT, body).await
}

/// [`with_postgres`] with another bound on the body than [`TEST_LIMIT`].
pub async fn with_postgres_within<F, Fut>(limit: Duration, body: F)
where
    F: FnOnce(String) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let admin = std::env::var("SWITCHBOARD_TEST_DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_owned());
    let name = format!("sb_proc_{}", random(12));
    let pool = sqlx::PgPool::connect(&admin)
        .await
        .expect("PostgreSQL at SWITCHBOARD_TEST_DATABASE_URL");
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
        .execute(&pool)
        .await
        .expect("create the test database");
    let base = admin
        .rsplit_once('/')
        .map(|(b, _)| b.to_owned())
        .unwrap_or(admin.clone());
    let mut task = tokio::spawn(body(format!("{base}/{name}")));
    let outcome = match tokio::time::timeout(limit, &mut task).await {
        Ok(r) => r.map_err(|e| e.try_into_panic().ok()),
        Err(_) => {
            // Dropping the body kills its processes before the database goes.
            task.abort();
            let _ = task.await;
            Err(None)
        }
    };
    let dropped = sqlx::query(sqlx::AssertSqlSafe(format!(
        "DROP DATABASE IF EXISTS {name} WITH (FORCE)"
    )))
    .execute(&pool)
    .await;
    pool.close().await;
    match outcome {
        Ok(()) => {}
        Err(Some(panic)) => std::panic::resume_unwind(panic),
        Err(None) => panic!("the test did not finish within {limit:?}"),
    }
    dropped.expect("drop the test database");
}

/// Runs `body` in its own task with a time bound, so its guards (processes, files) are dropped
/// before the failure is raised.
pub async fn bounded<Fut>(body: Fut)
where
    Fut: Future<Output = ()> + Send + 'static,
{
    let mut task = tokio::spawn(body);
    match tokio::time::timeout(TEST_LIMIT, &mut task).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => match e.try_into_panic() {
            Ok(panic) => std::panic::resume_unwind(panic),
            Err(e) => panic!("the test task failed: {e}"),
        },
        Err(_) => {
            task.abort();
            let _ = task.await;
            panic!("the test did not finish within {TEST_LIMIT:?}");
        }
    }
}

/// SQLite's own check of the file: every page, index and constraint.
pub async fn integrity_check(db: &Path) {
    use sqlx::{ConnectOptions as _, Connection as _};
    let mut conn = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(db)
        .create_if_missing(false)
        .connect()
        .await
        .unwrap();
    let rows: Vec<(String,)> = sqlx::query_as("PRAGMA integrity_check")
        .fetch_all(&mut conn)
        .await
        .unwrap();
    assert_eq!(rows, vec![("ok".to_owned(),)], "integrity_check");
    let broken: Vec<(String,)> = sqlx::query_as("SELECT \"table\" FROM pragma_foreign_key_check")
        .fetch_all(&mut conn)
        .await
        .unwrap();
    assert!(broken.is_empty(), "rows with broken references: {broken:?}");
    conn.close().await.unwrap();
}
