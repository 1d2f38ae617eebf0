//! Runtime overhead, measured end to end on loopback. Prints medians and percentiles; the
//! figures and the machine go to docs/benchmarks.md.
//!
//! `cargo bench -p switchboard-runtime --bench session`
//!
//! 1. One invocation at a time through a CallSession (submit → delivery), for a tool without I/O.
//! 2. Throughput with 1 and with 1,000 concurrent calls, each submitting invocations.
//! 3. An `api_call` through the executor against a raw reqwest request to the same loopback
//!    server, one at a time: the difference is what Switchboard adds.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use switchboard_core::{CallInfo, Limits, Tool};
use switchboard_runtime::effects::TransferLedger;
use switchboard_runtime::executor::{CallConfig, OpenGate};
use switchboard_runtime::http::{HttpConfig, HttpEffects};
use switchboard_runtime::session::SessionDeps;
use switchboard_runtime::{
    BoxFuture, CallSession, Delivery, Effects, Executor, Invocation, MemoryJournal, OutputSink,
    SessionOptions, ToolEntry,
};
use tokio::sync::mpsc;
use wiremock::{Mock, MockServer, ResponseTemplate};

struct ChannelSink(mpsc::UnboundedSender<Delivery>);

impl OutputSink for ChannelSink {
    fn deliver(&self, delivery: Delivery) -> BoxFuture<'_, ()> {
        let _ = self.0.send(delivery);
        Box::pin(async {})
    }
}

fn local_tool() -> Arc<Tool> {
    let def = json!({
        "name": "save_meal", "description": "Log a meal",
        "parameters": [
            {"name": "meal_type", "type": "string", "enum": ["breakfast", "lunch", "dinner"], "required": true},
            {"name": "dishes", "type": "array", "items": {"type": "string"}, "required": true}
        ],
        "actions": [
            {"type": "validate", "rules": [{"check": "params.dishes | length > 0", "message": "Ask which dishes."}]},
            {"type": "context.set", "data": {"last_meal": "{{params.meal_type}}"}},
            {"type": "flag.set", "flags": ["meal_logged"]}
        ],
        "on_success": [{"type": "respond", "message": "I've logged your {{params.meal_type}}!"}]
    });
    Arc::new(Tool::parse(&def, &Limits::default()).unwrap())
}

fn api_tool(url: &str) -> Arc<Tool> {
    let def = json!({"name": "lookup", "description": "d", "actions": [{"type": "api_call", "method": "GET", "url": url, "retry_count": 0}]});
    Arc::new(Tool::parse(&def, &Limits::default()).unwrap())
}

fn executor() -> Executor {
    let http = HttpEffects::new(HttpConfig {
        allow_private_networks: true,
        ..HttpConfig::default()
    })
    .unwrap();
    Executor::new(Arc::new(Effects::http_only(Arc::new(http))))
}

fn config(tool: Arc<Tool>) -> Arc<CallConfig> {
    let mut config = CallConfig {
        tenant_id: "bench".into(),
        ..CallConfig::default()
    };
    config.agents.insert(
        "main".into(),
        HashMap::from([(tool.name().to_owned(), ToolEntry::new(tool))]),
    );
    Arc::new(config)
}

async fn session(
    id: &str,
    config: Arc<CallConfig>,
    executor: Executor,
) -> (CallSession, mpsc::UnboundedReceiver<Delivery>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let deps = SessionDeps {
        config,
        executor,
        sink: Arc::new(ChannelSink(tx)),
        journal: Arc::new(MemoryJournal::default()),
        options: SessionOptions::default(),
    };
    let call = CallInfo {
        id: id.into(),
        tenant_id: "bench".into(),
        agent: "main".into(),
        from: None,
        to: None,
        started_at: "2026-11-23T00:00:00Z".into(),
    };
    (
        CallSession::start(call, json!({"id": "u1"}), deps)
            .await
            .unwrap(),
        rx,
    )
}

fn invocation(call: &str, n: usize) -> Invocation {
    Invocation {
        call_id: call.into(),
        function_call_id: format!("fc{n}"),
        name: "save_meal".into(),
        arguments_json: r#"{"meal_type":"lunch","dishes":["soup"]}"#.into(),
        response_id: None,
        item_id: None,
    }
}

struct Stats(Vec<Duration>);

impl Stats {
    fn pct(&self, p: f64) -> f64 {
        let mut v = self.0.clone();
        v.sort();
        let i = ((v.len() as f64 - 1.0) * p).round() as usize;
        v[i].as_secs_f64() * 1e6
    }

    fn line(&self, name: &str) {
        println!(
            "{name:<44} n={:<6} p50={:>8.1} µs  p90={:>8.1} µs  p99={:>8.1} µs  max={:>8.1} µs",
            self.0.len(),
            self.pct(0.5),
            self.pct(0.9),
            self.pct(0.99),
            self.pct(1.0)
        );
    }
}

async fn one_at_a_time() {
    let (s, mut rx) = session("c1", config(local_tool()), executor()).await;
    let mut times = Vec::new();
    for n in 0..20_000 {
        let t = Instant::now();
        s.submit(invocation("c1", n));
        let d = rx.recv().await.unwrap();
        times.push(t.elapsed());
        assert!(d.result.ok);
    }
    Stats(times[2_000..].to_vec()).line("session: one invocation at a time (no I/O)");
    s.end().await;
}

async fn throughput(calls: usize, per_call: usize) {
    let cfg = config(local_tool());
    let exec = executor();
    let mut sessions = Vec::new();
    for c in 0..calls {
        sessions.push(session(&format!("call{c}"), Arc::clone(&cfg), exec.clone()).await);
    }
    let started = Instant::now();
    let mut waiters = Vec::new();
    for (c, (s, mut rx)) in sessions.into_iter().enumerate() {
        waiters.push(tokio::spawn(async move {
            let call = format!("call{c}");
            let mut latencies = Vec::with_capacity(per_call);
            // Each call keeps a few function calls in flight, as parallel tool calls do.
            let window = 4;
            let mut sent = Vec::with_capacity(per_call);
            for n in 0..window.min(per_call) {
                sent.push(Instant::now());
                s.submit(invocation(&call, n));
            }
            let mut next = window.min(per_call);
            for _ in 0..per_call {
                let d = rx.recv().await.unwrap();
                let n: usize = d.result.function_call_id[2..].parse().unwrap();
                latencies.push(sent[n].elapsed());
                if next < per_call {
                    sent.push(Instant::now());
                    s.submit(invocation(&call, next));
                    next += 1;
                }
            }
            s.end().await;
            latencies
        }));
    }
    let mut all = Vec::new();
    for w in waiters {
        all.extend(w.await.unwrap());
    }
    let elapsed = started.elapsed();
    let total = calls * per_call;
    println!(
        "{:<44} {total} invocations in {:.2} s = {:.0} invocations/s",
        format!("throughput: {calls} concurrent calls"),
        elapsed.as_secs_f64(),
        total as f64 / elapsed.as_secs_f64()
    );
    Stats(all).line(&format!("  latency under load ({calls} calls)"));
}

/// Many calls each making a tool call every `period`: live traffic rather than saturation.
async fn paced(calls: usize, period: Duration, rounds: usize) {
    let cfg = config(local_tool());
    let exec = executor();
    let mut sessions = Vec::new();
    for c in 0..calls {
        sessions.push(session(&format!("paced{c}"), Arc::clone(&cfg), exec.clone()).await);
    }
    let mut waiters = Vec::new();
    for (c, (s, mut rx)) in sessions.into_iter().enumerate() {
        waiters.push(tokio::spawn(async move {
            let call = format!("paced{c}");
            // Spread the calls' phases over the period.
            tokio::time::sleep(period.mul_f64(c as f64 / calls as f64)).await;
            let mut ticker = tokio::time::interval(period);
            let mut latencies = Vec::with_capacity(rounds);
            for n in 0..rounds {
                ticker.tick().await;
                let t = Instant::now();
                s.submit(invocation(&call, n));
                rx.recv().await.unwrap();
                latencies.push(t.elapsed());
            }
            s.end().await;
            latencies
        }));
    }
    let mut all = Vec::new();
    for w in waiters {
        all.extend(w.await.unwrap());
    }
    let rate = calls as f64 / period.as_secs_f64();
    Stats(all).line(&format!("paced: {calls} calls, {rate:.0} invocations/s"));
}

async fn api_call_overhead() {
    let server = MockServer::start().await;
    Mock::given(wiremock::matchers::any())
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"ok": true})))
        .mount(&server)
        .await;
    let url = format!("{}/item", server.uri());
    let client = reqwest::Client::new();
    let tool = api_tool(&url);
    let cfg = config(Arc::clone(&tool));
    let exec = executor();
    let ctx = switchboard_core::Context::new(
        &CallInfo {
            id: "c".into(),
            tenant_id: "bench".into(),
            agent: "main".into(),
            from: None,
            to: None,
            started_at: "x".into(),
        },
        Value::Object(Default::default()),
    );
    let ledger = TransferLedger::default();
    let rounds = 5_000;
    let (mut raw, mut ours) = (Vec::new(), Vec::new());
    // Interleaved, so both see the same machine and server state.
    for n in 0..rounds {
        let t = Instant::now();
        let r = client
            .get(&url)
            .header("idempotency-key", format!("k{n}"))
            .send()
            .await
            .unwrap();
        let _: Value = r.json().await.unwrap();
        raw.push(t.elapsed());
        let inv = Invocation {
            call_id: "c".into(),
            function_call_id: format!("f{n}"),
            name: "lookup".into(),
            arguments_json: "{}".into(),
            response_id: None,
            item_id: None,
        };
        let t = Instant::now();
        let e = exec.execute(&cfg, &ctx, &inv, &OpenGate, &ledger).await;
        ours.push(t.elapsed());
        assert!(e.outcome.ok());
    }
    let (raw, ours) = (Stats(raw[500..].to_vec()), Stats(ours[500..].to_vec()));
    raw.line("api_call: raw reqwest GET (loopback)");
    ours.line("api_call: through the executor");
    println!(
        "{:<44} p50 +{:.1} µs, p90 +{:.1} µs",
        "  added by Switchboard",
        ours.pct(0.5) - raw.pct(0.5),
        ours.pct(0.9) - raw.pct(0.9)
    );

    // The same call through a whole session: checkpoint at the effect, commit, journal, sink.
    let (s, mut rx) = session("c", cfg, exec).await;
    let mut via = Vec::new();
    for n in 0..rounds {
        let inv = Invocation {
            call_id: "c".into(),
            function_call_id: format!("s{n}"),
            name: "lookup".into(),
            arguments_json: "{}".into(),
            response_id: None,
            item_id: None,
        };
        let t = Instant::now();
        s.submit(inv);
        rx.recv().await.unwrap();
        via.push(t.elapsed());
    }
    let via = Stats(via[500..].to_vec());
    via.line("api_call: through a session (checkpointed)");
    s.end().await;
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        one_at_a_time().await;
        throughput(1, 50_000).await;
        throughput(1_000, 100).await;
        paced(1_000, Duration::from_millis(200), 15).await;
        api_call_overhead().await;
    });
}
