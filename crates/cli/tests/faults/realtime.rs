//! Realtime calls under faults, against the simulator of OpenAI's Realtime SIP API: the node
//! serving a call killed with SIGKILL while a write tool runs (another node takes the call
//! over, re-attaches its WebSocket and answers the pending function call), the socket dropped
//! (re-attached), and closed normally (the line ends, nothing re-attached).

use std::time::Duration;

use serde_json::{Value, json};
use switchboard_sim::ModelHandle;

use crate::phone::{self, CALLER, SECRET, WAIT, outputs_for};
use crate::support::{Serve, TempDir, with_postgres};
use crate::{Kills, SERIAL, Totals};

const NUMBER: &str = "+18005550100";
const ROUNDS: usize = 3;

/// One model response asking for one function call, completed.
async fn ask(m: &mut ModelHandle, fc: &str, name: &str, args: Value) {
    let r = m.start_response().await;
    m.function_call(&r, fc, name, &args.to_string()).await;
    m.finish_response(&r, "completed").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn realtime_node_killed_dropped_and_closed() {
    let _serial = SERIAL.lock().await;
    with_postgres(|database| async move {
        let dir = TempDir::new();
        let phone::Phones {
            upstream,
            sim,
            extra,
            nodes,
        } = phone::start(
            &database,
            dir.path(),
            json!({"phone_numbers": {NUMBER: "assistant"}}),
        )
        .await;
        let mut nodes = nodes;
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
            // The quick write is answered before the slow one is asked, so the node dies with
            // exactly the slow one in flight. Killed any earlier, the quick one can fall into a
            // known gap: an answer journaled but not yet on the socket when the node dies is not
            // sent again by the new owner (it cannot tell whether the model got it), and a call
            // received but not yet claimed is recorded nowhere.
            outputs_for(|| sim.outputs(&call), "fc_item", WAIT).await;
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
            let outs = outputs_for(|| sim.outputs(&call), "fc_order", WAIT).await;
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
                match outputs_for(|| sim.outputs(&call), fc, WAIT).await.len() {
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
