//! The owner of a call killed with SIGKILL while a slow write tool waits on its upstream, again
//! and again: the function call is answered once (by whichever node takes the call over), the
//! upstream write is sent again only under its idempotency key, and the call's context holds
//! every write once.

use std::collections::HashMap;
use std::time::Duration;

use reqwest::Method;
use serde_json::json;

use crate::support::{Serve, TempDir, with_postgres};
use crate::upstream::Upstream;
use crate::{Kills, SERIAL, Totals, check_writes, invoke_until_answered, tenant, until_ok};

const ROUNDS: usize = 6;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn owner_killed_mid_write_again_and_again() {
    let _serial = SERIAL.lock().await;
    with_postgres(|database| async move {
        let dir = TempDir::new();
        let upstream = Upstream::start().await;
        let extra = vec!["--lease-ms".to_owned(), "1000".to_owned()];
        let a = Serve::start_with(&database, dir.path(), "a", &extra, None).await;
        let admin = a.admin_key();
        let key = tenant(&a, &admin, &upstream.url).await;
        let b = Serve::start_with(&database, dir.path(), "b", &extra, None).await;
        let mut nodes = [a, b];
        let bases: Vec<String> = nodes.iter().map(|n| n.base.clone()).collect();
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(40))
            .build()
            .unwrap();
        let kills = Kills::default();
        let mut totals = Totals::default();

        for round in 0..ROUNDS {
            let owner = round % 2;
            let call = format!("kill-{round}");
            let mut answers = HashMap::new();
            // Started on `owner`: it owns the call.
            until_ok(&client, &bases[owner..=owner], &key, Method::POST, "/v1/calls", Some(json!({"call_id": call}))).await;
            let target = Target { client: &client, bases: &bases, key: &key, call: &call };
            for i in 0..10 {
                target.add_item(i, &mut totals, &mut answers).await;
            }
            // The slow write, sent to the owner; the owner dies while the upstream holds it.
            upstream.set_delay(Duration::from_millis(1500));
            let seen = upstream.requests();
            let order_fc = format!("{call}-order");
            let order = json!({"function_call_id": order_fc, "name": "place_order", "arguments": {"item": format!("{call}-order")}});
            let in_flight = tokio::spawn({
                let (client, url, key, order) = (client.clone(), format!("{}/v1/calls/{call}/invocations", bases[owner]), key.clone(), order.clone());
                async move {
                    let _ = client.post(url).bearer_auth(key).json(&order).send().await;
                }
            });
            upstream.wait_requests(seen + 1, Duration::from_secs(20)).await;
            nodes[owner].kill9();
            kills.now();
            in_flight.abort();
            upstream.set_delay(Duration::from_millis(100));
            // The client sends it again (to either node) while the owner restarts.
            let port = nodes[owner].port;
            let name = format!("{call}-restart");
            let (restarted, answer) = tokio::join!(
                Serve::start_with(&database, dir.path(), &name, &extra, Some(port)),
                invoke_until_answered(&client, &bases, &key, &call, &order, Duration::from_secs(60)),
            );
            nodes[owner] = restarted;
            totals.invocations += 1;
            match answer {
                Some(a) => {
                    assert_eq!(a["ok"], true, "{order_fc}: {a}");
                    answers.insert(order_fc.clone(), ("place_order".to_owned(), format!("{call}-order"), a));
                }
                None => totals.answers_lost += 1,
            }
            // Sent again once more: the same answer, from the record.
            if let (Some(again), Some((_, _, first))) = (
                invoke_until_answered(&client, &bases, &key, &call, &order, Duration::from_secs(60)).await,
                answers.get(&order_fc),
            ) && again["output"] != first["output"]
            {
                totals.answers_duplicated += 1;
            }
            for i in 10..20 {
                target.add_item(i, &mut totals, &mut answers).await;
            }
            let view = until_ok(&client, &bases, &key, Method::GET, &format!("/v1/calls/{call}"), None).await;
            check_writes(&mut totals, &answers, &view["context"]);
            assert_eq!(view["invocations_total"], answers.len(), "{view}");
            until_ok(&client, &bases, &key, Method::DELETE, &format!("/v1/calls/{call}"), None).await;
        }
        totals.faults = kills.count();
        totals.upstream_writes_duplicated = kills.unexplained_resends(&upstream);
        totals.report("owner_killed_mid_write_again_and_again");
    })
    .await;
}

/// Where a round's function calls go.
struct Target<'a> {
    client: &'a reqwest::Client,
    bases: &'a [String],
    key: &'a str,
    call: &'a str,
}

impl Target<'_> {
    /// `add_item` number `i` of the call, to either node.
    async fn add_item(
        &self,
        i: usize,
        totals: &mut Totals,
        answers: &mut HashMap<String, (String, String, serde_json::Value)>,
    ) {
        let (call, fc, item) = (
            self.call,
            format!("{}-a{i}", self.call),
            format!("{}-i{i}", self.call),
        );
        let body = json!({"function_call_id": fc, "name": "add_item", "arguments": {"item": item}});
        totals.invocations += 1;
        match invoke_until_answered(
            self.client,
            self.bases,
            self.key,
            call,
            &body,
            Duration::from_secs(60),
        )
        .await
        {
            Some(a) => {
                answers.insert(fc, ("add_item".to_owned(), item, a));
            }
            None => totals.answers_lost += 1,
        }
    }
}
