//! `memory.search` latency with 100,000 observations in one tenant, on SQLite and PostgreSQL.
//!
//! The tenant's observations are spread over callers each holding the most a caller may
//! (`max_observations_per_caller`, 1,000), the worst case for one search; their text is drawn
//! from a 3,000-word vocabulary with a skewed (Zipf-like) distribution, so common words match
//! many rows. Each search asks one caller for 3 words and the best 5 matches, as `recall`
//! does. Prints p50/p90/p99/max over the searches.
//!
//! `cargo bench -p switchboard-store --bench memory_search`; set
//! `SWITCHBOARD_BENCH_DATABASE_URL=postgres://…/postgres` to also run on PostgreSQL (a fresh
//! database is made there and dropped afterwards). `MEMORY_BENCH_CALLERS` and
//! `MEMORY_BENCH_PER_CALLER` change the shape (defaults 100 and 1,000).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::time::{Duration, Instant};

use sqlx::{Connection, QueryBuilder};
use switchboard_store::memory::scope_word;
use switchboard_store::{MasterKey, MemoryLimits, Store};

const TENANT: &str = "bench";
const SEARCHES: usize = 5_000;
const WARM_UP: usize = 300;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A deterministic vocabulary of pronounceable words.
fn vocabulary(rng: &mut fastrand::Rng) -> Vec<String> {
    const SYLLABLES: [&str; 24] = [
        "ka", "lo", "mi", "ter", "san", "do", "ri", "ven", "pa", "tu", "sel", "mor", "an", "bi",
        "cor", "el", "fa", "gru", "hol", "in", "jas", "ne", "or", "pli",
    ];
    let mut words = Vec::new();
    while words.len() < 3_000 {
        let n = rng.usize(2..=4);
        let w: String = (0..n)
            .map(|_| SYLLABLES[rng.usize(..SYLLABLES.len())])
            .collect();
        if !words.contains(&w) {
            words.push(w);
        }
    }
    words
}

/// A word, common ones far more often (the square of a uniform draw favours low indices).
fn word<'a>(rng: &mut fastrand::Rng, vocab: &'a [String]) -> &'a str {
    let u = rng.f64();
    let i = ((u * u) * vocab.len() as f64) as usize;
    &vocab[i.min(vocab.len() - 1)]
}

fn sentence(rng: &mut fastrand::Rng, vocab: &[String], words: usize) -> String {
    (0..words)
        .map(|_| word(rng, vocab))
        .collect::<Vec<_>>()
        .join(" ")
}

struct Shape {
    callers: usize,
    per_caller: usize,
}

fn caller(i: usize) -> String {
    format!("+1555{i:07}")
}

/// Loads the tenant's memory in bulk (the same rows `remember` writes, with consistent counters).
macro_rules! load {
    ($conn:expr, $shape:expr, $vocab:expr, $rng:expr) => {{
        let conn = $conn;
        let at = "2026-11-24T00:00:00.000Z";
        let mut tx = conn.begin().await.unwrap();
        sqlx::query(
            "INSERT INTO tenants (id, name, features, created_at, updated_at) VALUES ($1, $1, '{}', $2, $2)",
        )
        .bind(TENANT)
        .bind(at)
        .execute(&mut *tx)
        .await
        .unwrap();
        let total = ($shape.callers * $shape.per_caller) as i64;
        sqlx::query("INSERT INTO memory_tenants (tenant_id, observations) VALUES ($1, $2)")
            .bind(TENANT)
            .bind(total)
            .execute(&mut *tx)
            .await
            .unwrap();
        for c in 0..$shape.callers {
            let who = caller(c);
            sqlx::query(
                "INSERT INTO memory_callers (tenant_id, caller, observations, entities, relations, created_at, updated_at) \
                 VALUES ($1, $2, $3, 1, 0, $4, $4)",
            )
            .bind(TENANT)
            .bind(&who)
            .bind($shape.per_caller as i64)
            .bind(at)
            .execute(&mut *tx)
            .await
            .unwrap();
            sqlx::query(
                "INSERT INTO memory_entities (tenant_id, caller, name, created_at) VALUES ($1, $2, 'caller', $3)",
            )
            .bind(TENANT)
            .bind(&who)
            .bind(at)
            .execute(&mut *tx)
            .await
            .unwrap();
            let scope = scope_word(TENANT, &who);
            let rows: Vec<(String, String)> = (0..$shape.per_caller)
                .map(|i| (sentence($rng, $vocab, 10), format!("{who}-{i}")))
                .collect();
            for chunk in rows.chunks(500) {
                let mut q = QueryBuilder::new(
                    "INSERT INTO memory_observations (tenant_id, caller, scope, entity, content, call_id, idempotency_key, created_at) ",
                );
                q.push_values(chunk, |mut b, (content, key)| {
                    b.push_bind(TENANT)
                        .push_bind(&who)
                        .push_bind(&scope)
                        .push_bind("caller")
                        .push_bind(content)
                        .push_bind("bench-call")
                        .push_bind(key)
                        .push_bind(at);
                });
                q.build().execute(&mut *tx).await.unwrap();
            }
        }
        tx.commit().await.unwrap();
    }};
}

async fn measure(store: &Store, shape: &Shape, vocab: &[String], label: &str) {
    let limits = MemoryLimits::default();
    let mut rng = fastrand::Rng::with_seed(7);
    let mut times = Vec::with_capacity(SEARCHES);
    let mut found = 0usize;
    for i in 0..WARM_UP + SEARCHES {
        let who = caller(rng.usize(..shape.callers));
        let query = sentence(&mut rng, vocab, 3);
        let t = Instant::now();
        let hits = store
            .search_memory(TENANT, &who, &query, 5, &limits)
            .await
            .unwrap();
        let elapsed = t.elapsed();
        if i >= WARM_UP {
            times.push(elapsed);
            found += hits.len();
        }
    }
    times.sort();
    let pct = |p: f64| times[((times.len() as f64 * p) as usize).min(times.len() - 1)];
    let ms = |d: Duration| format!("{:.3} ms", d.as_secs_f64() * 1000.0);
    println!(
        "{label}: {} callers x {} observations = {} in the tenant; {} searches, {:.1} results each\n  p50 {}  p90 {}  p99 {}  max {}",
        shape.callers,
        shape.per_caller,
        shape.callers * shape.per_caller,
        times.len(),
        found as f64 / times.len() as f64,
        ms(pct(0.50)),
        ms(pct(0.90)),
        ms(pct(0.99)),
        ms(times[times.len() - 1]),
    );
}

async fn sqlite(shape: &Shape, vocab: &[String]) {
    let dir = std::env::temp_dir().join(format!("sb-memory-bench-{}.db", std::process::id()));
    let path = dir.to_string_lossy().into_owned();
    let store = Store::connect(&path, MasterKey::generate()).await.unwrap();
    store.migrate().await.unwrap();
    let t = Instant::now();
    let mut conn = sqlx::SqliteConnection::connect(&format!("sqlite://{path}"))
        .await
        .unwrap();
    let mut rng = fastrand::Rng::with_seed(1);
    load!(&mut conn, shape, vocab, &mut rng);
    conn.close().await.unwrap();
    eprintln!("sqlite: loaded in {:.1} s", t.elapsed().as_secs_f64());
    measure(&store, shape, vocab, "sqlite").await;
    store.close().await;
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{path}{suffix}"));
    }
}

async fn postgres(admin: &str, shape: &Shape, vocab: &[String]) {
    let name = format!("sb_bench_{}", std::process::id());
    let mut admin_conn = sqlx::PgConnection::connect(admin).await.unwrap();
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
        .execute(&mut admin_conn)
        .await
        .unwrap();
    let url = match admin.rsplit_once('/') {
        Some((base, _)) => format!("{base}/{name}"),
        None => panic!("SWITCHBOARD_BENCH_DATABASE_URL must name a database"),
    };
    let store = Store::connect(&url, MasterKey::generate()).await.unwrap();
    store.migrate().await.unwrap();
    let t = Instant::now();
    let mut conn = sqlx::PgConnection::connect(&url).await.unwrap();
    let mut rng = fastrand::Rng::with_seed(1);
    load!(&mut conn, shape, vocab, &mut rng);
    sqlx::query("ANALYZE").execute(&mut conn).await.unwrap();
    conn.close().await.unwrap();
    eprintln!("postgres: loaded in {:.1} s", t.elapsed().as_secs_f64());
    measure(&store, shape, vocab, "postgres").await;
    store.close().await;
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "DROP DATABASE IF EXISTS {name} WITH (FORCE)"
    )))
    .execute(&mut admin_conn)
    .await
    .unwrap();
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` passes nothing: run a small shape.
    let quick = !std::env::args().any(|a| a == "--bench");
    let shape = Shape {
        callers: env_usize("MEMORY_BENCH_CALLERS", if quick { 2 } else { 100 }),
        per_caller: env_usize("MEMORY_BENCH_PER_CALLER", if quick { 50 } else { 1_000 }),
    };
    let mut rng = fastrand::Rng::with_seed(42);
    let vocab = vocabulary(&mut rng);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        sqlite(&shape, &vocab).await;
        if let Ok(admin) = std::env::var("SWITCHBOARD_BENCH_DATABASE_URL") {
            postgres(&admin, &shape, &vocab).await;
        }
    });
}
