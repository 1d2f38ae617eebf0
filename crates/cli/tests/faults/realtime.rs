//! Realtime calls under faults, against the simulator of OpenAI's Realtime SIP API: the node
//! serving a call killed with SIGKILL while a write tool runs (another node takes the call
//! over, re-attaches its WebSocket and answers the pending function call), the socket dropped
//! (re-attached), and closed normally (the line ends, nothing re-attached).

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use switchboard_sim::{ModelHandle, Simulator};

use crate::support::{Serve, TempDir, with_postgres};
use crate::upstream::Upstream;
use crate::{Kills, SERIAL, Totals, tenant};

const OPENAI_KEY: &str = "sk-tenant-openai";
const SECRET: &str = "whsec_c2VjcmV0LWtleS1mb3ItdGVzdGluZy13ZWJob29rcy0xMjM0NTY=";
const NUMBER: &str = "+18005550100";
const CALLER: &str = "+14155550123";
const ROUNDS: usize = 3;
const WAIT: Duration = Duration::from_secs(20);

/// One model response asking for one function call, completed.
async fn ask(m: &mut ModelHandle, fc: &str, name: &str, args: Value) {
    let r = m.start_response().await;
    m.function_call(&r, fc, name, &args.to_string()).await;
    m.finish_response(&r, "completed").await;
}

/// Waits until the simulator has `n` outputs for `fc` on the call (any attachment).
async fn outputs_for(sim: &Simulator, call: &str, fc: &str, limit: Duration) -> Vec<String> {
    let deadline = Instant::now() + limit;
    loop {
        let outs: Vec<String> = sim
            .outputs(call)
            .into_iter()
            .filter(|(id, _)| id == fc)
            .map(|(_, o)| o)
            .collect();
        if !outs.is_empty() || Instant::now() >= deadline {
            return outs;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn realtime_node_killed_dropped_and_closed() {
    let _serial = SERIAL.lock().await;
    with_postgres(|database| async move {
        let dir = TempDir::new();
        let upstream = Upstream::start().await;
        let sim = Simulator::start().await.expect("simulator");
        sim.set_api_key(OPENAI_KEY);
        let extra: Vec<String> = ["--lease-ms", "1000", "--openai-api-base", &sim.base_url()]
            .map(str::to_owned)
            .to_vec();
        let a = Serve::start_with(&database, dir.path(), "a", &extra, None).await;
        let admin = a.admin_key();
        let key = tenant(&a, &admin, &upstream.url).await;
        a.put(
            "/v1/features",
            &key,
            json!({"realtime": {"phone_numbers": {NUMBER: "assistant"}}}),
        )
        .await;
        for (name, value) in [
            ("openai_api_key", OPENAI_KEY),
            ("openai_webhook_secret", SECRET),
        ] {
            let client = reqwest::Client::new();
            let r = client
                .put(format!("{}/v1/secrets/{name}", a.base))
                .bearer_auth(&key)
                .json(&json!({"value": value}))
                .send()
                .await
                .unwrap();
            assert!(r.status().is_success(), "{name}: {}", r.status());
        }
        let b = Serve::start_with(&database, dir.path(), "b", &extra, None).await;
        let mut nodes = [a, b];
        let kills = Kills::default();
        let mut totals = Totals::default();
        for round in 0..ROUNDS {
            let owner = round % 2;
            let call = format!("rtc_{round}");
            let webhook = format!("{}/v1/realtime/webhook/acme", nodes[owner].base);
            let status = sim
                .send_incoming_call(&webhook, SECRET, &call, CALLER, NUMBER)
                .await
                .expect("webhook");
            assert_eq!(status, 200);
            let mut m = sim.model(&call, WAIT).await.expect("attached");
            ask(&mut m, "fc_item", "add_item", json!({"item": "one"})).await;
            totals.invocations += 1;
            // A slow write; its node dies while the upstream holds it.
            upstream.set_delay(Duration::from_millis(1500));
            let seen = upstream.requests();
            ask(
                &mut m,
                "fc_order",
                "place_order",
                json!({"item": format!("{call}-order")}),
            )
            .await;
            totals.invocations += 1;
            upstream.wait_requests(seen + 1, WAIT).await;
            nodes[owner].kill9();
            kills.now();
            totals.faults += 1;
            upstream.set_delay(Duration::from_millis(50));
            // The other node takes the call over (the lease runs out) and re-attaches.
            let mut m = sim
                .model(&call, WAIT)
                .await
                .expect("re-attached by the new owner");
            let outs = outputs_for(&sim, &call, "fc_order", WAIT).await;
            match outs.len() {
                0 => totals.answers_lost += 1,
                1 => assert!(outs[0].contains("Ordered"), "{outs:?}"),
                _ => totals.answers_duplicated += 1,
            }
            let port = nodes[owner].port;
            nodes[owner] = Serve::start_with(
                &database,
                dir.path(),
                &format!("{call}-restart"),
                &extra,
                Some(port),
            )
            .await;
            // The new owner answers as usual.
            ask(&mut m, "fc_after", "add_item", json!({"item": "two"})).await;
            totals.invocations += 1;
            // A dropped socket is re-attached; the call goes on.
            m.drop_connection().await;
            totals.faults += 1;
            let mut m = sim
                .model(&call, WAIT)
                .await
                .expect("re-attached after a drop");
            ask(&mut m, "fc_dropped", "add_item", json!({"item": "three"})).await;
            totals.invocations += 1;
            for fc in ["fc_item", "fc_after", "fc_dropped"] {
                match outputs_for(&sim, &call, fc, WAIT).await.len() {
                    0 => totals.answers_lost += 1,
                    1 => {}
                    _ => totals.answers_duplicated += 1,
                }
            }
            // A normal close ends the line: nothing re-attaches.
            m.close().await;
            totals.faults += 1;
            assert!(
                sim.model(&call, Duration::from_millis(1500))
                    .await
                    .is_none(),
                "{call}: the socket was attached again after a normal close"
            );
            // Exactly one output per function call, overall.
            let all = sim.outputs(&call);
            assert_eq!(all.len(), 4, "{call}: {all:?}");
        }
        totals.upstream_writes_duplicated = kills.unexplained_resends(&upstream);
        let violations = sim.violations();
        assert!(violations.is_empty(), "protocol violations: {violations:?}");
        drop(nodes);
        totals.report("realtime_node_killed_dropped_and_closed");
    })
    .await;
}
