//! Concurrent conflicting writes: `slowset` writes `profile.name` and `order_confirmed` after a
//! slow check while `fastset` makes `profile` a string. `slowset` cannot land whole, so it
//! lands not at all and says which path conflicted; appends of concurrent tools all land.

use std::collections::HashMap;
use std::time::Duration;

use reqwest::Method;
use serde_json::json;

use crate::support::{Serve, TempDir, bounded};
use crate::upstream::Upstream;
use crate::{SERIAL, Totals, check_writes, invoke_until_answered, tenant, until_ok};

const ROUNDS: usize = 25;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn conflicting_writes_land_whole_or_not_at_all() {
    let _serial = SERIAL.lock().await;
    bounded(async {
        let dir = TempDir::new();
        let database = format!("sqlite://{}", dir.path().join("switchboard.db").display());
        let upstream = Upstream::start().await;
        upstream.set_delay(Duration::from_millis(150));
        let node = Serve::start(&database, dir.path(), "a").await;
        let admin = node.admin_key();
        let key = tenant(&node, &admin, &upstream.url).await;
        let bases = vec![node.base.clone()];
        let client = reqwest::Client::new();
        let mut totals = Totals::default();
        for round in 0..ROUNDS {
            let call = format!("conflict-{round}");
            until_ok(&client, &bases, &key, Method::POST, "/v1/calls", Some(json!({"call_id": call}))).await;
            let slow = json!({"function_call_id": "slow", "name": "slowset", "arguments": {"name": "Ada"}});
            let fast = json!({"function_call_id": "fast", "name": "fastset", "arguments": {"profile": "vip"}});
            let items: Vec<_> = (0..4)
                .map(|i| json!({"function_call_id": format!("add{i}"), "name": "add_item", "arguments": {"item": format!("{call}-{i}")}}))
                .collect();
            let slow_answer = invoke_until_answered(&client, &bases, &key, &call, &slow, Duration::from_secs(30));
            let others = async {
                tokio::time::sleep(Duration::from_millis(30)).await;
                let fast = invoke_until_answered(&client, &bases, &key, &call, &fast, Duration::from_secs(30)).await;
                let adds = futures_util::future::join_all(items.iter().map(|b| {
                    invoke_until_answered(&client, &bases, &key, &call, b, Duration::from_secs(30))
                }))
                .await;
                (fast, adds)
            };
            let (slow_answer, (fast_answer, adds)) = tokio::join!(slow_answer, others);
            totals.invocations += 2 + items.len() as u64;
            totals.faults += 1;
            let (Some(slow_answer), Some(fast_answer)) = (slow_answer, fast_answer) else {
                totals.answers_lost += 1;
                continue;
            };
            assert_eq!(fast_answer["ok"], true, "{fast_answer}");
            assert_eq!(slow_answer["ok"], false, "slowset cannot land whole: {slow_answer}");
            assert!(
                slow_answer["output"].as_str().unwrap().contains("profile.name"),
                "the answer names the path that conflicted: {slow_answer}"
            );
            let view = until_ok(&client, &bases, &key, Method::GET, &format!("/v1/calls/{call}"), None).await;
            let workflow = &view["context"]["workflow"];
            assert_eq!(workflow["profile"], "vip", "{view}");
            if !workflow["order_confirmed"].is_null() {
                eprintln!("{call}: half of slowset landed: {view}");
                totals.writes_duplicated += 1;
            }
            let mut answers = HashMap::new();
            for (i, a) in adds.into_iter().enumerate() {
                match a {
                    Some(a) => {
                        answers.insert(format!("add{i}"), ("add_item".to_owned(), format!("{call}-{i}"), a));
                    }
                    None => totals.answers_lost += 1,
                }
            }
            check_writes(&mut totals, &answers, &view["context"]);
        }
        drop(node);
        totals.report("conflicting_writes_land_whole_or_not_at_all");
    })
    .await;
}
