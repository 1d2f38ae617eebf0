//! The store's behaviour, written once and run on both backends.
//!
//! SQLite: a fresh temp file per test. PostgreSQL: a fresh database `sb_test_<random>` made
//! through `SWITCHBOARD_TEST_DATABASE_URL` (default `postgres://postgres@127.0.0.1:5432/postgres`),
//! dropped at the end, also when the test fails. Set `SWITCHBOARD_TEST_SKIP_POSTGRES=1` to run
//! the SQLite half only.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeSet;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use secrecy::{ExposeSecret, SecretString};
use serde_json::{Value, json};
use sqlx::{AssertSqlSafe, Connection, Executor, Row};
use switchboard_core::context::{Scope, Write};
use switchboard_core::effect::{EffectRequest, EndCallRequest};
use switchboard_core::{CallInfo, Context, ErrorCode};
use switchboard_runtime::journal::{CallJournal, CallState, Checkpoint, Claim, JournalEntry};
use switchboard_runtime::{Invocation, InvocationRecord};
use switchboard_store::{
    AgentDef, Backend, CallStatus, MasterKey, McpServerConfig, Page, Store, StoreError,
    StoreOptions,
};

// ---------------------------------------------------------------------------------------------
// Harness
// ---------------------------------------------------------------------------------------------

/// One test's database and the store on it.
struct Harness {
    store: Store,
    /// The store's master key, for more nodes over the same database.
    key: MasterKey,
    backend: Backend,
    /// The URL the store connected to (a file path for SQLite).
    url: String,
}

fn unique() -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!(
        "{:x}{:x}{:x}",
        std::process::id(),
        nanos,
        N.fetch_add(1, Ordering::Relaxed)
    )
}

fn admin_url() -> String {
    std::env::var("SWITCHBOARD_TEST_DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_owned())
}

/// The admin URL with its database replaced by `db`.
fn with_database(admin: &str, db: &str) -> String {
    let (base, query) = match admin.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (admin, None),
    };
    let scheme_end = base.find("://").map_or(0, |i| i + 3);
    let base = match base[scheme_end..].find('/') {
        Some(i) => &base[..scheme_end + i],
        None => base,
    };
    match query {
        Some(q) => format!("{base}/{db}?{q}"),
        None => format!("{base}/{db}"),
    }
}

async fn setup(backend: Backend) -> (Harness, Cleanup) {
    match backend {
        Backend::Sqlite => {
            let path = std::env::temp_dir().join(format!("sb-store-test-{}.db", unique()));
            let url = path.to_string_lossy().into_owned();
            let key = MasterKey::generate();
            let store = Store::connect(&url, key.clone()).await.unwrap();
            store.migrate().await.unwrap();
            (
                Harness {
                    store,
                    key,
                    backend,
                    url,
                },
                Cleanup::Sqlite(path),
            )
        }
        Backend::Postgres => {
            let admin = admin_url();
            let name = format!("sb_test_{}", unique());
            let mut conn = sqlx::PgConnection::connect(&admin)
                .await
                .unwrap_or_else(|e| {
                    panic!(
                        "cannot reach PostgreSQL at SWITCHBOARD_TEST_DATABASE_URL ({e}); start it, \
                     or set SWITCHBOARD_TEST_SKIP_POSTGRES=1 to run the SQLite half only"
                    )
                });
            conn.execute(AssertSqlSafe(format!("CREATE DATABASE {name}")))
                .await
                .unwrap();
            conn.close().await.unwrap();
            let url = with_database(&admin, &name);
            let key = MasterKey::generate();
            let store = Store::connect(&url, key.clone()).await.unwrap();
            store.migrate().await.unwrap();
            (
                Harness {
                    store,
                    key,
                    backend,
                    url,
                },
                Cleanup::Postgres { admin, name },
            )
        }
    }
}

enum Cleanup {
    Sqlite(std::path::PathBuf),
    Postgres { admin: String, name: String },
}

impl Cleanup {
    async fn run(self) {
        match self {
            Cleanup::Sqlite(path) => {
                for suffix in ["", "-wal", "-shm"] {
                    let mut p = path.clone().into_os_string();
                    p.push(suffix);
                    let _ = std::fs::remove_file(p);
                }
            }
            Cleanup::Postgres { admin, name } => {
                if let Ok(mut conn) = sqlx::PgConnection::connect(&admin).await {
                    let _ = conn
                        .execute(AssertSqlSafe(format!(
                            "DROP DATABASE IF EXISTS {name} WITH (FORCE)"
                        )))
                        .await;
                    let _ = conn.close().await;
                }
            }
        }
    }
}

/// Runs one test body on a fresh database of `backend`, and removes the database afterwards,
/// also when the body panics (the body runs in its own task so its panic can be caught).
async fn run<F, Fut>(backend: Backend, body: F)
where
    F: FnOnce(Harness) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    if backend == Backend::Postgres
        && std::env::var("SWITCHBOARD_TEST_SKIP_POSTGRES").is_ok_and(|v| v == "1")
    {
        eprintln!("skipped: SWITCHBOARD_TEST_SKIP_POSTGRES=1");
        return;
    }
    let (harness, cleanup) = setup(backend).await;
    let result = tokio::spawn(body(harness)).await;
    cleanup.run().await;
    if let Err(e) = result {
        match e.try_into_panic() {
            Ok(panic) => std::panic::resume_unwind(panic),
            Err(e) => panic!("test task failed: {e}"),
        }
    }
}

/// Declares each named `async fn(Harness)` as two tests, `<name>::sqlite` and `<name>::postgres`.
macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                super::run(switchboard_store::Backend::Sqlite, super::$name).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                super::run(switchboard_store::Backend::Postgres, super::$name).await
            }
        }
    )*};
}

/// Every cell of every row of `table`, as bytes (text as UTF-8, blobs raw), read around the store.
async fn raw_cells(h: &Harness, table: &str) -> Vec<Vec<u8>> {
    macro_rules! cells {
        ($rows:expr) => {{
            let mut out: Vec<Vec<u8>> = Vec::new();
            for row in $rows {
                for i in 0..row.len() {
                    if let Ok(v) = row.try_get::<Option<String>, _>(i) {
                        out.push(v.unwrap_or_default().into_bytes());
                    } else if let Ok(v) = row.try_get::<Option<Vec<u8>>, _>(i) {
                        out.push(v.unwrap_or_default());
                    } else if let Ok(v) = row.try_get::<Option<i64>, _>(i) {
                        out.push(v.map(|n| n.to_string()).unwrap_or_default().into_bytes());
                    } else if let Ok(v) = row.try_get::<Option<bool>, _>(i) {
                        out.push(v.map(|b| b.to_string()).unwrap_or_default().into_bytes());
                    } else {
                        panic!("{table}: column {i} has a type this scan does not read");
                    }
                }
            }
            out
        }};
    }
    let sql = AssertSqlSafe(format!("SELECT * FROM {table}"));
    match h.backend {
        Backend::Sqlite => {
            let mut conn = sqlx::SqliteConnection::connect(&format!("sqlite://{}", h.url))
                .await
                .unwrap();
            let rows = sqlx::query(sql).fetch_all(&mut conn).await.unwrap();
            cells!(rows)
        }
        Backend::Postgres => {
            let mut conn = sqlx::PgConnection::connect(&h.url).await.unwrap();
            let rows = sqlx::query(sql).fetch_all(&mut conn).await.unwrap();
            cells!(rows)
        }
    }
}

/// Runs `statements` on the test's database, around the store.
async fn execute_raw(h: &Harness, statements: &[&str]) {
    match h.backend {
        Backend::Sqlite => {
            let mut conn = sqlx::SqliteConnection::connect(&format!("sqlite://{}", h.url))
                .await
                .unwrap();
            for sql in statements {
                conn.execute(AssertSqlSafe(*sql)).await.unwrap();
            }
        }
        Backend::Postgres => {
            let mut conn = sqlx::PgConnection::connect(&h.url).await.unwrap();
            for sql in statements {
                conn.execute(AssertSqlSafe(*sql)).await.unwrap();
            }
        }
    }
}

/// One number read from the test's database, around the store.
async fn query_i64(h: &Harness, sql: &str) -> i64 {
    match h.backend {
        Backend::Sqlite => {
            let mut conn = sqlx::SqliteConnection::connect(&format!("sqlite://{}", h.url))
                .await
                .unwrap();
            sqlx::query_scalar(AssertSqlSafe(sql))
                .fetch_one(&mut conn)
                .await
                .unwrap()
        }
        Backend::Postgres => {
            let mut conn = sqlx::PgConnection::connect(&h.url).await.unwrap();
            sqlx::query_scalar(AssertSqlSafe(sql))
                .fetch_one(&mut conn)
                .await
                .unwrap()
        }
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// Asserts that no cell of `table` contains `needle`, and that the table is not empty.
async fn assert_absent(h: &Harness, table: &str, needle: &str) {
    let cells = raw_cells(h, table).await;
    assert!(
        !cells.is_empty(),
        "{table} is empty: the scan proves nothing"
    );
    for cell in &cells {
        assert!(
            !contains(cell, needle.as_bytes()),
            "{table} holds the plaintext `{needle}`"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Fixtures
// ---------------------------------------------------------------------------------------------

fn tool_def(name: &str, description: &str) -> Value {
    json!({
        "name": name,
        "description": description,
        "parameters": [{"name": "meal_type", "type": "string", "required": true}],
        "actions": [{"type": "context.set", "data": {"logged_meals[+]": "{{params}}"}}],
        "on_success": [{"type": "respond", "message": "Logged."}]
    })
}

fn call_info(tenant: &str, id: &str) -> CallInfo {
    CallInfo {
        id: id.to_owned(),
        tenant_id: tenant.to_owned(),
        agent: "booking".to_owned(),
        from: Some("+14155550100".to_owned()),
        to: Some("+14155550199".to_owned()),
        started_at: "2026-11-23T10:00:00.000Z".to_owned(),
    }
}

fn record(fc: &str, ok: bool) -> InvocationRecord {
    InvocationRecord {
        function_call_id: fc.to_owned(),
        tool: "save_meal".to_owned(),
        arguments: r#"{"meal_type":"lunch"}"#.to_owned(),
        ok,
        error: (!ok).then_some(ErrorCode::ValidationFailed),
        output: format!("{{\"ok\":{ok}}}"),
        latency_ms: 12.5,
        started_at: "2026-11-23T10:00:01.000Z".to_owned(),
        finished_at: "2026-11-23T10:00:01.012Z".to_owned(),
        response_id: Some("resp_1".to_owned()),
        interrupted: false,
        duplicate_of: None,
        logs: Vec::new(),
        trace: None,
        trace_bytes: None,
        policy: None,
    }
}

fn checkpoint(call_id: &str, fc: &str) -> Checkpoint {
    Checkpoint {
        invocation: Invocation {
            call_id: call_id.to_owned(),
            function_call_id: fc.to_owned(),
            name: "end_call".to_owned(),
            arguments_json: "{}".to_owned(),
            response_id: Some("resp_1".to_owned()),
            item_id: None,
        },
        request: EffectRequest::EndCall(EndCallRequest {
            message: Some("Goodbye!".to_owned()),
        }),
        suspended: json!({"pc": 3, "token": "Bearer SENTINEL-CHECKPOINT-TOKEN"}),
    }
}

fn append_item(i: usize) -> Write {
    Write::Append {
        scope: Scope::Workflow,
        keys: vec!["items".to_owned()].into(),
        value: json!(i),
    }
}

async fn tenant(store: &Store, id: &str) {
    store.create_tenant(id, id, &json!({})).await.unwrap();
}

#[path = "store/call_search.rs"]
mod call_search;
#[path = "store/calls.rs"]
mod calls;
#[path = "store/console_sessions.rs"]
mod console_sessions;
#[path = "store/definitions.rs"]
mod definitions;
#[path = "store/journal.rs"]
mod journal;
#[path = "store/memory.rs"]
mod memory;
#[path = "store/sealing.rs"]
mod sealing;
#[path = "store/slot_holds.rs"]
mod slot_holds;
#[path = "store/tenants.rs"]
mod tenants;
#[path = "store/tool_latency.rs"]
mod tool_latency;
