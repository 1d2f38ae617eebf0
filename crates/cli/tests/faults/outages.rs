//! The network between the processes broken the ways networks break, through TCP proxies the
//! scenarios put between them, under write traffic on two nodes: PostgreSQL refusing every
//! connection for longer than every retry (a managed failover), PostgreSQL cut off from one
//! node (blackholed: nothing refused, nothing answered), the nodes cut off from each other,
//! and a slow database.
//!
//! The client behaves as a model does: it sends a function call until it is answered (again
//! after a 503 or a broken connection), and when a write is answered with an error it asks for
//! the same write once more under a new function call id. Beyond the suite's counts, each
//! scenario counts the requests answered later than their tool's deadline plus the documented
//! margin, and the orders the upstream took twice (one item under two idempotency keys).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::support::proxy::{Net, Proxy};
use crate::support::{Serve, TempDir, with_postgres_within};
use crate::upstream::Upstream;
use crate::{Kills, SERIAL, Totals, retry_after, tenant_with, until_ok};

/// The tools' deadline in these scenarios, in seconds.
const TIMEOUT_S: u64 = 5;
/// `--commit-retry-ms`.
const COMMIT_RETRY_MS: u64 = 2000;
/// What the documented margin allows beyond a tool's deadline (`--commit-retry-ms` and a
/// second), and half a second for this busy test machine's own scheduling.
fn answer_limit() -> Duration {
    Duration::from_secs(TIMEOUT_S) + Duration::from_millis(COMMIT_RETRY_MS + 1000 + 500)
}

/// How long PostgreSQL refuses connections in `postgres_away_longer_than_every_retry`:
/// `SWITCHBOARD_FAULTS_OUTAGE_S`, 60 by default (a managed failover takes 20–60 s).
fn outage() -> Duration {
    let s = std::env::var("SWITCHBOARD_FAULTS_OUTAGE_S")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(60);
    Duration::from_secs(s)
}

/// The scenarios' tools, each with a deadline of [`TIMEOUT_S`].
fn tools(upstream: &str) -> Vec<Value> {
    vec![
        json!({"name": "add_item", "description": "Add an item to the list.", "timeout": TIMEOUT_S,
               "parameters": [{"name": "item", "type": "string", "required": true}],
               "actions": [{"type": "context.set", "data": {"items[+]": "{{params.item}}"}}],
               "on_success": [{"type": "respond", "message": "Added {{params.item}}."}]}),
        json!({"name": "place_order", "description": "Order an item.", "timeout": TIMEOUT_S,
               "parameters": [{"name": "item", "type": "string", "required": true}],
               "actions": [
                   {"type": "api_call", "method": "POST", "url": format!("{upstream}/orders"),
                    "body": {"item": "{{params.item}}"}, "retry_count": 0},
                   {"type": "context.set", "data": {"orders[+]": "{{params.item}}"}}
               ],
               "on_success": [{"type": "respond", "message": "Ordered {{params.item}}."}]}),
    ]
}

/// Two nodes on `database`, each reaching PostgreSQL through a proxy of its own, and each
/// reached by the other through a proxy of its own (its `--advertise-url`); clients reach the
/// nodes directly.
struct Pair {
    nodes: [Serve; 2],
    /// Each node's way to PostgreSQL.
    db: [Proxy; 2],
    /// The way to each node from the other.
    peer: [Proxy; 2],
}

impl Pair {
    async fn start(database: &str, dir: &std::path::Path, lease_ms: u64) -> Pair {
        let pg: std::net::SocketAddr = "127.0.0.1:5432".parse().unwrap();
        let mut nodes = Vec::new();
        let (mut db, mut peer) = (Vec::new(), Vec::new());
        for name in ["a", "b"] {
            let to_db = Proxy::start(pg).await;
            let url = database.replacen("127.0.0.1:5432", &to_db.host_port(), 1);
            assert_ne!(url, database, "the test database is at 127.0.0.1:5432");
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port();
            let to_node = Proxy::start(([127, 0, 0, 1], port).into()).await;
            let extra: Vec<String> = [
                "--lease-ms".to_owned(),
                lease_ms.to_string(),
                "--commit-retry-ms".to_owned(),
                COMMIT_RETRY_MS.to_string(),
                "--advertise-url".to_owned(),
                format!("http://{}", to_node.host_port()),
            ]
            .to_vec();
            nodes.push(Serve::start_with(&url, dir, name, &extra, Some(port)).await);
            db.push(to_db);
            peer.push(to_node);
        }
        let [a, b] = <[Serve; 2]>::try_from(nodes).ok().unwrap();
        Pair {
            nodes: [a, b],
            db: <[Proxy; 2]>::try_from(db).ok().unwrap(),
            peer: <[Proxy; 2]>::try_from(peer).ok().unwrap(),
        }
    }

    fn bases(&self) -> Vec<String> {
        self.nodes.iter().map(|n| n.base.clone()).collect()
    }
}

/// Each function call's answer, by function call id: (tool, item, answer).
type Answers = HashMap<String, (String, String, Value)>;

/// What the clients saw.
#[derive(Default)]
struct Seen {
    answers: Answers,
    sent: u64,
    lost: u64,
    /// Requests answered (with anything) later than [`answer_limit`].
    late: u64,
    /// Writes answered with an error and asked for again under a new function call id.
    retried: u64,
    /// How long each function call's caller waited for its answer, sent again and again.
    waits: Vec<Duration>,
}

/// Sends `body` to a random node until it is answered, as a client does; counts each request
/// that took longer than [`answer_limit`].
async fn invoke(
    client: &reqwest::Client,
    bases: &[String],
    key: &str,
    call: &str,
    body: &Value,
    late: &AtomicU64,
) -> Option<Value> {
    let deadline = Instant::now() + Duration::from_secs(150);
    while Instant::now() < deadline {
        let base = &bases[fastrand::usize(..bases.len())];
        let sent = Instant::now();
        let answer = client
            .post(format!("{base}/v1/calls/{call}/invocations"))
            .bearer_auth(key)
            .json(body)
            .send()
            .await;
        let took = sent.elapsed();
        if took > answer_limit() {
            eprintln!("{call}: a request to {base} took {took:?}: {body}");
            late.fetch_add(1, Ordering::Relaxed);
        }
        match answer {
            Ok(r) if r.status() == StatusCode::OK => {
                if let Ok(v) = r.json::<Value>().await {
                    return Some(v);
                }
            }
            Ok(r) if r.status() == StatusCode::TOO_MANY_REQUESTS => {
                tokio::time::sleep(retry_after(r).await).await;
                continue;
            }
            Ok(r)
                if r.status() == StatusCode::SERVICE_UNAVAILABLE
                    || r.status() == StatusCode::GATEWAY_TIMEOUT => {}
            Ok(r) => {
                let status = r.status();
                panic!(
                    "{call}: {status} {} for {body}",
                    r.text().await.unwrap_or_default()
                );
            }
            Err(_) => {}
        }
        tokio::time::sleep(Duration::from_millis(50 + fastrand::u64(..100))).await;
    }
    None
}

/// Whether an error answer tells the model the write was not done (so a model asks again).
fn not_done(answer: &Value) -> bool {
    answer["ok"] != true && answer["result"]["details"]["saved"] != "unknown"
}

/// Calls `outage-0..calls` on any of `bases` until `stop`: `add_item`s and, every third,
/// a `place_order`; a write answered with an error is asked for once more.
async fn traffic(
    bases: Vec<String>,
    key: String,
    calls: usize,
    stop: Arc<AtomicBool>,
) -> Vec<(String, Seen)> {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap();
    let mut workers = Vec::new();
    for c in 0..calls {
        let (client, bases, key, stop) = (
            client.clone(),
            bases.clone(),
            key.clone(),
            Arc::clone(&stop),
        );
        workers.push(tokio::spawn(async move {
            let call = format!("outage-{c}");
            until_ok(
                &client,
                &bases,
                &key,
                Method::POST,
                "/v1/calls",
                Some(json!({"call_id": call})),
            )
            .await;
            let mut seen = Seen::default();
            let late = AtomicU64::new(0);
            let mut i = 0;
            while !stop.load(Ordering::Relaxed) {
                i += 1;
                let tool = if i % 3 == 0 {
                    "place_order"
                } else {
                    "add_item"
                };
                let item = format!("{call}-{i}-{tool}");
                let mut fc = format!("{call}-{i}");
                for attempt in 0..2 {
                    let body =
                        json!({"function_call_id": fc, "name": tool, "arguments": {"item": item}});
                    seen.sent += 1;
                    let asked = Instant::now();
                    let answer = invoke(&client, &bases, &key, &call, &body, &late).await;
                    seen.waits.push(asked.elapsed());
                    match answer {
                        Some(a) => {
                            let again = attempt == 0 && not_done(&a);
                            seen.answers
                                .insert(fc.clone(), (tool.to_owned(), item.clone(), a));
                            if !again {
                                break;
                            }
                            seen.retried += 1;
                            fc = format!("{call}-{i}-again");
                        }
                        None => {
                            seen.lost += 1;
                            break;
                        }
                    }
                }
            }
            seen.late = late.load(Ordering::Relaxed);
            (call, seen)
        }));
    }
    let mut out = Vec::new();
    for w in workers {
        out.push(w.await.unwrap());
    }
    out
}

/// Waits until each call's record holds all its answers (what a node kept while the database
/// was away is stored once it answers), then checks the answers against what was stored and
/// what the upstream took.
async fn settle(
    totals: &mut Totals,
    bases: &[String],
    key: &str,
    calls: Vec<(String, Seen)>,
    upstream: &Upstream,
    kills: &Kills,
) {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    let (mut errors, mut unknown, mut retried) = (0, 0, 0);
    let mut waits: Vec<Duration> = calls.iter().flat_map(|(_, s)| s.waits.clone()).collect();
    waits.sort();
    let at = |q: f64| {
        waits
            .get(((waits.len() as f64 * q) as usize).min(waits.len().saturating_sub(1)))
            .copied()
            .unwrap_or_default()
    };
    eprintln!(
        "what callers waited for an answer, sending again after a 503: p50 {:?}, p99 {:?}, longest {:?}",
        at(0.5),
        at(0.99),
        waits.last().copied().unwrap_or_default()
    );
    for (call, seen) in calls {
        totals.invocations += seen.sent;
        totals.answers_lost += seen.lost;
        totals.answers_late += seen.late;
        retried += seen.retried;
        errors += seen
            .answers
            .values()
            .filter(|(_, _, a)| a["ok"] != true)
            .count();
        unknown += seen
            .answers
            .values()
            .filter(|(_, _, a)| !not_done(a) && a["ok"] != true)
            .count();
        let path = format!("/v1/calls/{call}");
        let deadline = Instant::now() + Duration::from_secs(40);
        let view = loop {
            let view = until_ok(&client, bases, key, Method::GET, &path, None).await;
            let stored = view["invocations_total"].as_u64().unwrap_or(0);
            if stored >= seen.answers.len() as u64 || Instant::now() > deadline {
                // Read again: a view reads the context before the records.
                break until_ok(&client, bases, key, Method::GET, &path, None).await;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        // An answer that said whether it was saved is not known may lack its record: its node
        // gave the write up while it was under way, and was then fenced off.
        let stored = view["invocations_total"].as_u64().unwrap_or(0) as usize;
        let unknowable = seen
            .answers
            .values()
            .filter(|(_, _, a)| a["ok"] != true && !not_done(a))
            .count();
        if stored > seen.answers.len() || stored + unknowable < seen.answers.len() {
            eprintln!(
                "{call}: {stored} records for {} answers ({unknowable} not known to be saved)",
                seen.answers.len()
            );
            totals.answers_lost += 1;
        }
        check_items(totals, &seen.answers, &view["context"]);
    }
    // One order per item: an item the upstream took under two keys was ordered twice.
    let mut keys_per_item: HashMap<String, u64> = HashMap::new();
    for k in upstream.keys().values() {
        if let Some(item) = &k.applied {
            *keys_per_item.entry(item.clone()).or_default() += 1;
        }
    }
    for (item, n) in keys_per_item.into_iter().filter(|(_, n)| *n > 1) {
        eprintln!("{item} ordered {n} times");
        totals.upstream_writes_duplicated += n - 1;
    }
    totals.upstream_writes_duplicated += kills.unexplained_resends(upstream);
    eprintln!(
        "{errors} answers were errors ({unknown} not known to be saved), {retried} writes asked for again"
    );
}

/// Every item stored once when one of its answers was ok, not at all when every answer said it
/// was not done; an answer that does not know says nothing.
fn check_items(totals: &mut Totals, answers: &Answers, context: &Value) {
    let mut items: HashMap<(&str, &str), Vec<&Value>> = HashMap::new();
    for (tool, item, answer) in answers.values() {
        items.entry((tool, item)).or_default().push(answer);
    }
    for ((tool, item), answers) in items {
        let list = if tool == "add_item" {
            "items"
        } else {
            "orders"
        };
        let stored = context["workflow"][list]
            .as_array()
            .map_or(0, |a| a.iter().filter(|v| v.as_str() == Some(item)).count());
        let ok = answers.iter().any(|a| a["ok"] == true);
        let unknown = answers.iter().any(|a| a["ok"] != true && !not_done(a));
        if ok && stored == 0 {
            eprintln!("write lost: {tool}({item}) answered {answers:?}");
            totals.writes_lost += 1;
        }
        if stored > 1 || (!ok && !unknown && stored > 0) {
            eprintln!("write stored {stored} times: {tool}({item}) answered {answers:?}");
            totals.writes_duplicated += 1;
        }
    }
}

/// Runs traffic on `pair` for `before`, breaks it with `fault`, keeps the traffic on for
/// `during`, heals it, runs on for a few seconds, and settles.
async fn scenario(
    name: &str,
    database: &str,
    lease_ms: u64,
    fault: impl Fn(&Pair, bool) + Send,
    during: Duration,
    watch: impl Fn(&Pair) -> Option<String>,
) {
    let dir = TempDir::new();
    let upstream = Upstream::start().await;
    // Orders take a while, and the network breaks while some are under way.
    upstream.set_delay(Duration::from_millis(800));
    let pair = Pair::start(database, dir.path(), lease_ms).await;
    let admin = pair.nodes[0].admin_key();
    let key = tenant_with(&pair.nodes[0], &admin, tools(&upstream.url)).await;
    let bases = pair.bases();
    let stop = Arc::new(AtomicBool::new(false));
    let running = tokio::spawn(traffic(bases.clone(), key.clone(), 6, Arc::clone(&stop)));
    let kills = Kills::default();
    let mut totals = Totals::default();
    tokio::time::sleep(Duration::from_secs(3)).await;
    upstream.wait_in_flight(2, Duration::from_secs(20)).await;
    // A takeover resends a run's key, as after a kill: that is what the key is for.
    kills.now();
    fault(&pair, true);
    totals.faults += 1;
    let broke = Instant::now();
    let watcher = watch(&pair);
    let mut said = None;
    while broke.elapsed() < during {
        if said.is_none()
            && let Some(url) = &watcher
            && let Ok(r) = reqwest::get(url).await
            && r.status() == StatusCode::SERVICE_UNAVAILABLE
        {
            said = Some(broke.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    fault(&pair, false);
    kills.now();
    tokio::time::sleep(Duration::from_secs(3)).await;
    stop.store(true, Ordering::Relaxed);
    let calls = running.await.unwrap();
    settle(&mut totals, &bases, &key, calls, &upstream, &kills).await;
    let (kept, stored) = kept_and_stored(&pair, &admin).await;
    eprintln!(
        "{name}: {kept} finished runs kept while their commits could not be stored, {stored} stored later"
    );
    if watcher.is_some() {
        let said = said.expect("the cut-off node's /readyz never said 503");
        eprintln!("{name}: /readyz said 503 {said:?} after the cut");
        // Its last renewal was at most a third of a lease before the cut.
        assert!(
            said < Duration::from_millis(lease_ms) + Duration::from_secs(1),
            "{name}: /readyz said 503 only {said:?} after the cut"
        );
    }
    totals.report(name);
}

/// What the nodes kept of finished runs while the database did not take them, and stored
/// later (their metrics).
async fn kept_and_stored(pair: &Pair, admin: &str) -> (u64, u64) {
    let client = reqwest::Client::new();
    let (mut kept, mut stored) = (0, 0);
    for node in &pair.nodes {
        let Ok(r) = client
            .get(format!("{}/metrics", node.base))
            .bearer_auth(admin)
            .send()
            .await
        else {
            continue;
        };
        let text = r.text().await.unwrap_or_default();
        let count = |name: &str| -> u64 {
            text.lines()
                .filter(|l| l.starts_with(name))
                .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
                .sum::<f64>() as u64
        };
        kept += count("switchboard_unsaved_outcomes_kept_total");
        stored += count("switchboard_unsaved_outcomes_stored_total");
    }
    (kept, stored)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_away_longer_than_every_retry() {
    let _serial = SERIAL.lock().await;
    let limit = outage() + Duration::from_secs(180);
    with_postgres_within(limit, |database| async move {
        let refuse = |pair: &Pair, on: bool| {
            for p in &pair.db {
                p.set(if on { Net::Refusing } else { Net::Up });
            }
        };
        scenario(
            "postgres_away_longer_than_every_retry",
            &database,
            3000,
            refuse,
            outage(),
            |_| None,
        )
        .await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_blackholed_for_one_node() {
    let _serial = SERIAL.lock().await;
    with_postgres_within(Duration::from_secs(200), |database| async move {
        let cut = |pair: &Pair, on: bool| {
            pair.db[0].set(if on { Net::Blackholed } else { Net::Up });
        };
        let readyz = |pair: &Pair| Some(format!("{}/readyz", pair.nodes[0].base));
        scenario(
            "postgres_blackholed_for_one_node",
            &database,
            3000,
            cut,
            Duration::from_secs(15),
            readyz,
        )
        .await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn nodes_cut_off_from_each_other() {
    let _serial = SERIAL.lock().await;
    with_postgres_within(Duration::from_secs(200), |database| async move {
        let cut = |pair: &Pair, on: bool| {
            for p in &pair.peer {
                p.set(if on { Net::Blackholed } else { Net::Up });
            }
        };
        // Longer than a forwarded request may wait (the tools' 5 s, the 2 s retry and 1 s).
        scenario(
            "nodes_cut_off_from_each_other",
            &database,
            3000,
            cut,
            Duration::from_secs(12),
            |_| None,
        )
        .await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_slow() {
    let _serial = SERIAL.lock().await;
    with_postgres_within(Duration::from_secs(200), |database| async move {
        // Every round trip two seconds longer.
        let slow = |pair: &Pair, on: bool| {
            for p in &pair.db {
                p.set(if on {
                    Net::Slow(Duration::from_secs(1))
                } else {
                    Net::Up
                });
            }
        };
        scenario(
            "postgres_slow",
            &database,
            6000,
            slow,
            Duration::from_secs(12),
            |_| None,
        )
        .await;
    })
    .await;
}
