//! `GET /v1/calls`: a tenant's calls a page at a time, searched by each key, bad values refused
//! naming the parameter, and never another tenant's call whatever the filter or cursor.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::both_backends;
use crate::support::{Backend, TestApp, acme, invoke, spawn_app};

/// Starts a call from `from` with `user`, a few milliseconds after the one before (so newest
/// first is the order they started in).
async fn start(app: &TestApp, key: &str, id: &str, from: &str, user: Value) {
    let body = json!({"call_id": id, "from": from, "to": "+14155550199", "user": user});
    let (s, b) = app.post("/v1/calls", key, body).await;
    assert_eq!(s, StatusCode::CREATED, "{b}");
    tokio::time::sleep(std::time::Duration::from_millis(3)).await;
}

async fn list(app: &TestApp, key: &str, query: &str) -> Value {
    let (s, body) = app.get(&format!("/v1/calls?{query}"), key).await;
    assert_eq!(s, StatusCode::OK, "{query}: {body}");
    body
}

fn ids(page: &Value) -> Vec<String> {
    page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["call_id"].as_str().unwrap().to_owned())
        .collect()
}

async fn found(app: &TestApp, key: &str, query: &str) -> Vec<String> {
    ids(&list(app, key, query).await)
}

fn enc(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

const LUNCH: &str = r#"{"meal_type": "lunch", "dishes": ["soup"]}"#;
const NOTHING: &str = r#"{"meal_type": "lunch", "dishes": []}"#;

both_backends!(
    the_calls_list_pages_through_every_call_and_searches,
    |app| {
        let key = acme(&app, "acme").await;
        start(
            &app,
            &key,
            "c_alice",
            "+14155550001",
            json!({"id": "alice", "auth_token": "tok-alice-1"}),
        )
        .await;
        start(&app, &key, "c_bob", "+14155550002", json!({"id": 42})).await;
        start(&app, &key, "c_anon", "+14155550001", json!({})).await;
        for i in 0..4 {
            start(
                &app,
                &key,
                &format!("c_more_{i}"),
                "+14155550003",
                json!({}),
            )
            .await;
        }
        let args = |s: &str| serde_json::from_str::<Value>(s).unwrap();
        invoke(&app, &key, "c_alice", "f1", "save_meal", args(LUNCH)).await;
        invoke(&app, &key, "c_bob", "f1", "save_meal", args(NOTHING)).await;
        assert_eq!(
            app.delete("/v1/calls/c_alice", &key).await.0,
            StatusCode::OK
        );

        // Every call, two at a time, newest first; then back up with `previous`.
        let everything = [
            "c_more_3", "c_more_2", "c_more_1", "c_more_0", "c_anon", "c_bob", "c_alice",
        ];
        let mut seen = Vec::new();
        let mut pages = Vec::new();
        let mut page = list(&app, &key, "limit=2").await;
        assert!(page.get("previous").is_none_or(Value::is_null), "{page}");
        loop {
            seen.extend(ids(&page));
            pages.push(page.clone());
            let Some(next) = page["next"].as_str() else {
                break;
            };
            page = list(&app, &key, &format!("limit=2&after={}", enc(next))).await;
        }
        assert_eq!(seen, everything);
        assert_eq!(pages.len(), 4);
        let back = list(
            &app,
            &key,
            &format!(
                "limit=2&before={}",
                enc(pages[2]["previous"].as_str().unwrap())
            ),
        )
        .await;
        assert_eq!(ids(&back), ids(&pages[1]));

        // Each key, and keys together.
        for (query, want) in [
            ("id=c_bob", vec!["c_bob"]),
            ("number=%2B14155550001", vec!["c_anon", "c_alice"]),
            ("user_id=alice", vec!["c_alice"]),
            ("user_id=42", vec!["c_bob"]),
            ("tool=save_meal", vec!["c_bob", "c_alice"]),
            ("error=validation_failed", vec!["c_bob"]),
            ("error=timeout", vec![]),
            ("status=failed", vec!["c_bob"]),
            ("outcome=failed", vec!["c_bob"]),
            ("status=ended", vec!["c_alice"]),
            ("status=active&number=%2B14155550001", vec!["c_anon"]),
            (
                "agent=assistant&tool=save_meal&status=active",
                vec!["c_bob"],
            ),
            ("since=2999-01-01", vec![]),
            ("until=2000-01-01T00:00:00Z", vec![]),
            ("id=", everything.to_vec()),
        ] {
            assert_eq!(found(&app, &key, query).await, want, "{query}");
        }
        let whole = list(&app, &key, "").await;
        let alice = &whole["items"][6];
        assert_eq!(alice["call_id"], "c_alice");
        assert_eq!(alice["from"], "+14155550001");
        assert_eq!(alice["to"], "+14155550199");
        assert_eq!(alice["user_id"], "alice");
        assert_eq!(alice["status"], "ended");
        assert_eq!(alice["failed"], false);
        assert_eq!(whole["items"][5]["failed"], true);
        let started = alice["started_at"].as_str().unwrap();
        let from_alice = found(&app, &key, &format!("since={}", enc(started))).await;
        assert_eq!(from_alice, everything, "since is inclusive");
        let before_alice = found(&app, &key, &format!("until={}", enc(started))).await;
        assert!(
            before_alice.is_empty(),
            "until is exclusive: {before_alice:?}"
        );
        assert!(!whole.to_string().contains("tok-alice-1"), "{whole}");
    }
);

both_backends!(bad_values_are_refused_naming_the_parameter, |app| {
    let key = acme(&app, "acme").await;
    start(&app, &key, "c1", "+14155550001", json!({})).await;
    for (query, names) in [
        ("since=yesterday", ["`since`", "RFC 3339"]),
        ("until=2026-13-45", ["`until`", "RFC 3339"]),
        ("since=2026-11-25&until=2026-11-24", ["`since`", "`until`"]),
        ("limit=0", ["`limit`", "1 to 200"]),
        ("limit=201", ["`limit`", "1 to 200"]),
        ("limit=lots", ["`limit`", "1 to 200"]),
        ("after=not-a-cursor", ["`after`", "`next`"]),
        ("before=WyJ4Il0", ["`before`", "`previous`"]),
        ("after=x&before=y", ["`after`", "`before`"]),
        ("status=live", ["status", "`active`"]),
        ("outcome=maybe", ["`outcome`", "`ok`"]),
        ("phone=%2B1", ["phone", "number"]),
    ] {
        let (s, body) = app.get(&format!("/v1/calls?{query}"), &key).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{query}: {body}");
        let text = body.to_string();
        for name in names {
            assert!(text.contains(name), "{query}: {name} not in {text}");
        }
    }
    let long = "9".repeat(300);
    let (s, body) = app.get(&format!("/v1/calls?number={long}"), &key).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{body}");
    assert!(body.to_string().contains("`number`"), "{body}");
});

both_backends!(another_tenants_calls_never_appear_in_the_list, |app| {
    let acme_key = acme(&app, "acme").await;
    let globex = acme(&app, "globex").await;
    let args = serde_json::from_str::<Value>(NOTHING).unwrap();
    for i in 0..4 {
        let id = format!("a_{i}");
        start(
            &app,
            &acme_key,
            &id,
            "+14155550001",
            json!({"id": "shared"}),
        )
        .await;
        invoke(&app, &acme_key, &id, "f1", "save_meal", args.clone()).await;
    }
    // The same call id in both tenants: each lists its own.
    start(
        &app,
        &acme_key,
        "same",
        "+14155550001",
        json!({"id": "shared"}),
    )
    .await;
    start(&app, &globex, "same", "+14155550009", json!({})).await;
    start(&app, &globex, "g_0", "+14155550009", json!({})).await;
    let first = list(&app, &acme_key, "limit=2").await;
    let second = list(
        &app,
        &acme_key,
        &format!("limit=2&after={}", enc(first["next"].as_str().unwrap())),
    )
    .await;
    let cursors = [
        String::new(),
        format!("&after={}", enc(first["next"].as_str().unwrap())),
        format!("&after={}", enc(second["next"].as_str().unwrap())),
        format!("&before={}", enc(second["previous"].as_str().unwrap())),
    ];
    for search in [
        "limit=200",
        "id=a_1",
        "number=%2B14155550001",
        "user_id=shared",
        "tool=save_meal",
        "error=validation_failed",
        "status=failed",
        "status=active",
    ] {
        for cursor in &cursors {
            let page = list(&app, &globex, &format!("{search}{cursor}")).await;
            for c in page["items"].as_array().unwrap() {
                assert!(
                    c["call_id"] == "g_0" || c["call_id"] == "same",
                    "{search}{cursor}: {c}"
                );
                assert_eq!(c["from"], "+14155550009", "acme's call: {c}");
            }
        }
    }
    assert_eq!(found(&app, &globex, "").await, ["g_0", "same"]);
    // Without a key, or with the admin's, there is no tenant to list.
    assert_eq!(app.get("/v1/calls", "").await.0, StatusCode::UNAUTHORIZED);
});

both_backends!(the_calls_list_shows_no_secret, |app| {
    let key = acme(&app, "acme").await;
    // The agent's sensitive config holds `sk-very-secret-1`; a client puts it in a call.
    let body =
        json!({"call_id": "leaky", "from": "sk-very-secret-1", "user": {"id": "sk-very-secret-1"}});
    assert_eq!(
        app.post("/v1/calls", &key, body).await.0,
        StatusCode::CREATED
    );
    let page = list(&app, &key, "").await;
    assert_eq!(ids(&page), ["leaky"]);
    assert!(!page.to_string().contains("sk-very-secret-1"), "{page}");
});

// ---------------------------------------------------------------------------------------------
// At scale (ignored by default): 100,000 calls of one tenant (and 20,000 of another), seeded in
// bulk through SQL, each page and search timed over HTTP. docs/benchmarks.md keeps the figures:
//
//   SWITCHBOARD_TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres \
//     cargo test -p switchboard-server --test api calls_at_scale -- --ignored --nocapture --test-threads=1
// ---------------------------------------------------------------------------------------------

/// The seeded tenant's calls.
const SCALE: i64 = 100_000;

/// Seeds `calls` calls of `tenant`, one a minute from 2026-01-01, ended but the newest 50:
/// callers `+1415` + 7 digits (20,000 of them, five calls each), called lines `+1800555000N`
/// (N = i mod 10), user ids `user_<i mod 30,000>`; two invocations each, `save_meal` and
/// (every tenth call) `book_table`, the latter failing `timeout` on every fiftieth call.
fn seed_sql(backend: Backend, tenant: &str, calls: i64) -> Vec<String> {
    let last = calls - 1;
    let active = calls - 50;
    match backend {
        Backend::Sqlite => vec![
            format!(
                "INSERT INTO calls (tenant_id, id, agent, status, call_info, context, pinned, version, handoffs, created_at, ended_at, fence, door, user_id) \
                 WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < {last}) \
                 SELECT '{tenant}', printf('call_%06d', i), 'assistant', CASE WHEN i >= {active} THEN 'active' ELSE 'ended' END, \
                 json_object('id', printf('call_%06d', i), 'tenant_id', '{tenant}', 'agent', 'assistant', 'from', printf('+1415%07d', i % 20000), 'to', printf('+1800555000%d', i % 10), 'started_at', strftime('%Y-%m-%dT%H:%M:%fZ', '2026-01-01', '+' || (i * 60) || ' seconds')), \
                 '{{}}', '{{}}', 0, 0, strftime('%Y-%m-%dT%H:%M:%fZ', '2026-01-01', '+' || (i * 60) || ' seconds'), \
                 CASE WHEN i >= {active} THEN NULL ELSE strftime('%Y-%m-%dT%H:%M:%fZ', '2026-01-01', '+' || (i * 60 + 45) || ' seconds') END, \
                 0, 'http', printf('user_%d', i % 30000) FROM n"
            ),
            format!(
                "INSERT INTO call_invocations (tenant_id, call_id, function_call_id, record, created_at) \
                 WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < {last}) \
                 SELECT '{tenant}', printf('call_%06d', i), 'fc_1', \
                 '{{\"function_call_id\":\"fc_1\",\"tool\":\"save_meal\",\"arguments\":\"{{\\\"meal_type\\\":\\\"lunch\\\"}}\",\"ok\":true,\"error\":null,\"output\":\"{{\\\"ok\\\":true}}\",\"latency_ms\":1.5,\"started_at\":\"2026-01-01T00:00:01.000Z\",\"finished_at\":\"2026-01-01T00:00:01.002Z\",\"response_id\":null,\"interrupted\":false,\"duplicate_of\":null,\"logs\":[]}}', \
                 '2026-01-01T00:00:01.002Z' FROM n"
            ),
            format!(
                "INSERT INTO call_invocations (tenant_id, call_id, function_call_id, record, created_at) \
                 WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 10 FROM n WHERE i + 10 <= {last}) \
                 SELECT '{tenant}', printf('call_%06d', i), 'fc_2', \
                 '{{\"function_call_id\":\"fc_2\",\"tool\":\"book_table\",\"arguments\":\"{{}}\",\"ok\":' || CASE WHEN i % 50 = 0 THEN 'false,\"error\":\"timeout\"' ELSE 'true,\"error\":null' END || ',\"output\":\"{{}}\",\"latency_ms\":1.5,\"started_at\":\"2026-01-01T00:00:02.000Z\",\"finished_at\":\"2026-01-01T00:00:02.002Z\",\"response_id\":null,\"interrupted\":false,\"duplicate_of\":null,\"logs\":[]}}', \
                 '2026-01-01T00:00:02.002Z' FROM n"
            ),
        ],
        Backend::Postgres => vec![
            format!(
                "INSERT INTO calls (tenant_id, id, agent, status, call_info, context, pinned, version, handoffs, created_at, ended_at, fence, door, user_id) \
                 SELECT '{tenant}', 'call_' || lpad(i::text, 6, '0'), 'assistant', CASE WHEN i >= {active} THEN 'active' ELSE 'ended' END, \
                 json_build_object('id', 'call_' || lpad(i::text, 6, '0'), 'tenant_id', '{tenant}', 'agent', 'assistant', 'from', '+1415' || lpad((i % 20000)::text, 7, '0'), 'to', '+1800555000' || (i % 10), 'started_at', to_char(timestamp '2026-01-01' + i * interval '1 minute', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'))::text, \
                 '{{}}', '{{}}', 0, 0, to_char(timestamp '2026-01-01' + i * interval '1 minute', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'), \
                 CASE WHEN i >= {active} THEN NULL ELSE to_char(timestamp '2026-01-01' + i * interval '1 minute' + interval '45 seconds', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"') END, \
                 0, 'http', 'user_' || (i % 30000) FROM generate_series(0, {last}) i"
            ),
            format!(
                "INSERT INTO call_invocations (tenant_id, call_id, function_call_id, record, created_at) \
                 SELECT '{tenant}', 'call_' || lpad(i::text, 6, '0'), 'fc_1', \
                 '{{\"function_call_id\":\"fc_1\",\"tool\":\"save_meal\",\"arguments\":\"{{\\\"meal_type\\\":\\\"lunch\\\"}}\",\"ok\":true,\"error\":null,\"output\":\"{{\\\"ok\\\":true}}\",\"latency_ms\":1.5,\"started_at\":\"2026-01-01T00:00:01.000Z\",\"finished_at\":\"2026-01-01T00:00:01.002Z\",\"response_id\":null,\"interrupted\":false,\"duplicate_of\":null,\"logs\":[]}}', \
                 '2026-01-01T00:00:01.002Z' FROM generate_series(0, {last}) i"
            ),
            format!(
                "INSERT INTO call_invocations (tenant_id, call_id, function_call_id, record, created_at) \
                 SELECT '{tenant}', 'call_' || lpad(i::text, 6, '0'), 'fc_2', \
                 '{{\"function_call_id\":\"fc_2\",\"tool\":\"book_table\",\"arguments\":\"{{}}\",\"ok\":' || CASE WHEN i % 50 = 0 THEN 'false,\"error\":\"timeout\"' ELSE 'true,\"error\":null' END || ',\"output\":\"{{}}\",\"latency_ms\":1.5,\"started_at\":\"2026-01-01T00:00:02.000Z\",\"finished_at\":\"2026-01-01T00:00:02.002Z\",\"response_id\":null,\"interrupted\":false,\"duplicate_of\":null,\"logs\":[]}}', \
                 '2026-01-01T00:00:02.002Z' FROM generate_series(0, {last}, 10) i"
            ),
            "ANALYZE calls".to_owned(),
            "ANALYZE call_invocations".to_owned(),
        ],
    }
}

async fn seed(app: &TestApp, backend: Backend, tenant: &str, calls: i64) {
    use sqlx::{Connection, Executor};
    let statements = seed_sql(backend, tenant, calls);
    match backend {
        Backend::Sqlite => {
            let mut conn = sqlx::SqliteConnection::connect(&app.url).await.unwrap();
            for sql in statements {
                conn.execute(sqlx::AssertSqlSafe(sql)).await.unwrap();
            }
        }
        Backend::Postgres => {
            let mut conn = sqlx::PgConnection::connect(&app.url).await.unwrap();
            for sql in statements {
                conn.execute(sqlx::AssertSqlSafe(sql)).await.unwrap();
            }
        }
    }
}

/// Times `runs` requests of one query: (median, p95, max) in milliseconds, and the last page.
async fn timed(app: &TestApp, key: &str, query: &str, runs: usize) -> ([f64; 3], Value) {
    let mut times = Vec::new();
    let mut last = Value::Null;
    for _ in 0..runs {
        let at = std::time::Instant::now();
        last = list(app, key, query).await;
        times.push(at.elapsed().as_secs_f64() * 1000.0);
    }
    (stats(&mut times), last)
}

fn stats(times: &mut [f64]) -> [f64; 3] {
    times.sort_by(f64::total_cmp);
    let at = |q: f64| times[((times.len() as f64 * q).ceil() as usize).clamp(1, times.len()) - 1];
    [at(0.5), at(0.95), times[times.len() - 1]]
}

async fn calls_at_scale(backend: Backend) {
    let app = spawn_app(backend).await;
    let key = acme(&app, "acme").await;
    let other = acme(&app, "other").await;
    let at = std::time::Instant::now();
    seed(&app, backend, "acme", SCALE).await;
    seed(&app, backend, "other", 20_000).await;
    eprintln!(
        "{backend:?}: seeded {SCALE} + 20000 calls in {:.1} s",
        at.elapsed().as_secs_f64()
    );

    let mut rows: Vec<(String, [f64; 3], usize)> = Vec::new();
    let mut report = |name: &str, s: [f64; 3], n: usize| {
        eprintln!(
            "{backend:?} | {name} | {} | {:.1} | {:.1} | {:.1}",
            n, s[0], s[1], s[2]
        );
        rows.push((name.to_owned(), s, n));
    };
    // Every page of the tenant's 100,000 calls, 200 at a time, each timed.
    let mut times = Vec::new();
    let mut query = "limit=200".to_owned();
    let mut seen = 0;
    let mut deep = String::new();
    loop {
        let at = std::time::Instant::now();
        let page = list(&app, &key, &query).await;
        times.push(at.elapsed().as_secs_f64() * 1000.0);
        seen += page["items"].as_array().unwrap().len();
        let Some(next) = page["next"].as_str() else {
            break;
        };
        if seen == 90_000 {
            deep = next.to_owned();
        }
        query = format!("limit=200&after={}", enc(next));
    }
    assert_eq!(seen, SCALE as usize, "every call, once");
    report(
        "every page, 200 calls each (500 pages)",
        stats(&mut times),
        times.len(),
    );
    let cases = [
        ("newest page (50)", String::new(), 20),
        (
            "page past 90,000 calls (50)",
            format!("after={}", enc(&deep)),
            20,
        ),
        (
            "newer page before it (previous)",
            format!("before={}", enc(&deep)),
            20,
        ),
        (
            "number: a caller (5 calls)",
            "number=%2B14150012345".to_owned(),
            20,
        ),
        (
            "number: a line (10,000 calls)",
            "number=%2B18005550007".to_owned(),
            20,
        ),
        ("user_id (3-4 calls)", "user_id=user_2345".to_owned(), 20),
        ("id", "id=call_054321".to_owned(), 20),
        (
            "tool: book_table (10,000 calls)",
            "tool=book_table".to_owned(),
            20,
        ),
        (
            "error: timeout (2,000 calls)",
            "error=timeout".to_owned(),
            20,
        ),
        (
            "status: failed (2,000 calls)",
            "status=failed".to_owned(),
            20,
        ),
        ("status: active (50 calls)", "status=active".to_owned(), 20),
        (
            "since/until: one day (1,440 calls)",
            "since=2026-02-01&until=2026-02-02".to_owned(),
            20,
        ),
        (
            "number + status ended + since",
            "number=%2B18005550007&status=ended&since=2026-02-01".to_owned(),
            20,
        ),
    ];
    for (name, query, runs) in cases {
        let (s, page) = timed(&app, &key, &query, runs).await;
        assert!(
            !page["items"].as_array().unwrap().is_empty(),
            "{name}: {page}"
        );
        report(name, s, runs);
    }
    // The other tenant sees only its own, however large the first tenant.
    let theirs = list(&app, &other, &format!("limit=200&after={}", enc(&deep))).await;
    assert!(
        theirs["items"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["call_id"].as_str().is_some())
    );
    let slowest = rows.iter().map(|(_, s, _)| s[1]).fold(0.0, f64::max);
    eprintln!("{backend:?}: slowest p95 {slowest:.1} ms");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "seeds 120,000 calls: run by hand for docs/benchmarks.md"]
async fn calls_at_scale_sqlite() {
    calls_at_scale(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "seeds 120,000 calls: run by hand for docs/benchmarks.md"]
async fn calls_at_scale_postgres() {
    calls_at_scale(Backend::Postgres).await;
}
