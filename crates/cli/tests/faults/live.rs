//! A GPT-Live call under faults, against the simulator's GPT-Live side: the node serving the
//! call killed with SIGKILL while the backend's write tool runs (another node takes the call
//! over through its `live` door, re-attaches the sideband, answers the pending function call
//! once and continues the backend once), then the sideband dropped (re-attached).

use std::time::{Duration, Instant};

use serde_json::json;
use switchboard_sim::{LiveSim, Simulator};

use crate::support::{Serve, TempDir, with_postgres};
use crate::upstream::Upstream;
use crate::{Kills, SERIAL, Totals, tenant};

const OPENAI_KEY: &str = "sk-tenant-openai";
const SECRET: &str = "whsec_c2VjcmV0LWtleS1mb3ItdGVzdGluZy13ZWJob29rcy0xMjM0NTY=";
const NUMBER: &str = "+18005550177";
const CALLER: &str = "+14155550123";
const WAIT: Duration = Duration::from_secs(20);

/// The outputs sent for `call` so far, once there is one (or `limit` passed).
async fn outputs_for(live: &LiveSim, session: &str, call: &str, limit: Duration) -> Vec<String> {
    let deadline = Instant::now() + limit;
    loop {
        let outs: Vec<String> = live
            .outputs(session)
            .into_iter()
            .filter(|(id, _)| id == call)
            .map(|(_, o)| o)
            .collect();
        if !outs.is_empty() || Instant::now() >= deadline {
            return outs;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn live_node_killed_and_sideband_dropped() {
    let _serial = SERIAL.lock().await;
    with_postgres(|database| async move {
        let dir = TempDir::new();
        let upstream = Upstream::start().await;
        let sim = Simulator::start().await.expect("simulator");
        sim.set_api_key(OPENAI_KEY);
        let live = sim.live();
        let extra: Vec<String> = ["--lease-ms", "1000", "--openai-api-base", &sim.base_url()]
            .map(str::to_owned)
            .to_vec();
        let a = Serve::start_with(&database, dir.path(), "a", &extra, None).await;
        let admin = a.admin_key();
        let key = tenant(&a, &admin, &upstream.url).await;
        a.put(
            "/v1/features",
            &key,
            json!({"realtime": {"api": "live", "phone_numbers": {NUMBER: "assistant"}}}),
        )
        .await;
        for (name, value) in [
            ("openai_api_key", OPENAI_KEY),
            ("openai_webhook_secret", SECRET),
        ] {
            let r = reqwest::Client::new()
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
        let session = "live_fault";
        let webhook = format!("{}/v1/realtime/webhook/acme", nodes[0].base);
        let status = live
            .send_incoming(&webhook, SECRET, session, CALLER, NUMBER, false)
            .await
            .expect("webhook");
        assert_eq!(status, 200);
        let backend = live.backend(session, WAIT).await.expect("attached");
        // A slow write; its node dies while the upstream holds it.
        upstream.set_delay(Duration::from_millis(1500));
        let seen = upstream.requests();
        let calls = backend.call_tools(&[
            ("place_order", json!({"item": "live-order"})),
            ("add_item", json!({"item": "one"})),
        ]);
        totals.invocations += 2;
        upstream.wait_requests(seen + 1, WAIT).await;
        nodes[0].kill9();
        kills.now();
        totals.faults += 1;
        upstream.set_delay(Duration::from_millis(50));
        // The other node takes the call over and re-attaches the sideband.
        let backend = live
            .backend(session, WAIT)
            .await
            .expect("re-attached by the new owner");
        for call in &calls {
            match outputs_for(&live, session, call, WAIT).await.len() {
                0 => totals.answers_lost += 1,
                1 => {}
                _ => totals.answers_duplicated += 1,
            }
        }
        assert!(
            backend.wait_continued(&calls[0], WAIT).await,
            "the backend is continued after the takeover"
        );
        // A dropped sideband is re-attached; the call goes on.
        backend.drop_connection().await;
        totals.faults += 1;
        let backend = live.backend(session, WAIT).await.expect("re-attached");
        let after = backend.call_tools(&[("add_item", json!({"item": "two"}))]);
        totals.invocations += 1;
        match outputs_for(&live, session, &after[0], WAIT).await.len() {
            0 => totals.answers_lost += 1,
            1 => {}
            _ => totals.answers_duplicated += 1,
        }
        assert!(backend.wait_continued(&after[0], WAIT).await);
        assert_eq!(
            live.outputs(session).len(),
            3,
            "{:?}",
            live.outputs(session)
        );
        totals.upstream_writes_duplicated = kills.unexplained_resends(&upstream);
        let violations = live.violations();
        assert!(violations.is_empty(), "protocol violations: {violations:?}");
        drop(nodes);
        totals.report("live_node_killed_and_sideband_dropped");
    })
    .await;
}
