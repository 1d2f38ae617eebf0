//! The database failing under live calls: PostgreSQL restarted mid-call, SQLite locked by
//! another process. An answer may then be an error; an `ok` answer whose writes were not
//! stored, or an error whose writes were, is what must never happen.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use reqwest::Method;
use serde_json::{Value, json};

use crate::support::{Serve, TempDir, bounded, with_postgres};
use crate::upstream::Upstream;
use crate::{SERIAL, Totals, check_writes, invoke_until_answered, tenant, until_ok};

type Answers = HashMap<String, (String, String, Value)>;

/// Calls `traffic-0..calls`, each sending `add_item` after `add_item` (every few a
/// `place_order`) to any of `bases` until `stop`.
async fn traffic(
    bases: Vec<String>,
    key: String,
    calls: usize,
    stop: Arc<AtomicBool>,
) -> Vec<(String, Answers, u64, u64)> {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(40))
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
            let call = format!("traffic-{c}");
            until_ok(
                &client,
                &bases,
                &key,
                Method::POST,
                "/v1/calls",
                Some(json!({"call_id": call})),
            )
            .await;
            let (mut answers, mut sent, mut lost) = (Answers::new(), 0u64, 0u64);
            let mut i = 0;
            while !stop.load(Ordering::Relaxed) {
                i += 1;
                let fc = format!("{call}-{i}");
                let tool = if i % 5 == 0 {
                    "place_order"
                } else {
                    "add_item"
                };
                let item = format!("{fc}-{tool}");
                let body =
                    json!({"function_call_id": fc, "name": tool, "arguments": {"item": item}});
                sent += 1;
                match invoke_until_answered(
                    &client,
                    &bases,
                    &key,
                    &call,
                    &body,
                    Duration::from_secs(90),
                )
                .await
                {
                    Some(a) => {
                        answers.insert(fc, (tool.to_owned(), item, a));
                    }
                    None => lost += 1,
                }
            }
            (call, answers, sent, lost)
        }));
    }
    let mut out = Vec::new();
    for w in workers {
        out.push(w.await.unwrap());
    }
    out
}

/// Checks each call's stored writes against its answers.
async fn settle(
    totals: &mut Totals,
    bases: &[String],
    key: &str,
    calls: Vec<(String, Answers, u64, u64)>,
) -> u64 {
    let client = reqwest::Client::new();
    let mut errors = 0;
    for (call, answers, sent, lost) in calls {
        totals.invocations += sent;
        totals.answers_lost += lost;
        errors += answers.values().filter(|(_, _, a)| a["ok"] != true).count() as u64;
        let view = until_ok(
            &client,
            bases,
            key,
            Method::GET,
            &format!("/v1/calls/{call}"),
            None,
        )
        .await;
        check_writes(totals, &answers, &view["context"]);
        if view["invocations_total"] != answers.len() {
            eprintln!(
                "{call}: {} records for {} answers",
                view["invocations_total"],
                answers.len()
            );
            totals.answers_lost += 1;
        }
    }
    errors
}

/// Restarts the machine's PostgreSQL cluster (as CI's root may).
fn restart_postgres() {
    let version = std::fs::read_dir("/etc/postgresql")
        .expect("PostgreSQL's clusters in /etc/postgresql (Debian's postgresql-common)")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .min()
        .expect("a PostgreSQL cluster");
    let status = std::process::Command::new("pg_ctlcluster")
        .args(["--skip-systemctl-redirect", &version, "main", "restart"])
        .status()
        .expect("pg_ctlcluster (run the suite as root, as CI does)");
    assert!(status.success(), "pg_ctlcluster restart: {status}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_restarted_mid_call() {
    let _serial = SERIAL.lock().await;
    with_postgres(|database| async move {
        let dir = TempDir::new();
        let upstream = Upstream::start().await;
        let extra: Vec<String> = ["--lease-ms", "4000", "--commit-retry-ms", "8000"]
            .map(str::to_owned)
            .to_vec();
        let a = Serve::start_with(&database, dir.path(), "a", &extra, None).await;
        let admin = a.admin_key();
        let key = tenant(&a, &admin, &upstream.url).await;
        let b = Serve::start_with(&database, dir.path(), "b", &extra, None).await;
        let bases = vec![a.base.clone(), b.base.clone()];
        let stop = Arc::new(AtomicBool::new(false));
        let running = tokio::spawn(traffic(bases.clone(), key.clone(), 4, Arc::clone(&stop)));
        let mut totals = Totals::default();
        for _ in 0..2 {
            tokio::time::sleep(Duration::from_millis(1500)).await;
            tokio::task::spawn_blocking(restart_postgres).await.unwrap();
            totals.faults += 1;
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
        stop.store(true, Ordering::Relaxed);
        let calls = running.await.unwrap();
        let errors = settle(&mut totals, &bases, &key, calls).await;
        eprintln!(
            "postgres_restarted_mid_call: {errors} answers were errors (the database was down)"
        );
        drop((a, b));
        totals.report("postgres_restarted_mid_call");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_locked_by_another_process() {
    let _serial = SERIAL.lock().await;
    bounded(async {
        let dir = TempDir::new();
        let file = dir.path().join("switchboard.db");
        let database = format!("sqlite://{}", file.display());
        let upstream = Upstream::start().await;
        let node = Serve::start(&database, dir.path(), "a").await;
        let admin = node.admin_key();
        let key = tenant(&node, &admin, &upstream.url).await;
        let bases = vec![node.base.clone()];
        let stop = Arc::new(AtomicBool::new(false));
        let running = tokio::spawn(traffic(bases.clone(), key.clone(), 3, Arc::clone(&stop)));
        let mut totals = Totals::default();
        // Another process takes the database's exclusive lock and holds it: longer than the
        // node's commit retry the second time.
        for hold in ["1.5", "6"] {
            tokio::time::sleep(Duration::from_millis(800)).await;
            let script = format!(
                "import sqlite3, time\nc = sqlite3.connect({path:?}, isolation_level=None, timeout=30)\nc.execute('BEGIN EXCLUSIVE')\ntime.sleep({hold})\nc.execute('COMMIT')\n",
                path = file.display().to_string()
            );
            let status = tokio::process::Command::new("python3")
                .args(["-c", &script])
                .status()
                .await
                .expect("python3");
            assert!(status.success(), "the locking process: {status}");
            totals.faults += 1;
        }
        tokio::time::sleep(Duration::from_millis(800)).await;
        stop.store(true, Ordering::Relaxed);
        let calls = running.await.unwrap();
        let errors = settle(&mut totals, &bases, &key, calls).await;
        eprintln!("sqlite_locked_by_another_process: {errors} answers were errors (the database was locked)");
        drop(node);
        totals.report("sqlite_locked_by_another_process");
    })
    .await;
}
