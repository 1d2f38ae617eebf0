//! A GPT-Live call under faults, against the simulator's GPT-Live side: the node serving the
//! call killed with SIGKILL while the backend's write tool runs (another node takes the call
//! over through its `live` door, re-attaches the sideband, answers the pending function call
//! once and continues the backend once), then the sideband dropped (re-attached).

use std::time::Duration;

use serde_json::json;

use crate::phone::{self, CALLER, SECRET, WAIT, outputs_for};
use crate::support::{TempDir, with_postgres};
use crate::{Kills, SERIAL, Totals};

const NUMBER: &str = "+18005550177";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn live_node_killed_and_sideband_dropped() {
    let _serial = SERIAL.lock().await;
    with_postgres(|database| async move {
        let dir = TempDir::new();
        let phone::Phones {
            upstream,
            sim,
            nodes,
            ..
        } = phone::start(
            &database,
            dir.path(),
            json!({"api": "live", "phone_numbers": {NUMBER: "assistant"}}),
        )
        .await;
        let mut nodes = nodes;
        let live = sim.live();
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
        // The quick write is answered first, so the node dies with exactly the slow one in
        // flight. (Killed any earlier, the quick one can fall into a known gap: a call the node
        // received but never claimed is recorded nowhere, and an answer journaled but not yet
        // on the socket is not sent again by the new owner.)
        outputs_for(|| live.outputs(session), &calls[1], WAIT).await;
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
            match outputs_for(|| live.outputs(session), call, WAIT)
                .await
                .len()
            {
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
        match outputs_for(|| live.outputs(session), &after[0], WAIT)
            .await
            .len()
        {
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
