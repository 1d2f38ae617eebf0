//! Three nodes on one PostgreSQL database; calls whose function calls, repeats and cancels go
//! to any node at random (behind a load balancer, say) while a node is killed with SIGKILL and
//! restarted every couple of seconds.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use reqwest::Method;
use serde_json::{Value, json};

use crate::support::{Serve, TempDir, with_postgres_within};
use crate::upstream::Upstream;
use crate::{Kills, SERIAL, Totals, check_writes, invoke_until_answered, tenant, until_ok};

const CALLS: usize = 32;
const LEASE: &str = "1000";

/// Function calls in all (`SWITCHBOARD_FAULTS_INVOCATIONS`, default 10,200).
fn invocations() -> usize {
    std::env::var("SWITCHBOARD_FAULTS_INVOCATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_200)
}

/// One call's function calls: (tool, argument, answer) by function call id.
type Answers = HashMap<String, (String, String, Value)>;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_nodes_with_kills_random_spread() {
    let _serial = SERIAL.lock().await;
    let started = std::time::Instant::now();
    with_postgres_within(Duration::from_secs(900), move |database| async move {
        let dir = TempDir::new();
        let upstream = Upstream::start().await;
        upstream.set_delay(Duration::from_millis(40));
        let extra = vec!["--lease-ms".to_owned(), LEASE.to_owned()];
        let first = Serve::start_with(&database, dir.path(), "n0", &extra, None).await;
        let admin = first.admin_key();
        let key = tenant(&first, &admin, &upstream.url).await;
        let mut nodes = vec![first];
        for i in 1..3 {
            nodes.push(
                Serve::start_with(&database, dir.path(), &format!("n{i}"), &extra, None).await,
            );
        }
        let bases: Vec<String> = nodes.iter().map(|n| n.base.clone()).collect();
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(40))
            .build()
            .unwrap();

        // The killer: a random node, SIGKILL, restarted on its address, again and again.
        let kills = Kills::default();
        let stop = Arc::new(AtomicBool::new(false));
        let killer = tokio::spawn({
            let (kills, stop, database, extra) = (
                kills.clone(),
                Arc::clone(&stop),
                database.clone(),
                extra.clone(),
            );
            let dir = dir.path().to_owned();
            async move {
                let mut round = 0;
                while !stop.load(Ordering::Relaxed) {
                    tokio::time::sleep(Duration::from_millis(1500 + fastrand::u64(..1500))).await;
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    let i = fastrand::usize(..nodes.len());
                    nodes[i].kill9();
                    kills.now();
                    round += 1;
                    let name = format!("n{i}-r{round}");
                    let port = nodes[i].port;
                    nodes[i] = Serve::start_with(&database, &dir, &name, &extra, Some(port)).await;
                }
                nodes
            }
        });

        let per_call = invocations().div_ceil(CALLS);
        let mut workers = Vec::new();
        for c in 0..CALLS {
            let (client, bases, key) = (client.clone(), bases.clone(), key.clone());
            workers.push(tokio::spawn(async move {
                let call = format!("chaos-{c}");
                until_ok(
                    &client,
                    &bases,
                    &key,
                    Method::POST,
                    "/v1/calls",
                    Some(json!({"call_id": call})),
                )
                .await;
                let answers = converse(&client, &bases, &key, &call, per_call).await;
                (call, answers)
            }));
        }
        let mut totals = Totals::default();
        let mut calls = Vec::new();
        for w in workers {
            let (call, (answers, sent, lost, duplicated)) = w.await.unwrap();
            totals.invocations += sent;
            totals.answers_lost += lost;
            totals.answers_duplicated += duplicated;
            calls.push((call, answers));
        }
        stop.store(true, Ordering::Relaxed);
        let nodes = killer.await.unwrap();
        totals.faults = kills.count();

        for (call, answers) in &calls {
            let view = until_ok(
                &client,
                &bases,
                &key,
                Method::GET,
                &format!("/v1/calls/{call}"),
                None,
            )
            .await;
            check_writes(&mut totals, answers, &view["context"]);
            let recorded = view["invocations_total"].as_u64().unwrap();
            let answered = u64::try_from(answers.len()).unwrap();
            if recorded != answered {
                eprintln!("{call}: {recorded} records for {answered} answered function calls");
                totals.answers_lost += answered.abs_diff(recorded);
            }
        }
        totals.upstream_writes_duplicated = kills.unexplained_resends(&upstream);
        drop(nodes);
        eprintln!(
            "three_nodes_with_kills_random_spread: {} function calls in {:.0} s",
            totals.invocations,
            started.elapsed().as_secs_f64()
        );
        totals.report("three_nodes_with_kills_random_spread");
        assert!(
            totals.invocations >= u64::try_from(invocations()).unwrap(),
            "{totals:?}"
        );
    })
    .await;
}

/// Plays one call's model: turns of one to three parallel function calls, now and then a
/// repeat of an earlier one (which must get the same answer) and a cancel of the turn's
/// response. Returns the answers, the function calls sent, and how many were never answered
/// or answered differently on a repeat.
async fn converse(
    client: &reqwest::Client,
    bases: &[String],
    key: &str,
    call: &str,
    budget: usize,
) -> (Answers, u64, u64, u64) {
    let mut answers: Answers = HashMap::new();
    let (mut sent, mut lost, mut duplicated) = (0u64, 0u64, 0u64);
    let mut turn = 0;
    while usize::try_from(sent).unwrap() < budget {
        turn += 1;
        let response = format!("{call}-r{turn}");
        let n = 1 + fastrand::usize(..3);
        let mut batch = Vec::new();
        for k in 0..n {
            let fc = format!("{call}-t{turn}-{k}");
            let (tool, arg_name) = match fastrand::u8(..10) {
                0..=4 => ("add_item", "item"),
                5..=7 => ("lookup", "q"),
                _ => ("place_order", "item"),
            };
            let arg = format!("{fc}-{tool}");
            let body = json!({"function_call_id": fc, "name": tool,
                              "arguments": {arg_name: arg}, "response_id": response});
            batch.push((fc, tool.to_owned(), arg, body));
        }
        let cancel = fastrand::u8(..100) < 8;
        let sends = batch.iter().map(|(_, _, _, body)| {
            invoke_until_answered(client, bases, key, call, body, Duration::from_secs(90))
        });
        let cancel_path = format!("/v1/calls/{call}/responses/{response}/cancel");
        let (results, _) = tokio::join!(futures_util::future::join_all(sends), async {
            if cancel {
                tokio::time::sleep(Duration::from_millis(5)).await;
                until_ok(client, bases, key, Method::POST, &cancel_path, None).await;
            }
        });
        for ((fc, tool, arg, _), answer) in batch.into_iter().zip(results) {
            sent += 1;
            match answer {
                Some(a) => {
                    answers.insert(fc, (tool, arg, a));
                }
                None => {
                    eprintln!("{fc}: never answered");
                    lost += 1;
                }
            }
        }
        // A repeat of an earlier function call (a client's retry): the first answer again.
        if fastrand::u8(..100) < 10 && !answers.is_empty() {
            let (fc, (tool, arg, first)) = answers
                .iter()
                .nth(fastrand::usize(..answers.len()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .unwrap();
            let arg_name = if tool == "lookup" { "q" } else { "item" };
            let body = json!({"function_call_id": fc, "name": tool, "arguments": {arg_name: arg}});
            match invoke_until_answered(client, bases, key, call, &body, Duration::from_secs(90))
                .await
            {
                Some(again) if again["output"] == first["output"] => {}
                Some(again) => {
                    eprintln!("{fc}: answered {first} and then {again}");
                    duplicated += 1;
                }
                None => lost += 1,
            }
        }
    }
    (answers, sent, lost, duplicated)
}
