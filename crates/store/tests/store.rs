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

on_both_backends!(
    migrate_twice_is_fine,
    tenant_crud_and_conflict,
    deleting_a_tenant_cascades,
    api_keys_authenticate_until_revoked,
    tool_versions_and_soft_delete,
    tool_list_pages_with_a_cursor,
    agents_keep_sensitive_config_sealed_and_write_only,
    default_agent_is_unique,
    secrets_are_sealed_and_listed_by_name,
    tenants_are_isolated,
    journal_round_trip_equals_the_in_memory_fold,
    journal_appends_are_idempotent_and_ended_clears_checkpoints,
    a_call_has_one_owner_and_a_stale_owner_is_fenced_off,
    a_claim_racing_its_function_calls_finish_is_taken,
    a_write_dropped_while_its_transaction_begins_leaves_the_pool_clean,
    concurrent_claims_and_finishes_each_land_once_and_a_fenced_one_is_refused,
    create_call_then_started_keeps_pinned_versions,
    concurrent_context_updates_all_land,
    update_call_context_refusals,
    calls_list_newest_first_with_a_cursor,
    a_wrong_master_key_fails_with_crypto,
    plain_contexts_from_before_sealing_are_read_then_sealed,
    mcp_servers_are_sealed_and_shown_without_secrets,
);

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

// ---------------------------------------------------------------------------------------------
// Tests run on both backends
// ---------------------------------------------------------------------------------------------

async fn migrate_twice_is_fine(h: Harness) {
    // `setup` migrated once already.
    h.store.migrate().await.unwrap();
    h.store.migrate().await.unwrap();
    h.store.ping().await.unwrap();
    assert_eq!(h.store.backend(), h.backend);
    // A second store on the same database migrates as a no-op too (another node starting).
    let other = Store::connect(&h.url, MasterKey::generate()).await.unwrap();
    other.migrate().await.unwrap();
    other.close().await;
}

async fn tenant_crud_and_conflict(h: Harness) {
    let s = &h.store;
    let t = s
        .create_tenant("acme", "Acme Inc.", &json!({"refer": {"enabled": true}}))
        .await
        .unwrap();
    assert_eq!(t.id, "acme");
    assert_eq!(s.get_tenant("acme").await.unwrap(), Some(t.clone()));
    assert_eq!(s.get_tenant("nope").await.unwrap(), None);

    let e = s
        .create_tenant("acme", "Again", &json!({}))
        .await
        .unwrap_err();
    assert!(matches!(e, StoreError::Conflict(_)), "{e:?}");
    assert!(e.to_string().contains("acme"), "{e}");

    for bad in ["", "Acme", "-acme", "a_b", "a b", &"a".repeat(64)] {
        let e = s.create_tenant(bad, "x", &json!({})).await.unwrap_err();
        assert!(matches!(e, StoreError::Invalid(_)), "{bad}: {e:?}");
    }
    assert!(
        s.create_tenant(&"a".repeat(63), "x", &json!({}))
            .await
            .is_ok()
    );
    let e = s.create_tenant("list", "x", &json!([1])).await.unwrap_err();
    assert!(matches!(e, StoreError::Invalid(_)), "{e:?}");

    let t2 = s
        .set_features("acme", &json!({"refer": {"enabled": false}}))
        .await
        .unwrap();
    assert_eq!(t2.features, json!({"refer": {"enabled": false}}));
    assert_eq!(t2.created_at, t.created_at);
    assert_eq!(s.get_tenant("acme").await.unwrap(), Some(t2));
    let e = s.set_features("nope", &json!({})).await.unwrap_err();
    assert!(matches!(e, StoreError::NotFound(_)), "{e:?}");

    let page = s.list_tenants(Page::default()).await.unwrap();
    let ids: Vec<_> = page.items.iter().map(|t| t.id.clone()).collect();
    assert_eq!(ids, vec!["a".repeat(63), "acme".to_owned()]);
    assert_eq!(page.next, None);

    assert!(s.delete_tenant("acme").await.unwrap());
    assert!(!s.delete_tenant("acme").await.unwrap());
    assert_eq!(s.get_tenant("acme").await.unwrap(), None);
}

async fn deleting_a_tenant_cascades(h: Harness) {
    let s = &h.store;
    tenant(s, "acme").await;
    tenant(s, "other").await;
    let (_, key) = s.create_api_key(Some("acme"), "ci").await.unwrap();
    s.put_tool("acme", &tool_def("save_meal", "v1"))
        .await
        .unwrap();
    s.put_secret("acme", "openai", &SecretString::from("sk-x"))
        .await
        .unwrap();
    let agent: AgentDef = serde_json::from_value(json!({
        "name": "booking", "tools": [{"tool": "save_meal", "sensitive_config": {"k": "v"}}], "default": true
    }))
    .unwrap();
    s.put_agent("acme", &agent).await.unwrap();
    let info = call_info("acme", "call_1");
    let ctx = Context::new(&info, json!({}));
    s.create_call("acme", &info, &json!({}), &ctx)
        .await
        .unwrap();
    s.journal_append(
        "acme",
        "call_1",
        JournalEntry::Checkpoint {
            function_call_id: "fc_1".into(),
            checkpoint: Box::new(checkpoint("call_1", "fc_1")),
        },
    )
    .await
    .unwrap();
    s.journal_append(
        "acme",
        "call_1",
        JournalEntry::Finished {
            record: Box::new(record("fc_2", true)),
            context: None,
            handoffs: 0,
        },
    )
    .await
    .unwrap();
    // Another tenant's rows survive.
    s.put_tool("other", &tool_def("save_meal", "other"))
        .await
        .unwrap();

    assert!(s.delete_tenant("acme").await.unwrap());
    assert_eq!(s.authenticate(key.expose_secret()).await.unwrap(), None);
    assert!(
        s.list_tool_versions("acme", "save_meal")
            .await
            .unwrap()
            .is_empty()
    );
    assert!(s.secret_names("acme").await.unwrap().is_empty());
    assert_eq!(s.get_agent("acme", "booking").await.unwrap(), None);
    assert_eq!(s.get_call("acme", "call_1").await.unwrap(), None);
    assert_eq!(s.journal_load("acme", "call_1").await.unwrap(), None);
    for table in [
        "api_keys",
        "tool_versions",
        "agents",
        "agent_tools",
        "secrets",
        "calls",
        "call_invocations",
        "call_checkpoints",
    ] {
        let cells = raw_cells(&h, table).await;
        assert!(
            !cells.iter().any(|c| c.as_slice() == b"acme"),
            "{table} still has rows of the deleted tenant"
        );
    }
    assert!(s.get_tool("other", "save_meal").await.unwrap().is_some());
}

async fn api_keys_authenticate_until_revoked(h: Harness) {
    let s = &h.store;
    tenant(s, "acme").await;
    let (key, plain) = s.create_api_key(Some("acme"), "ci deploys").await.unwrap();
    let plain = plain.expose_secret().to_owned();
    let random = plain.strip_prefix("sb_acme_").expect("tenant key format");
    assert_eq!(random.len(), 32);
    assert!(
        random
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    );
    assert_eq!(key.prefix.len(), 8);
    assert!(random.starts_with(&key.prefix));
    assert_eq!(key.tenant_id.as_deref(), Some("acme"));
    assert_eq!(key.revoked_at, None);

    let (admin, admin_plain) = s.create_api_key(None, "bootstrap").await.unwrap();
    let admin_plain = admin_plain.expose_secret().to_owned();
    assert!(admin_plain.starts_with("sb_admin_"));
    assert_eq!(admin.tenant_id, None);

    let p = s.authenticate(&plain).await.unwrap().unwrap();
    assert_eq!(p.key_id, key.id);
    assert_eq!(p.tenant_id.as_deref(), Some("acme"));
    let p = s.authenticate(&admin_plain).await.unwrap().unwrap();
    assert_eq!((p.key_id.as_str(), p.tenant_id), (admin.id.as_str(), None));

    // Near misses and garbage do not authenticate.
    let mut wrong = plain.clone();
    let last = wrong.pop().unwrap();
    wrong.push(if last == 'x' { 'y' } else { 'x' });
    for bad in [wrong.as_str(), "", "sb_", "Bearer x", &"sb_".repeat(100)] {
        assert_eq!(s.authenticate(bad).await.unwrap(), None, "{bad}");
    }

    assert_eq!(
        s.list_api_keys(Some("acme")).await.unwrap(),
        vec![key.clone()]
    );
    assert_eq!(s.list_api_keys(None).await.unwrap(), vec![admin.clone()]);

    // The plaintext is never stored: only its hash and prefix.
    assert_absent(&h, "api_keys", &plain).await;
    assert_absent(&h, "api_keys", random).await;
    assert_absent(&h, "api_keys", &admin_plain).await;

    // Revoking needs the right owner; a revoked key never authenticates.
    assert!(!s.revoke_api_key(None, &key.id).await.unwrap());
    assert!(!s.revoke_api_key(Some("acme"), &admin.id).await.unwrap());
    assert!(!s.revoke_api_key(Some("acme"), "key_nope").await.unwrap());
    assert!(s.revoke_api_key(Some("acme"), &key.id).await.unwrap());
    assert_eq!(s.authenticate(&plain).await.unwrap(), None);
    let listed = s.list_api_keys(Some("acme")).await.unwrap();
    let revoked_at = listed[0].revoked_at.clone().expect("revoked");
    assert!(s.revoke_api_key(Some("acme"), &key.id).await.unwrap());
    let listed = s.list_api_keys(Some("acme")).await.unwrap();
    assert_eq!(listed[0].revoked_at.as_ref(), Some(&revoked_at));
    assert!(s.authenticate(&admin_plain).await.unwrap().is_some());

    let e = s.create_api_key(Some("nope"), "x").await.unwrap_err();
    assert!(matches!(e, StoreError::NotFound(_)), "{e:?}");
}

async fn tool_versions_and_soft_delete(h: Harness) {
    let s = &h.store;
    tenant(s, "acme").await;
    let v1 = s
        .put_tool("acme", &tool_def("save_meal", "one"))
        .await
        .unwrap();
    let v2 = s
        .put_tool("acme", &tool_def("save_meal", "two"))
        .await
        .unwrap();
    let v3 = s
        .put_tool("acme", &tool_def("save_meal", "three"))
        .await
        .unwrap();
    assert_eq!((v1.version, v2.version, v3.version), (1, 2, 3));
    assert_eq!(v3.name, "save_meal");
    assert_eq!(v3.definition, tool_def("save_meal", "three"));

    // The same definition again is not a new version (retried PUTs).
    let again = s
        .put_tool("acme", &tool_def("save_meal", "three"))
        .await
        .unwrap();
    assert_eq!(again, v3);

    assert_eq!(
        s.get_tool("acme", "save_meal").await.unwrap(),
        Some(v3.clone())
    );
    assert_eq!(
        s.get_tool_version("acme", "save_meal", 1).await.unwrap(),
        Some(v1.clone())
    );
    assert_eq!(
        s.get_tool_version("acme", "save_meal", 9).await.unwrap(),
        None
    );
    let versions = s.list_tool_versions("acme", "save_meal").await.unwrap();
    assert_eq!(versions, vec![v1.clone(), v2.clone(), v3.clone()]);

    // Soft delete: no longer current, every version kept for pinned calls.
    assert!(s.delete_tool("acme", "save_meal").await.unwrap());
    assert!(!s.delete_tool("acme", "save_meal").await.unwrap());
    assert_eq!(s.get_tool("acme", "save_meal").await.unwrap(), None);
    assert!(
        s.list_tools("acme", Page::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    assert!(s.current_tools("acme").await.unwrap().is_empty());
    assert_eq!(
        s.get_tool_version("acme", "save_meal", 2).await.unwrap(),
        Some(v2)
    );
    assert_eq!(
        s.list_tool_versions("acme", "save_meal")
            .await
            .unwrap()
            .len(),
        3
    );

    // Putting it again continues the numbering.
    let v4 = s
        .put_tool("acme", &tool_def("save_meal", "one"))
        .await
        .unwrap();
    assert_eq!(v4.version, 4);
    assert_eq!(
        s.get_tool("acme", "save_meal").await.unwrap(),
        Some(v4.clone())
    );
    assert_eq!(s.current_tools("acme").await.unwrap(), vec![v4]);

    for bad in [
        json!({"description": "no name"}),
        json!({"name": "has space"}),
        json!({"name": 5}),
    ] {
        let e = s.put_tool("acme", &bad).await.unwrap_err();
        assert!(matches!(e, StoreError::Invalid(_)), "{bad}: {e:?}");
    }
    let e = s.put_tool("nope", &tool_def("x", "y")).await.unwrap_err();
    assert!(matches!(e, StoreError::NotFound(_)), "{e:?}");
}

async fn tool_list_pages_with_a_cursor(h: Harness) {
    let s = &h.store;
    tenant(s, "acme").await;
    // Put in a scrambled order; the list comes back in name order.
    let mut names: Vec<String> = (0..120)
        .map(|i| format!("tool_{:03}", (i * 7) % 120))
        .collect();
    for n in &names {
        s.put_tool("acme", &tool_def(n, "d")).await.unwrap();
    }
    names.sort();
    let mut seen = Vec::new();
    let mut page = Page::first(50);
    let mut sizes = Vec::new();
    loop {
        let got = s.list_tools("acme", page.clone()).await.unwrap();
        sizes.push(got.items.len());
        seen.extend(got.items.into_iter().map(|t| t.name));
        match got.next {
            Some(next) => page = Page::after(50, next),
            None => break,
        }
    }
    assert_eq!(sizes, vec![50, 50, 20]);
    assert_eq!(seen, names);

    // An exact multiple of the page size ends without an empty page.
    let two = s.list_tools("acme", Page::first(60)).await.unwrap();
    let rest = s
        .list_tools("acme", Page::after(60, two.next.unwrap()))
        .await
        .unwrap();
    assert_eq!(rest.items.len(), 60);
    assert_eq!(rest.next, None);

    for bad in [
        Page::first(0),
        Page::first(201),
        Page::after(10, "not a cursor!"),
    ] {
        let e = s.list_tools("acme", bad).await.unwrap_err();
        assert!(matches!(e, StoreError::Invalid(_)), "{e:?}");
    }
    assert_eq!(
        s.list_tools("acme", Page::first(200))
            .await
            .unwrap()
            .items
            .len(),
        120
    );
}

async fn agents_keep_sensitive_config_sealed_and_write_only(h: Harness) {
    let s = &h.store;
    tenant(s, "acme").await;
    const SENTINEL: &str = "sk-live-SENTINEL-7f3a";
    let def: AgentDef = serde_json::from_value(json!({
        "name": "booking",
        "instructions": "Book tables.",
        "model": "gpt-realtime",
        "tools": [
            {"tool": "crm_lookup", "config": {"region": "eu"}, "sensitive_config": {"api_key": SENTINEL}},
            {"tool": "end_call", "enabled": false}
        ],
        "handoffs": ["billing"],
        "default": true
    }))
    .unwrap();
    let agent = s.put_agent("acme", &def).await.unwrap();
    assert_eq!(agent.tools.len(), 2);
    assert!(agent.tools[0].sensitive_config_set);
    assert!(!agent.tools[1].sensitive_config_set);
    assert!(!agent.tools[1].enabled);
    assert_eq!(agent.tools[1].config, json!({}));

    let got = s.get_agent("acme", "booking").await.unwrap().unwrap();
    assert_eq!(got, agent);
    assert_eq!(got.model.as_deref(), Some("gpt-realtime"));
    assert_eq!(got.voice, None);
    assert_eq!(got.handoffs, vec!["billing".to_owned()]);
    assert!(got.default);
    // Write-only: nothing the API shows carries the value.
    let shown = serde_json::to_string(&got).unwrap();
    assert!(!shown.contains(SENTINEL), "{shown}");
    assert!(!format!("{def:?}").contains(SENTINEL));
    // Sealed at rest.
    assert_absent(&h, "agent_tools", SENTINEL).await;
    assert_absent(&h, "agent_tools", "api_key").await;

    let secrets = s
        .agent_tools_with_secrets("acme", "booking")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(secrets[0].tool, "crm_lookup");
    assert_eq!(secrets[0].config, json!({"region": "eu"}));
    assert_eq!(secrets[0].sensitive_config, json!({"api_key": SENTINEL}));
    assert_eq!(secrets[1].sensitive_config, json!({}));
    assert!(!format!("{secrets:?}").contains(SENTINEL));

    // Absent keeps the stored value; the order of tools may change.
    let keep: AgentDef = serde_json::from_value(json!({
        "name": "booking", "instructions": "Book tables politely.",
        "tools": [{"tool": "end_call"}, {"tool": "crm_lookup", "config": {"region": "us"}}]
    }))
    .unwrap();
    assert_eq!(keep.tools[1].sensitive_config, None);
    let kept = s.put_agent("acme", &keep).await.unwrap();
    assert_eq!(kept.created_at, agent.created_at);
    assert_eq!(kept.tools[0].tool, "end_call");
    assert!(kept.tools[1].sensitive_config_set);
    let secrets = s
        .agent_tools_with_secrets("acme", "booking")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(secrets[1].sensitive_config, json!({"api_key": SENTINEL}));
    assert_eq!(secrets[1].config, json!({"region": "us"}));

    // A new value replaces it.
    let replace: AgentDef = serde_json::from_value(json!({
        "name": "booking", "tools": [{"tool": "crm_lookup", "sensitive_config": {"api_key": "sk-new"}}]
    }))
    .unwrap();
    s.put_agent("acme", &replace).await.unwrap();
    let secrets = s
        .agent_tools_with_secrets("acme", "booking")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(secrets.len(), 1);
    assert_eq!(secrets[0].sensitive_config, json!({"api_key": "sk-new"}));

    // `null` clears it.
    let clear: AgentDef = serde_json::from_value(json!({
        "name": "booking", "tools": [{"tool": "crm_lookup", "sensitive_config": null}]
    }))
    .unwrap();
    assert_eq!(clear.tools[0].sensitive_config, Some(Value::Null));
    let cleared = s.put_agent("acme", &clear).await.unwrap();
    assert!(!cleared.tools[0].sensitive_config_set);
    let secrets = s
        .agent_tools_with_secrets("acme", "booking")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(secrets[0].sensitive_config, json!({}));

    // A tool dropped from the agent loses its config; adding it back starts empty.
    let drop: AgentDef = serde_json::from_value(json!({
        "name": "booking", "tools": [{"tool": "other", "sensitive_config": {"a": 1}}]
    }))
    .unwrap();
    s.put_agent("acme", &drop).await.unwrap();
    let back: AgentDef = serde_json::from_value(json!({
        "name": "booking", "tools": [{"tool": "other"}, {"tool": "crm_lookup"}]
    }))
    .unwrap();
    let back = s.put_agent("acme", &back).await.unwrap();
    assert!(back.tools[0].sensitive_config_set);
    assert!(!back.tools[1].sensitive_config_set);

    let dup: AgentDef = serde_json::from_value(json!({
        "name": "booking", "tools": [{"tool": "a"}, {"tool": "a"}]
    }))
    .unwrap();
    let e = s.put_agent("acme", &dup).await.unwrap_err();
    assert!(matches!(e, StoreError::Invalid(_)), "{e:?}");
    let bad: AgentDef = serde_json::from_value(json!({
        "name": "booking", "tools": [{"tool": "a", "sensitive_config": "plain string"}]
    }))
    .unwrap();
    let e = s.put_agent("acme", &bad).await.unwrap_err();
    assert!(matches!(e, StoreError::Invalid(_)), "{e:?}");
    let e = s
        .put_agent(
            "nope",
            &serde_json::from_value(json!({"name": "x"})).unwrap(),
        )
        .await
        .unwrap_err();
    assert!(matches!(e, StoreError::NotFound(_)), "{e:?}");

    let listed = s.list_agents("acme", Page::default()).await.unwrap();
    assert_eq!(listed.items.len(), 1);
    assert_eq!(listed.items[0].tools.len(), 2);

    assert!(s.delete_agent("acme", "booking").await.unwrap());
    assert!(!s.delete_agent("acme", "booking").await.unwrap());
    assert_eq!(s.get_agent("acme", "booking").await.unwrap(), None);
    assert_eq!(
        s.agent_tools_with_secrets("acme", "booking").await.unwrap(),
        None
    );
    assert!(raw_cells(&h, "agent_tools").await.is_empty());
}

async fn default_agent_is_unique(h: Harness) {
    let s = &h.store;
    tenant(s, "acme").await;
    assert_eq!(s.default_agent("acme").await.unwrap(), None);
    let agent = |name: &str, default: bool| -> AgentDef {
        serde_json::from_value(json!({"name": name, "default": default, "tools": [{"tool": "t"}]}))
            .unwrap()
    };
    s.put_agent("acme", &agent("a", true)).await.unwrap();
    s.put_agent("acme", &agent("b", false)).await.unwrap();
    assert_eq!(s.default_agent("acme").await.unwrap().as_deref(), Some("a"));
    s.put_agent("acme", &agent("b", true)).await.unwrap();
    assert_eq!(s.default_agent("acme").await.unwrap().as_deref(), Some("b"));
    assert!(!s.get_agent("acme", "a").await.unwrap().unwrap().default);
    // Saving the default again keeps it the default.
    s.put_agent("acme", &agent("b", true)).await.unwrap();
    assert_eq!(s.default_agent("acme").await.unwrap().as_deref(), Some("b"));

    // Pages of agents carry each agent's own tools.
    for i in 0..5 {
        let def: AgentDef = serde_json::from_value(json!({
            "name": format!("p{i}"), "tools": (0..=i).map(|j| json!({"tool": format!("t{j}")})).collect::<Vec<_>>()
        }))
        .unwrap();
        s.put_agent("acme", &def).await.unwrap();
    }
    let mut page = Page::first(2);
    let mut all = Vec::new();
    loop {
        let got = s.list_agents("acme", page).await.unwrap();
        all.extend(got.items);
        match got.next {
            Some(n) => page = Page::after(2, n),
            None => break,
        }
    }
    let summary: Vec<(String, usize)> = all
        .iter()
        .map(|a| (a.name.clone(), a.tools.len()))
        .collect();
    assert_eq!(
        summary,
        vec![
            ("a".to_owned(), 1),
            ("b".to_owned(), 1),
            ("p0".to_owned(), 1),
            ("p1".to_owned(), 2),
            ("p2".to_owned(), 3),
            ("p3".to_owned(), 4),
            ("p4".to_owned(), 5)
        ]
    );
    for a in &all {
        assert_eq!(Some(a.clone()), s.get_agent("acme", &a.name).await.unwrap());
    }
}

async fn secrets_are_sealed_and_listed_by_name(h: Harness) {
    let s = &h.store;
    tenant(s, "acme").await;
    const SENTINEL: &str = "sk-proj-SENTINEL-secret-value";
    s.put_secret("acme", "openai_api_key", &SecretString::from(SENTINEL))
        .await
        .unwrap();
    s.put_secret("acme", "webhook.secret", &SecretString::from("whsec_abc"))
        .await
        .unwrap();
    let names = s.secret_names("acme").await.unwrap();
    assert_eq!(
        names.iter().map(|n| n.name.as_str()).collect::<Vec<_>>(),
        vec!["openai_api_key", "webhook.secret"]
    );
    assert!(!serde_json::to_string(&names).unwrap().contains(SENTINEL));
    assert_absent(&h, "secrets", SENTINEL).await;
    assert_absent(&h, "secrets", "whsec_abc").await;

    let got = s
        .get_secret("acme", "openai_api_key")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got.expose_secret(), SENTINEL);
    assert!(!format!("{got:?}").contains(SENTINEL));

    // Replacing keeps one row with the new value.
    s.put_secret("acme", "openai_api_key", &SecretString::from("sk-second"))
        .await
        .unwrap();
    let got = s
        .get_secret("acme", "openai_api_key")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got.expose_secret(), "sk-second");
    assert_eq!(s.secret_names("acme").await.unwrap().len(), 2);

    assert!(s.delete_secret("acme", "openai_api_key").await.unwrap());
    assert!(!s.delete_secret("acme", "openai_api_key").await.unwrap());
    assert!(
        s.get_secret("acme", "openai_api_key")
            .await
            .unwrap()
            .is_none()
    );

    let e = s
        .put_secret("acme", "bad name", &SecretString::from("x"))
        .await
        .unwrap_err();
    assert!(matches!(e, StoreError::Invalid(_)), "{e:?}");
    let e = s
        .put_secret("nope", "k", &SecretString::from("value-in-error?"))
        .await
        .unwrap_err();
    assert!(matches!(e, StoreError::NotFound(_)), "{e:?}");
    assert!(!e.to_string().contains("value-in-error?"), "{e}");
}

async fn mcp_servers_are_sealed_and_shown_without_secrets(h: Harness) {
    let s = &h.store;
    tenant(s, "acme").await;
    tenant(s, "globex").await;
    let config = McpServerConfig::Http {
        url: "https://mcp.example.com/mcp?token=tok-SENTINEL-url".to_owned(),
        headers: [(
            "Authorization".to_owned(),
            "Bearer tok-SENTINEL-header".to_owned(),
        )]
        .into(),
    };
    let shown = s.put_mcp_server("acme", "crm", &config).await.unwrap();
    assert_eq!(
        (
            shown.transport.as_str(),
            shown.endpoint.as_str(),
            shown.header_names.clone(),
            shown.revision,
            shown.tools.clone()
        ),
        (
            "http",
            "https://mcp.example.com",
            vec!["Authorization".to_owned()],
            1,
            None
        )
    );
    assert_absent(&h, "mcp_servers", "tok-SENTINEL-url").await;
    assert_absent(&h, "mcp_servers", "tok-SENTINEL-header").await;
    assert!(!format!("{config:?}").contains("SENTINEL"));
    let (opened, revision) = s.mcp_server_config("acme", "crm").await.unwrap().unwrap();
    assert_eq!((opened, revision), (config.clone(), 1));

    // The tool list is kept for the revision it was listed at; a change of the server drops it.
    let tools = json!([{"name": "lookup", "input_schema": {"type": "object"}, "read_only": true}]);
    s.set_mcp_server_tools("acme", "crm", 1, &tools)
        .await
        .unwrap();
    assert_eq!(
        s.get_mcp_server("acme", "crm")
            .await
            .unwrap()
            .unwrap()
            .tools,
        Some(tools.clone())
    );
    let again = s.put_mcp_server("acme", "crm", &config).await.unwrap();
    assert_eq!((again.revision, again.tools), (2, None));
    s.set_mcp_server_tools("acme", "crm", 1, &tools)
        .await
        .unwrap();
    assert_eq!(
        s.get_mcp_server("acme", "crm")
            .await
            .unwrap()
            .unwrap()
            .tools,
        None,
        "a stale revision's list is not kept"
    );

    let stdio = McpServerConfig::Stdio {
        command: "mcp-files".to_owned(),
        args: vec![],
        env: [("TOKEN".to_owned(), "x".to_owned())].into(),
    };
    s.put_mcp_server("acme", "files", &stdio).await.unwrap();
    let page = s.list_mcp_servers("acme", Page::first(1)).await.unwrap();
    assert_eq!(page.items[0].label, "crm");
    let page = s
        .list_mcp_servers(
            "acme",
            Page {
                limit: 1,
                after: page.next,
            },
        )
        .await
        .unwrap();
    assert_eq!(
        (
            page.items[0].label.as_str(),
            page.items[0].header_names.clone(),
            page.next
        ),
        ("files", vec!["TOKEN".to_owned()], None)
    );

    // Another tenant sees nothing; a bad label is refused.
    assert!(s.get_mcp_server("globex", "crm").await.unwrap().is_none());
    assert!(
        s.mcp_server_config("globex", "crm")
            .await
            .unwrap()
            .is_none()
    );
    assert!(!s.delete_mcp_server("globex", "crm").await.unwrap());
    let e = s
        .put_mcp_server("acme", "no/slash", &config)
        .await
        .unwrap_err();
    assert!(matches!(e, StoreError::Invalid(_)), "{e:?}");
    assert!(s.delete_mcp_server("acme", "crm").await.unwrap());
    assert!(s.get_mcp_server("acme", "crm").await.unwrap().is_none());
}

async fn tenants_are_isolated(h: Harness) {
    let s = &h.store;
    tenant(s, "a").await;
    tenant(s, "b").await;
    let (key, _) = s.create_api_key(Some("a"), "k").await.unwrap();
    s.put_tool("a", &tool_def("save_meal", "a's"))
        .await
        .unwrap();
    s.put_secret("a", "openai", &SecretString::from("sk-a"))
        .await
        .unwrap();
    let def: AgentDef = serde_json::from_value(json!({
        "name": "booking", "default": true, "tools": [{"tool": "save_meal", "sensitive_config": {"k": 1}}]
    }))
    .unwrap();
    s.put_agent("a", &def).await.unwrap();
    let info = call_info("a", "call_a");
    let ctx = Context::new(&info, json!({}));
    s.create_call("a", &info, &json!({"save_meal": 1}), &ctx)
        .await
        .unwrap();
    s.journal_append(
        "a",
        "call_a",
        JournalEntry::Finished {
            record: Box::new(record("fc_1", true)),
            context: None,
            handoffs: 0,
        },
    )
    .await
    .unwrap();

    // Every getter with the other tenant's id finds nothing.
    let b = "b";
    assert_eq!(s.get_tool(b, "save_meal").await.unwrap(), None);
    assert_eq!(s.get_tool_version(b, "save_meal", 1).await.unwrap(), None);
    assert!(
        s.list_tools(b, Page::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    assert!(s.current_tools(b).await.unwrap().is_empty());
    assert!(
        s.list_tool_versions(b, "save_meal")
            .await
            .unwrap()
            .is_empty()
    );
    assert!(!s.delete_tool(b, "save_meal").await.unwrap());
    assert_eq!(s.get_agent(b, "booking").await.unwrap(), None);
    assert_eq!(
        s.agent_tools_with_secrets(b, "booking").await.unwrap(),
        None
    );
    assert!(
        s.list_agents(b, Page::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    assert_eq!(s.default_agent(b).await.unwrap(), None);
    assert!(!s.delete_agent(b, "booking").await.unwrap());
    assert!(s.get_secret(b, "openai").await.unwrap().is_none());
    assert!(s.secret_names(b).await.unwrap().is_empty());
    assert!(!s.delete_secret(b, "openai").await.unwrap());
    assert!(s.list_api_keys(Some(b)).await.unwrap().is_empty());
    assert!(!s.revoke_api_key(Some(b), &key.id).await.unwrap());
    assert_eq!(s.get_call(b, "call_a").await.unwrap(), None);
    assert!(
        s.list_calls(b, Page::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    assert!(s.invocations(b, "call_a").await.unwrap().is_empty());
    let e = s
        .update_call_context(b, "call_a", |_c| Ok::<(), std::io::Error>(()))
        .await
        .unwrap_err();
    assert!(matches!(e, StoreError::NotFound(_)), "{e:?}");
    // Nor are another tenant's calls: `b`'s journal does not see `a`'s call.
    assert_eq!(s.journal_load(b, "call_a").await.unwrap(), None);
    assert_eq!(s.call_context(b, "call_a").await.unwrap(), None);
    assert_eq!(s.invocation(b, "call_a", "fc_1").await.unwrap(), None);
    // `b` may use the same call id: it gets a call of its own, and `a`'s is untouched.
    let own = call_info("b", "call_a");
    let own_ctx = Context::new(&own, json!({"id": "b-user"}));
    s.create_call("b", &own, &json!({}), &own_ctx)
        .await
        .unwrap();
    s.journal_append(
        b,
        "call_a",
        JournalEntry::Started {
            call: own.clone(),
            context: own_ctx.clone(),
        },
    )
    .await
    .unwrap();
    s.journal_append(b, "call_a", JournalEntry::Ended)
        .await
        .unwrap();
    assert_eq!(
        s.get_call(b, "call_a").await.unwrap().unwrap().context,
        own_ctx
    );
    assert!(s.invocations(b, "call_a").await.unwrap().is_empty());
    // A journal entry naming another tenant than its journal's is refused.
    let e = s
        .journal_append(
            "a",
            "call_a",
            JournalEntry::Started {
                call: own.clone(),
                context: own_ctx.clone(),
            },
        )
        .await
        .unwrap_err();
    assert!(matches!(e, StoreError::Invalid(_)), "{e:?}");
    let e = s
        .create_call("b", &info, &json!({}), &ctx)
        .await
        .unwrap_err();
    assert!(
        matches!(e, StoreError::Invalid(_)),
        "a call naming tenant a, created for b: {e:?}"
    );

    // And `a` still has everything.
    assert!(s.get_tool("a", "save_meal").await.unwrap().is_some());
    assert!(s.get_agent("a", "booking").await.unwrap().is_some());
    assert!(s.get_secret("a", "openai").await.unwrap().is_some());
    assert_eq!(
        s.list_api_keys(Some("a")).await.unwrap()[0].revoked_at,
        None
    );
    let call = s.get_call("a", "call_a").await.unwrap().unwrap();
    assert_eq!(call.tenant_id, "a");
    assert_eq!(call.status, CallStatus::Active);
    assert_eq!(call.context, ctx);
    assert_eq!(call.pinned, json!({"save_meal": 1}));
    assert_eq!(s.invocations("a", "call_a").await.unwrap().len(), 1);
}

async fn journal_round_trip_equals_the_in_memory_fold(h: Harness) {
    let s = &h.store;
    tenant(s, "acme").await;
    let info = call_info("acme", "rtc_1");
    let start = Context::new(&info, json!({"auth_token": "SENTINEL-CONTEXT-TOKEN"}));
    let mut changed = start.clone();
    changed.apply(&append_item(1)).unwrap();
    changed.set_active_agent("billing");
    let entries = vec![
        JournalEntry::Started {
            call: info.clone(),
            context: start.clone(),
        },
        JournalEntry::Checkpoint {
            function_call_id: "fc_1".into(),
            checkpoint: Box::new(checkpoint("rtc_1", "fc_1")),
        },
        JournalEntry::Checkpoint {
            function_call_id: "fc_2".into(),
            checkpoint: Box::new(checkpoint("rtc_1", "fc_2")),
        },
        JournalEntry::Finished {
            record: Box::new(record("fc_1", true)),
            context: Some(changed.clone()),
            handoffs: 1,
        },
        JournalEntry::Finished {
            record: Box::new(record("fc_3", false)),
            context: None,
            handoffs: 1,
        },
    ];
    let journal: Arc<dyn CallJournal> = Arc::new(s.journal("acme"));
    let mut folded = CallState::default();
    for e in entries {
        folded.apply(e.clone());
        journal.append("rtc_1", e).await.unwrap();
    }
    let loaded = journal.load("rtc_1").await.unwrap().unwrap();
    assert_eq!(loaded, folded);
    assert_eq!(
        loaded.checkpoints.len(),
        1,
        "fc_2 still waits at its effect"
    );
    assert_eq!(loaded.context.as_ref(), Some(&changed));
    assert_eq!(journal.load("rtc_unknown").await.unwrap(), None);

    // The checkpoint's run may hold credentials: it is sealed at rest.
    assert_absent(&h, "call_checkpoints", "SENTINEL-CHECKPOINT-TOKEN").await;
    // The context holds the user's tokens: it is sealed at rest too.
    assert_absent(&h, "calls", "SENTINEL-CONTEXT-TOKEN").await;
    assert_absent(&h, "calls", "auth_token").await;

    let row = s.get_call("acme", "rtc_1").await.unwrap().unwrap();
    assert_eq!(row.status, CallStatus::Active);
    assert_eq!(row.agent, "billing");
    assert_eq!(row.context, changed);
    assert_eq!(row.handoffs, 1);
    assert_eq!(row.version, 1, "one context write after Started");
    assert_eq!(
        s.invocations("acme", "rtc_1").await.unwrap(),
        loaded.records
    );

    folded.apply(JournalEntry::Ended);
    journal.append("rtc_1", JournalEntry::Ended).await.unwrap();
    let loaded = journal.load("rtc_1").await.unwrap().unwrap();
    assert_eq!(loaded, folded);
    assert!(loaded.ended && loaded.checkpoints.is_empty());
    let row = s.get_call("acme", "rtc_1").await.unwrap().unwrap();
    assert_eq!(row.status, CallStatus::Ended);
    assert!(row.ended_at.is_some());

    // Entries for a call that never started are errors, not silently dropped.
    let e = journal
        .append(
            "rtc_nope",
            JournalEntry::Finished {
                record: Box::new(record("fc_1", true)),
                context: None,
                handoffs: 0,
            },
        )
        .await
        .unwrap_err();
    assert!(e.to_string().contains("rtc_nope"), "{e}");
    assert!(
        journal
            .append("rtc_nope", JournalEntry::Ended)
            .await
            .is_err()
    );
}

async fn journal_appends_are_idempotent_and_ended_clears_checkpoints(h: Harness) {
    let s = &h.store;
    tenant(s, "acme").await;
    let info = call_info("acme", "rtc_2");
    let ctx = Context::new(&info, json!({}));
    s.journal_append(
        "acme",
        "rtc_2",
        JournalEntry::Started {
            call: info.clone(),
            context: ctx.clone(),
        },
    )
    .await
    .unwrap();
    let mut first = ctx.clone();
    first.apply(&append_item(1)).unwrap();
    let finished = |c: Option<Context>| JournalEntry::Finished {
        record: Box::new(record("fc_1", true)),
        context: c,
        handoffs: 0,
    };
    s.journal_append("acme", "rtc_2", finished(Some(first.clone())))
        .await
        .unwrap();
    // A retried append of the same function call changes nothing, not even the context.
    let mut other = ctx.clone();
    other.apply(&append_item(99)).unwrap();
    s.journal_append("acme", "rtc_2", finished(Some(other)))
        .await
        .unwrap();
    let state = s.journal_load("acme", "rtc_2").await.unwrap().unwrap();
    assert_eq!(state.records.len(), 1);
    assert_eq!(state.context, Some(first));
    assert_eq!(
        s.get_call("acme", "rtc_2").await.unwrap().unwrap().version,
        1
    );

    // A checkpoint is replaced by a later one of the same function call.
    let mut cp = checkpoint("rtc_2", "fc_9");
    s.journal_append(
        "acme",
        "rtc_2",
        JournalEntry::Checkpoint {
            function_call_id: "fc_9".into(),
            checkpoint: Box::new(cp.clone()),
        },
    )
    .await
    .unwrap();
    cp.suspended = json!({"pc": 4});
    s.journal_append(
        "acme",
        "rtc_2",
        JournalEntry::Checkpoint {
            function_call_id: "fc_9".into(),
            checkpoint: Box::new(cp.clone()),
        },
    )
    .await
    .unwrap();
    let state = s.journal_load("acme", "rtc_2").await.unwrap().unwrap();
    assert_eq!(state.checkpoints.get("fc_9"), Some(&cp));

    s.journal_append("acme", "rtc_2", JournalEntry::Ended)
        .await
        .unwrap();
    let ended_at = s.get_call("acme", "rtc_2").await.unwrap().unwrap().ended_at;
    s.journal_append("acme", "rtc_2", JournalEntry::Ended)
        .await
        .unwrap();
    let state = s.journal_load("acme", "rtc_2").await.unwrap().unwrap();
    assert!(state.ended);
    assert!(state.checkpoints.is_empty());
    assert!(raw_cells(&h, "call_checkpoints").await.is_empty());
    assert_eq!(
        s.get_call("acme", "rtc_2").await.unwrap().unwrap().ended_at,
        ended_at,
        "the first end time stays"
    );
}

async fn create_call_then_started_keeps_pinned_versions(h: Harness) {
    let s = &h.store;
    tenant(s, "acme").await;
    let info = call_info("acme", "rtc_3");
    let ctx = Context::new(&info, json!({"auth_token": "t"}));
    let pinned = json!({"save_meal": 3, "request_transfer": 1});
    let row = s.create_call("acme", &info, &pinned, &ctx).await.unwrap();
    assert_eq!(row.version, 0);
    assert_eq!(row.status, CallStatus::Active);
    assert_eq!(
        s.get_call("acme", "rtc_3").await.unwrap(),
        Some(row.clone())
    );
    let e = s
        .create_call("acme", &info, &pinned, &ctx)
        .await
        .unwrap_err();
    assert!(matches!(e, StoreError::Conflict(_)), "{e:?}");

    s.journal_append(
        "acme",
        "rtc_3",
        JournalEntry::Started {
            call: info.clone(),
            context: ctx.clone(),
        },
    )
    .await
    .unwrap();
    let after = s.get_call("acme", "rtc_3").await.unwrap().unwrap();
    assert_eq!(after.pinned, pinned);
    assert_eq!(after.context, ctx);
    let state = s.journal_load("acme", "rtc_3").await.unwrap().unwrap();
    assert_eq!(state.call, Some(info));
}

async fn concurrent_context_updates_all_land(h: Harness) {
    let s = &h.store;
    tenant(s, "acme").await;
    let info = call_info("acme", "rtc_busy");
    s.create_call("acme", &info, &json!({}), &Context::new(&info, json!({})))
        .await
        .unwrap();
    // Two stores on one database stand for two nodes; 50 tasks, each on its own connection.
    let options = StoreOptions {
        max_connections: 25,
        ..StoreOptions::default()
    };
    let mut nodes = Vec::new();
    for _ in 0..2 {
        nodes.push(
            Store::connect_with(&h.url, h.key.clone(), options.clone())
                .await
                .unwrap(),
        );
    }
    let gate = Arc::new(tokio::sync::Barrier::new(50));
    let mut tasks = Vec::new();
    for i in 0..50 {
        let node = nodes[i % 2].clone();
        let gate = gate.clone();
        tasks.push(tokio::spawn(async move {
            gate.wait().await;
            node.update_call_context("acme", "rtc_busy", |c| c.apply(&append_item(i)))
                .await
        }));
    }
    for t in tasks {
        t.await.unwrap().unwrap();
    }
    let row = s.get_call("acme", "rtc_busy").await.unwrap().unwrap();
    let items: BTreeSet<u64> = row.context.workflow["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    assert_eq!(items, (0..50).collect::<BTreeSet<u64>>());
    assert_eq!(row.context.workflow["items"].as_array().unwrap().len(), 50);
    assert_eq!(row.version, 50);
    for n in nodes {
        n.close().await;
    }
}

async fn update_call_context_refusals(h: Harness) {
    let s = &h.store;
    tenant(s, "acme").await;
    let info = call_info("acme", "rtc_4");
    s.create_call("acme", &info, &json!({}), &Context::new(&info, json!({})))
        .await
        .unwrap();
    let ctx = s
        .update_call_context("acme", "rtc_4", |c| {
            c.apply(&Write::Set {
                scope: Scope::Workflow,
                keys: vec!["x".into()].into(),
                value: json!("text"),
            })
        })
        .await
        .unwrap();
    assert_eq!(ctx.workflow["x"], json!("text"));

    // A write the context refuses changes nothing.
    let e = s
        .update_call_context("acme", "rtc_4", |c| {
            c.apply(&Write::Set {
                scope: Scope::Workflow,
                keys: vec!["y".into()].into(),
                value: json!(1),
            })?;
            c.apply(&Write::Append {
                scope: Scope::Workflow,
                keys: vec!["x".into()].into(),
                value: json!(1),
            })
        })
        .await
        .unwrap_err();
    let StoreError::Rejected(inner) = &e else {
        panic!("expected Rejected, got {e:?}");
    };
    assert!(inner.to_string().contains("not a list"), "{inner}");
    let row = s.get_call("acme", "rtc_4").await.unwrap().unwrap();
    assert_eq!(row.version, 1);
    assert_eq!(row.context.workflow.get("y"), None);

    let e = s
        .update_call_context("acme", "rtc_nope", |_c| Ok::<(), std::io::Error>(()))
        .await
        .unwrap_err();
    assert!(matches!(e, StoreError::NotFound(_)), "{e:?}");

    s.journal_append("acme", "rtc_4", JournalEntry::Ended)
        .await
        .unwrap();
    let e = s
        .update_call_context("acme", "rtc_4", |_c| Ok::<(), std::io::Error>(()))
        .await
        .unwrap_err();
    assert!(matches!(e, StoreError::Conflict(_)), "{e:?}");
}

async fn calls_list_newest_first_with_a_cursor(h: Harness) {
    let s = &h.store;
    tenant(s, "acme").await;
    let mut ids = Vec::new();
    for i in 0..7 {
        let info = call_info("acme", &format!("call_{i}"));
        s.create_call("acme", &info, &json!({}), &Context::new(&info, json!({})))
            .await
            .unwrap();
        ids.push(info.id);
    }
    let mut page = Page::first(3);
    let mut seen = Vec::new();
    loop {
        let got = s.list_calls("acme", page).await.unwrap();
        seen.extend(got.items.into_iter().map(|c| (c.created_at, c.id)));
        match got.next {
            Some(n) => page = Page::after(3, n),
            None => break,
        }
    }
    assert_eq!(seen.len(), 7);
    let mut expected = seen.clone();
    expected.sort_by(|a, b| b.cmp(a));
    assert_eq!(seen, expected, "newest first, ties by id");
    let got: BTreeSet<String> = seen.into_iter().map(|(_, id)| id).collect();
    assert_eq!(got, ids.into_iter().collect::<BTreeSet<_>>());
}

async fn a_wrong_master_key_fails_with_crypto(h: Harness) {
    let s = &h.store;
    tenant(s, "acme").await;
    s.put_secret("acme", "openai", &SecretString::from("sk-1"))
        .await
        .unwrap();
    let def: AgentDef = serde_json::from_value(json!({
        "name": "booking", "tools": [{"tool": "t", "sensitive_config": {"k": "v"}}]
    }))
    .unwrap();
    s.put_agent("acme", &def).await.unwrap();
    let wrong = Store::connect(&h.url, MasterKey::generate()).await.unwrap();
    let e = wrong.get_secret("acme", "openai").await.unwrap_err();
    assert!(matches!(e, StoreError::Crypto), "{e:?}");
    assert!(e.to_string().contains("SWITCHBOARD_MASTER_KEY"), "{e}");
    let e = wrong
        .agent_tools_with_secrets("acme", "booking")
        .await
        .unwrap_err();
    assert!(matches!(e, StoreError::Crypto), "{e:?}");
    // What does not need the key still works.
    assert_eq!(wrong.secret_names("acme").await.unwrap().len(), 1);
    assert!(wrong.get_agent("acme", "booking").await.unwrap().is_some());
    wrong.close().await;
}

// ---------------------------------------------------------------------------------------------
// Backend-independent tests
// ---------------------------------------------------------------------------------------------

#[test]
fn master_key_load_or_create_makes_a_private_file_and_reuses_it() {
    let dir = std::env::temp_dir().join(format!("sb-key-test-{}", unique()));
    let path = dir.join("nested").join("master.key");
    let (key, created) = MasterKey::load_or_create(None, &path).unwrap();
    assert_eq!(created.as_deref(), Some(path.as_path()));
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    let (again, created) = MasterKey::load_or_create(None, &path).unwrap();
    assert_eq!(created, None);
    let sealed = switchboard_store::seal(&key, b"x").unwrap();
    assert_eq!(switchboard_store::open(&again, &sealed).unwrap(), b"x");

    // The environment wins over the file, and an empty variable counts as unset.
    let env_key = MasterKey::generate();
    let env_text = env_key.to_base64();
    let (from_env, created) =
        MasterKey::load_or_create(Some(env_text.expose_secret()), &path).unwrap();
    assert_eq!(created, None);
    let sealed = switchboard_store::seal(&env_key, b"y").unwrap();
    assert_eq!(switchboard_store::open(&from_env, &sealed).unwrap(), b"y");
    assert!(matches!(
        switchboard_store::open(&key, &sealed),
        Err(StoreError::Crypto)
    ));
    let (blank, _) = MasterKey::load_or_create(Some("  "), &path).unwrap();
    let sealed = switchboard_store::seal(&key, b"z").unwrap();
    assert_eq!(switchboard_store::open(&blank, &sealed).unwrap(), b"z");

    // A bad key is an error naming the fix, not a new key.
    let e = MasterKey::load_or_create(Some("dG9vIHNob3J0"), &path).unwrap_err();
    assert!(matches!(e, StoreError::Invalid(_)), "{e:?}");
    std::fs::write(&path, "garbage\n").unwrap();
    assert!(MasterKey::load_or_create(None, &path).is_err());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn open_with_a_wrong_key_is_a_crypto_error() {
    let sealed = switchboard_store::seal(&MasterKey::generate(), b"secret").unwrap();
    let e = switchboard_store::open(&MasterKey::generate(), &sealed).unwrap_err();
    assert!(matches!(e, StoreError::Crypto), "{e:?}");
}

#[test]
fn agent_def_tells_absent_from_null_sensitive_config() {
    let def: AgentDef = serde_json::from_value(json!({
        "name": "a",
        "tools": [
            {"tool": "absent"},
            {"tool": "null", "sensitive_config": null},
            {"tool": "set", "sensitive_config": {"k": "v"}, "enabled": false}
        ]
    }))
    .unwrap();
    assert_eq!(def.tools[0].sensitive_config, None);
    assert!(def.tools[0].enabled);
    assert_eq!(def.tools[0].config, json!({}));
    assert_eq!(def.tools[1].sensitive_config, Some(Value::Null));
    assert_eq!(def.tools[2].sensitive_config, Some(json!({"k": "v"})));
    assert!(!def.tools[2].enabled);
    assert!(def.handoffs.is_empty() && !def.default && def.instructions.is_empty());
}

#[tokio::test]
async fn sqlite_urls_and_paths_create_the_file() {
    let dir = std::env::temp_dir().join(format!("sb-url-test-{}", unique()));
    std::fs::create_dir_all(&dir).unwrap();
    let plain = dir.join("plain.db");
    let s = Store::connect(plain.to_str().unwrap(), MasterKey::generate())
        .await
        .unwrap();
    s.migrate().await.unwrap();
    assert!(plain.exists());
    s.close().await;
    let url = format!("sqlite://{}", dir.join("url.db").display());
    let s = Store::connect(&url, MasterKey::generate()).await.unwrap();
    s.migrate().await.unwrap();
    assert_eq!(s.backend(), Backend::Sqlite);
    s.close().await;
    assert!(dir.join("url.db").exists());
    let _ = std::fs::remove_dir_all(&dir);
}

/// Rows written before contexts were sealed hold plain JSON: they are read as they are, and
/// `migrate` seals them.
async fn plain_contexts_from_before_sealing_are_read_then_sealed(h: Harness) {
    let s = &h.store;
    tenant(s, "acme").await;
    let info = call_info("acme", "old_call");
    let ctx = Context::new(&info, json!({"auth_token": "SENTINEL-OLD-TOKEN"}));
    s.create_call("acme", &info, &json!({}), &ctx)
        .await
        .unwrap();
    let plain = serde_json::to_string(&ctx).unwrap();
    let sql = "UPDATE calls SET context = $1 WHERE id = 'old_call'";
    match h.backend {
        Backend::Sqlite => {
            let mut conn = sqlx::SqliteConnection::connect(&format!("sqlite://{}", h.url))
                .await
                .unwrap();
            sqlx::query(sql)
                .bind(&plain)
                .execute(&mut conn)
                .await
                .unwrap();
        }
        Backend::Postgres => {
            let mut conn = sqlx::PgConnection::connect(&h.url).await.unwrap();
            sqlx::query(sql)
                .bind(&plain)
                .execute(&mut conn)
                .await
                .unwrap();
        }
    }
    let cells = raw_cells(&h, "calls").await;
    assert!(cells.iter().any(|c| contains(c, b"SENTINEL-OLD-TOKEN")));
    assert_eq!(
        s.get_call("acme", "old_call")
            .await
            .unwrap()
            .unwrap()
            .context,
        ctx
    );
    s.migrate().await.unwrap();
    assert_absent(&h, "calls", "SENTINEL-OLD-TOKEN").await;
    assert_eq!(
        s.get_call("acme", "old_call")
            .await
            .unwrap()
            .unwrap()
            .context,
        ctx
    );
    assert_eq!(
        s.seal_call_contexts().await.unwrap(),
        0,
        "nothing left to seal"
    );
    // A sealed context is bound to its row: copied to another call, it does not open.
    let other = call_info("acme", "other_call");
    s.create_call("acme", &other, &json!({}), &Context::new(&other, json!({})))
        .await
        .unwrap();
    let copy = "UPDATE calls SET context = (SELECT context FROM calls WHERE id = 'old_call') WHERE id = 'other_call'";
    match h.backend {
        Backend::Sqlite => {
            let mut conn = sqlx::SqliteConnection::connect(&format!("sqlite://{}", h.url))
                .await
                .unwrap();
            sqlx::query(copy).execute(&mut conn).await.unwrap();
        }
        Backend::Postgres => {
            let mut conn = sqlx::PgConnection::connect(&h.url).await.unwrap();
            sqlx::query(copy).execute(&mut conn).await.unwrap();
        }
    }
    let e = s.get_call("acme", "other_call").await.unwrap_err();
    assert!(matches!(e, StoreError::Crypto), "{e:?}");
}

async fn a_call_has_one_owner_and_a_stale_owner_is_fenced_off(h: Harness) {
    use std::time::Duration;
    use switchboard_runtime::journal::JournalError;
    use switchboard_store::Door;
    let s = &h.store;
    tenant(s, "acme").await;
    let info = call_info("acme", "c1");
    let ctx = Context::new(&info, json!({}));
    s.register_node("n1", Some("http://10.0.0.1:8080"), Duration::from_secs(60))
        .await
        .unwrap();
    s.create_call_within("acme", &info, &json!({}), &ctx, 10, ("n1", Door::Http))
        .await
        .unwrap()
        .unwrap();
    let owner = s.call_owner("acme", "c1").await.unwrap().unwrap();
    let node = owner.node.clone().unwrap();
    assert_eq!((node.id.as_str(), node.alive, owner.fence), ("n1", true, 1));
    assert!(!owner.orphaned());
    assert!(s.orphaned_calls(Door::Http, 10).await.unwrap().is_empty());

    // n1's journal claims a function call: once.
    let n1 = s.journal("acme").fenced(1);
    let inv = |fc: &str| Invocation {
        call_id: "c1".into(),
        function_call_id: fc.into(),
        name: "save_meal".into(),
        arguments_json: "{}".into(),
        response_id: None,
        item_id: None,
    };
    assert_eq!(n1.claim("c1", &inv("fc_1")).await.unwrap(), Claim::Claimed);
    assert_eq!(n1.claim("c1", &inv("fc_1")).await.unwrap(), Claim::Taken);

    // A new process at n1's address: n1 is dead, its call an orphan; n2 takes it over, once.
    s.register_node("n2", Some("http://10.0.0.1:8080"), Duration::from_secs(60))
        .await
        .unwrap();
    let owner = s.call_owner("acme", "c1").await.unwrap().unwrap();
    assert!(owner.orphaned(), "{owner:?}");
    assert_eq!(s.orphaned_calls(Door::Http, 10).await.unwrap().len(), 1);
    assert_eq!(
        s.take_over_call("acme", "c1", "n2", 1).await.unwrap(),
        Some(2)
    );
    assert_eq!(s.take_over_call("acme", "c1", "n3", 1).await.unwrap(), None);

    // n1 wakes up: every write it tries is refused, nothing stored.
    let fenced = |r: Result<(), JournalError>| matches!(r, Err(JournalError::Fenced(_)));
    assert!(matches!(
        n1.claim("c1", &inv("fc_2")).await,
        Err(JournalError::Fenced(_))
    ));
    let finished = JournalEntry::Finished {
        record: Box::new(record("fc_1", true)),
        context: None,
        handoffs: 0,
    };
    assert!(fenced(n1.append("c1", finished.clone()).await));
    assert!(fenced(n1.append("c1", JournalEntry::Ended).await));

    // The new owner finds n1's claimed run, which never reached an effect, and runs it.
    let n2 = s.journal("acme").fenced(2);
    let state = n2.load("c1").await.unwrap().unwrap();
    assert_eq!(state.claimed.keys().collect::<Vec<_>>(), ["fc_1"]);
    assert_eq!(state.claimed["fc_1"], inv("fc_1"));
    assert!(state.records.is_empty() && !state.ended);
    let mut after = ctx.clone();
    after.apply(&append_item(1)).unwrap();
    let finished = JournalEntry::Finished {
        record: Box::new(record("fc_1", true)),
        context: Some(after),
        handoffs: 0,
    };
    n2.append("c1", finished).await.unwrap();
    let state = n2.load("c1").await.unwrap().unwrap();
    assert_eq!(state.context.unwrap().workflow["items"], json!([1]));
    assert!(state.claimed.is_empty(), "the record replaces the claim");
    // Recorded: not claimed again.
    assert_eq!(n2.claim("c1", &inv("fc_1")).await.unwrap(), Claim::Taken);
    n2.append("c1", JournalEntry::Ended).await.unwrap();
    assert!(s.orphaned_calls(Door::Http, 10).await.unwrap().is_empty());
    s.retire_node("n2").await.unwrap();
}

/// Many calls' claims and finishes at once (on SQLite, written in groups by one thread): each
/// is answered once, every record lands with the context it changed, no claim is left over,
/// and a finish of a node fenced off, sent among the others, is refused with nothing stored.
async fn concurrent_claims_and_finishes_each_land_once_and_a_fenced_one_is_refused(h: Harness) {
    use std::time::Duration;
    use switchboard_runtime::journal::JournalError;
    use switchboard_store::Door;
    let s = &h.store;
    tenant(s, "acme").await;
    s.register_node("n1", None, Duration::from_secs(60))
        .await
        .unwrap();
    for c in 0..8 {
        let info = call_info("acme", &format!("c{c}"));
        let ctx = Context::new(&info, json!({}));
        s.create_call_within("acme", &info, &json!({}), &ctx, 10, ("n1", Door::Http))
            .await
            .unwrap()
            .unwrap();
    }
    // c7 changes owner: its fence 1 is stale.
    s.register_node("n2", None, Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!(
        s.take_over_call("acme", "c7", "n2", 1).await.unwrap(),
        Some(2)
    );
    let journal = s.journal("acme").fenced(1);
    let mut runs = tokio::task::JoinSet::new();
    for c in 0..8 {
        for i in 0..25 {
            let journal = journal.clone();
            runs.spawn(async move {
                let call = format!("c{c}");
                let fc = format!("fc_{i}");
                let inv = Invocation {
                    call_id: call.clone(),
                    function_call_id: fc.clone(),
                    name: "save_meal".into(),
                    arguments_json: "{}".into(),
                    response_id: None,
                    item_id: None,
                };
                let claimed = journal.claim(&call, &inv).await;
                let mut ctx = Context::new(&call_info("acme", &call), json!({}));
                ctx.workflow = std::sync::Arc::new(json!({ "last": i }));
                let finished = journal
                    .append(
                        &call,
                        JournalEntry::Finished {
                            record: Box::new(record(&fc, true)),
                            context: Some(ctx),
                            handoffs: 0,
                        },
                    )
                    .await;
                (c, claimed, finished)
            });
        }
    }
    while let Some(run) = runs.join_next().await {
        let (c, claimed, finished) = run.unwrap();
        if c == 7 {
            assert!(
                matches!(claimed, Err(JournalError::Fenced(_))),
                "{claimed:?}"
            );
            assert!(
                matches!(finished, Err(JournalError::Fenced(_))),
                "{finished:?}"
            );
        } else {
            assert_eq!(claimed.unwrap(), Claim::Claimed);
            finished.unwrap();
        }
    }
    for c in 0..7 {
        let state = journal.load(&format!("c{c}")).await.unwrap().unwrap();
        assert_eq!(state.records.len(), 25, "c{c}: every finish recorded once");
        assert!(
            state.claimed.is_empty(),
            "c{c}: the records settled the claims"
        );
        let ctx = state.context.expect("a started call has a context");
        assert!(ctx.workflow["last"].is_u64(), "c{c}: {:?}", ctx.workflow);
    }
    let n2 = s.journal("acme").fenced(2);
    let state = n2.load("c7").await.unwrap().unwrap();
    assert!(
        state.records.is_empty() && state.claimed.is_empty(),
        "the stale node stored nothing"
    );
    assert_eq!(*state.context.expect("c7's context").workflow, json!({}));
}

#[path = "store/memory.rs"]
mod memory;

/// A claim that waits while its function call's finish commits (another path recording the
/// same function call) must see that record: `Taken`, never a second run.
async fn a_claim_racing_its_function_calls_finish_is_taken(h: Harness) {
    use std::time::Duration;
    use switchboard_store::Door;
    let s = &h.store;
    tenant(s, "acme").await;
    let info = call_info("acme", "c1");
    let ctx = Context::new(&info, json!({}));
    s.register_node("n1", None, Duration::from_secs(60))
        .await
        .unwrap();
    s.create_call_within("acme", &info, &json!({}), &ctx, 10, ("n1", Door::Http))
        .await
        .unwrap()
        .unwrap();
    let journal = s.journal("acme").fenced(1);
    let inv = Invocation {
        call_id: "c1".into(),
        function_call_id: "fc_r".into(),
        name: "save_meal".into(),
        arguments_json: "{}".into(),
        response_id: None,
        item_id: None,
    };
    // A finish in flight on another connection: the call's row locked, the record written,
    // not yet committed.
    let record = "INSERT INTO call_invocations (tenant_id, call_id, function_call_id, record, created_at) \
                  VALUES ('acme', 'c1', 'fc_r', '{}', '2026-11-24T00:00:00.000Z')";
    macro_rules! race {
        ($conn:expr, $begin:expr) => {{
            let mut conn = $conn;
            conn.execute($begin).await.unwrap();
            conn.execute(
                "UPDATE calls SET handoffs = handoffs WHERE tenant_id = 'acme' AND id = 'c1'",
            )
            .await
            .unwrap();
            conn.execute(record).await.unwrap();
            let claiming = {
                let journal = journal.clone();
                let inv = inv.clone();
                tokio::spawn(async move { journal.claim("c1", &inv).await })
            };
            tokio::time::sleep(Duration::from_millis(300)).await;
            conn.execute("COMMIT").await.unwrap();
            claiming.await.unwrap().unwrap()
        }};
    }
    let claim = match h.backend {
        Backend::Sqlite => race!(
            sqlx::SqliteConnection::connect(&format!("sqlite://{}", h.url))
                .await
                .unwrap(),
            "BEGIN IMMEDIATE"
        ),
        Backend::Postgres => race!(sqlx::PgConnection::connect(&h.url).await.unwrap(), "BEGIN"),
    };
    assert_eq!(
        claim,
        Claim::Taken,
        "a recorded function call is claimed again"
    );
}

/// The journal's writer leaves SQLite's checkpoints to a connection of its own: while tool
/// calls keep writing, the write-ahead log is still copied back and rewound, so it does not
/// grow with every write the node ever made.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sqlite_write_ahead_log_stays_small_while_the_journal_writes() {
    use std::time::Duration;
    use switchboard_store::Door;
    run(Backend::Sqlite, |h| async move {
        let s = &h.store;
        tenant(s, "acme").await;
        s.register_node("n1", None, Duration::from_secs(60))
            .await
            .unwrap();
        let info = call_info("acme", "c1");
        let ctx = Context::new(&info, json!({}));
        s.create_call_within("acme", &info, &json!({}), &ctx, 10, ("n1", Door::Http))
            .await
            .unwrap()
            .unwrap();
        let journal = s.journal("acme").fenced(1);
        let wal = format!("{}-wal", h.url);
        let mut largest = 0;
        for round in 0..10 {
            // One after another: a transaction each, as tool calls spread over time are.
            for i in 0..300 {
                let fc = format!("fc_{round}_{i}");
                let inv = Invocation {
                    call_id: "c1".into(),
                    function_call_id: fc.clone(),
                    name: "save_meal".into(),
                    arguments_json: "{}".into(),
                    response_id: None,
                    item_id: None,
                };
                journal.claim("c1", &inv).await.unwrap();
                let finished = JournalEntry::Finished {
                    record: Box::new(record(&fc, true)),
                    context: None,
                    handoffs: 0,
                };
                journal.append("c1", finished).await.unwrap();
            }
            largest = largest.max(std::fs::metadata(&wal).map(|m| m.len()).unwrap_or(0));
            tokio::time::sleep(Duration::from_millis(400)).await;
        }
        // 6,000 transactions; uncheckpointed, the log holds all of them (tens of MiB).
        eprintln!("largest write-ahead log: {largest} bytes");
        assert!(
            largest < 32 << 20,
            "the write-ahead log grew to {largest} bytes"
        );
        for fc in ["fc_0_0", "fc_9_299"] {
            assert!(journal.recorded("c1", fc).await.unwrap().is_some(), "{fc}");
        }
    })
    .await;
}

/// A request dropped while its transaction begins (its client went away) leaves the pooled
/// connection as it found it: every later statement and transaction on it works. On
/// PostgreSQL a `BEGIN` abandoned between sending and its answer used to leave the server
/// inside a transaction sqlx did not count: later users' statements ran inside it, uncommitted,
/// and the next `BEGIN ISOLATION LEVEL …` on that connection failed, and with it every
/// statement after (`current transaction is aborted`).
async fn a_write_dropped_while_its_transaction_begins_leaves_the_pool_clean(h: Harness) {
    let options = StoreOptions {
        max_connections: 1,
        ..StoreOptions::default()
    };
    let s = Store::connect_with(&h.url, h.key.clone(), options)
        .await
        .unwrap();
    tenant(&s, "acme").await;
    let info = call_info("acme", "c1");
    s.create_call("acme", &info, &json!({}), &Context::new(&info, json!({})))
        .await
        .unwrap();
    let journal = s.journal("acme");
    // A write is polled `polls` times, then dropped: for some of these, while its `BEGIN` is
    // on its way to the server.
    for polls in 1..40 {
        let entry = JournalEntry::Checkpoint {
            function_call_id: "fc_1".into(),
            checkpoint: Box::new(checkpoint("c1", "fc_1")),
        };
        let mut write = Box::pin(journal.append("c1", entry));
        for _ in 0..polls {
            let ready = std::future::poll_fn(|cx| {
                std::task::Poll::Ready(write.as_mut().poll(cx).is_ready())
            })
            .await;
            if ready {
                break;
            }
            tokio::task::yield_now().await;
        }
        drop(write);
        // A statement of its own, then a transaction, on the same (only) connection.
        s.call_owner("acme", "c1").await.unwrap();
        let state = journal.load("c1").await;
        assert!(
            matches!(state, Ok(Some(_))),
            "after a write dropped at its poll {polls}: {state:?}"
        );
    }
    s.close().await;
}
