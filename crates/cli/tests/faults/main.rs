//! The fault-injection suite: `switchboard serve` processes killed with SIGKILL mid-tool, again
//! and again; three nodes on one PostgreSQL with requests, repeats and cancels spread at random
//! while nodes die; PostgreSQL restarted mid-call; SQLite locked by another process; a Realtime
//! node and a GPT-Live node dying mid-call; concurrent conflicting writes.
//!
//! Each scenario counts what the model (the client) and the upstream saw and asserts the
//! promises: every function call answered (no answer lost), one answer per function call
//! (repeats get the same one), no upstream write run twice at once, no ok answer whose writes
//! were not stored and no write stored twice. Each prints one `FAULTS` line with its totals
//! (`docs/reliability.md` keeps a run's figures).
//!
//! The scenarios run one at a time (one of them restarts PostgreSQL).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "../support/mod.rs"]
mod support;
mod upstream;

mod chaos;
mod conflicts;
mod kills;
mod live;
mod mcp_swap;
mod outages;
mod phone;
mod realtime;
mod storage;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use support::Serve;

/// One scenario at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// What a scenario saw; every count but `invocations` and `faults` must be zero.
#[derive(Debug, Default)]
struct Totals {
    /// Function calls sent (each answered once, however often it was sent).
    invocations: u64,
    /// Faults injected: kills, restarts, locks, dropped sockets.
    faults: u64,
    /// Function calls never answered.
    answers_lost: u64,
    /// Function calls answered twice, or differently on a repeat.
    answers_duplicated: u64,
    /// Upstream writes sent again under one idempotency key with no node killed since the
    /// key's previous request: a write run twice.
    upstream_writes_duplicated: u64,
    /// Ok answers whose writes are not in the stored context.
    writes_lost: u64,
    /// Writes stored more than once.
    writes_duplicated: u64,
    /// Requests answered later than their tool's deadline plus the documented margin
    /// (`--commit-retry-ms` and a second), counted where a scenario measures it.
    answers_late: u64,
}

impl Totals {
    fn report(&self, scenario: &str) {
        eprintln!(
            "FAULTS {scenario}: invocations={} faults={} answers_lost={} answers_duplicated={} upstream_writes_duplicated={} writes_lost={} writes_duplicated={} answers_late={}",
            self.invocations,
            self.faults,
            self.answers_lost,
            self.answers_duplicated,
            self.upstream_writes_duplicated,
            self.writes_lost,
            self.writes_duplicated,
            self.answers_late
        );
        assert_eq!(
            (
                self.answers_lost,
                self.answers_duplicated,
                self.upstream_writes_duplicated,
                self.writes_lost,
                self.writes_duplicated,
                self.answers_late
            ),
            (0, 0, 0, 0, 0, 0),
            "{scenario}: {self:?}"
        );
        assert!(self.faults > 0, "{scenario} injected no fault");
    }
}

/// The tools every scenario's tenant has, writing to `upstream`.
fn tools(upstream: &str) -> Vec<Value> {
    vec![
        json!({"name": "add_item", "description": "Add an item to the list.",
               "parameters": [{"name": "item", "type": "string", "required": true}],
               "actions": [{"type": "context.set", "data": {"items[+]": "{{params.item}}"}}],
               "on_success": [{"type": "respond", "message": "Added {{params.item}}."}]}),
        json!({"name": "place_order", "description": "Order an item.",
               "parameters": [{"name": "item", "type": "string", "required": true}],
               "actions": [
                   {"type": "api_call", "method": "POST", "url": format!("{upstream}/orders"),
                    "body": {"item": "{{params.item}}"}, "timeout": 20, "retry_count": 0},
                   {"type": "context.set", "data": {"orders[+]": "{{params.item}}"}}
               ],
               "on_success": [{"type": "respond", "message": "Ordered {{params.item}}."}]}),
        json!({"name": "lookup", "description": "Look something up.",
               "parameters": [{"name": "q", "type": "string", "required": true}],
               "actions": [{"type": "api_call", "method": "GET", "url": format!("{upstream}/lookup"), "timeout": 10}],
               "on_success": [{"type": "respond", "message": "Found {{params.q}}."}]}),
        json!({"name": "slowset", "description": "Set the caller's name after a check.",
               "parameters": [{"name": "name", "type": "string", "required": true}],
               "actions": [
                   {"type": "api_call", "method": "POST", "url": format!("{upstream}/orders"),
                    "body": {"item": "{{params.name}}"}, "timeout": 20, "retry_count": 0},
                   {"type": "context.set", "data": {"profile.name": "{{params.name}}", "order_confirmed": true}}
               ],
               "on_success": [{"type": "respond", "message": "Saved."}]}),
        json!({"name": "fastset", "description": "Replace the profile.",
               "parameters": [{"name": "profile", "type": "string", "required": true}],
               "actions": [{"type": "context.set", "data": {"profile": "{{params.profile}}"}}],
               "on_success": [{"type": "respond", "message": "Replaced."}]}),
    ]
}

/// Makes tenant `acme` on `node` with the suite's tools on a default agent; returns its key.
async fn tenant(node: &Serve, admin: &str, upstream: &str) -> String {
    tenant_with(node, admin, tools(upstream)).await
}

/// [`tenant`] with `tools`.
async fn tenant_with(node: &Serve, admin: &str, tools: Vec<Value>) -> String {
    let key = node.tenant(admin, "acme").await;
    let entries: Vec<Value> = tools.iter().map(|t| json!({"tool": t["name"]})).collect();
    for t in tools {
        node.post("/v1/tools", &key, t).await;
    }
    node.put(
        "/v1/agents/assistant",
        &key,
        // The suite drives hundreds of function calls per call, faster than any conversation:
        // the runaway guards at their most lenient, so every one of them runs.
        json!({"instructions": "Help.", "default": true, "tools": entries,
            "guards": {"identical_calls": {"max": 1000, "window_s": 1}, "calls_per_minute": 10000}}),
    )
    .await;
    key
}

/// A model's side of a call over HTTP: sends a function call to one of `bases` (a random one
/// each try, as behind a load balancer) until it is answered, retrying the same function call
/// id on a 503, a 429 (after the wait it names) or a broken connection as a client does. `None`
/// when no answer came in `limit`.
async fn invoke_until_answered(
    client: &reqwest::Client,
    bases: &[String],
    key: &str,
    call: &str,
    body: &Value,
    limit: Duration,
) -> Option<Value> {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        let base = &bases[fastrand::usize(..bases.len())];
        let sent = client
            .post(format!("{base}/v1/calls/{call}/invocations"))
            .bearer_auth(key)
            .json(body)
            .send()
            .await;
        match sent {
            Ok(r) if r.status() == StatusCode::OK => {
                if let Ok(v) = r.json::<Value>().await {
                    return Some(v);
                }
            }
            Ok(r)
                if r.status() == StatusCode::SERVICE_UNAVAILABLE
                    || r.status() == StatusCode::GATEWAY_TIMEOUT => {}
            Ok(r) if r.status() == StatusCode::TOO_MANY_REQUESTS => {
                tokio::time::sleep(retry_after(r).await).await;
                continue;
            }
            Ok(r) => {
                let status = r.status();
                let text = r.text().await.unwrap_or_default();
                panic!("{call}: {status} {text} for {body}");
            }
            Err(_) => {}
        }
        tokio::time::sleep(Duration::from_millis(30 + fastrand::u64(..70))).await;
    }
    None
}

/// How long a rate-limited answer (429) asks a client to wait: its `retry_after_s`, as a client
/// honours it before sending the same request again (the request was refused before it reached
/// the call, so sending it again is safe).
async fn retry_after(r: reqwest::Response) -> Duration {
    let body: Value = r.json().await.unwrap_or(Value::Null);
    let secs = body["error"]["details"]["retry_after_s"]
        .as_u64()
        .unwrap_or(1);
    Duration::from_secs(secs.clamp(1, 5))
}

/// Sends a request that must succeed eventually (a call's start, its end, a cancel), on any
/// of `bases`, retrying unavailable and rate-limited answers and broken connections.
async fn until_ok(
    client: &reqwest::Client,
    bases: &[String],
    key: &str,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let base = &bases[fastrand::usize(..bases.len())];
        let mut req = client
            .request(method.clone(), format!("{base}{path}"))
            .bearer_auth(key);
        if let Some(b) = &body {
            req = req.json(b);
        }
        match req.send().await {
            Ok(r) if r.status().is_success() => return r.json().await.unwrap_or(Value::Null),
            Ok(r) if r.status() == StatusCode::SERVICE_UNAVAILABLE => {}
            Ok(r) if r.status() == StatusCode::TOO_MANY_REQUESTS => {
                tokio::time::sleep(retry_after(r).await).await;
            }
            Ok(r) => {
                let status = r.status();
                panic!(
                    "{method} {path}: {status} {}",
                    r.text().await.unwrap_or_default()
                );
            }
            Err(_) => {}
        }
        assert!(Instant::now() < deadline, "{method} {path} never succeeded");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// What a call's answers say, checked against what the call stored: every ok `add_item` and
/// `place_order` stored exactly once, every failed one not at all.
fn check_writes(
    totals: &mut Totals,
    answers: &HashMap<String, (String, String, Value)>,
    context: &Value,
) {
    let count = |list: &str, item: &str| {
        context["workflow"][list]
            .as_array()
            .map_or(0, |a| a.iter().filter(|v| v.as_str() == Some(item)).count())
    };
    for (tool, arg, answer) in answers.values() {
        let list = match tool.as_str() {
            "add_item" => "items",
            "place_order" => "orders",
            _ => continue,
        };
        let stored = count(list, arg);
        let ok = answer["ok"] == true;
        if ok && stored == 0 {
            eprintln!("write lost: {tool}({arg}) answered {answer}");
            totals.writes_lost += 1;
        }
        if stored > 1 || (!ok && stored > 0) {
            eprintln!("write stored {stored} times: {tool}({arg}) answered {answer}");
            totals.writes_duplicated += 1;
        }
    }
}

/// When nodes were killed, for telling a resumed write from a repeated one.
#[derive(Debug, Clone, Default)]
struct Kills(std::sync::Arc<std::sync::Mutex<Vec<Instant>>>);

impl Kills {
    fn now(&self) {
        self.0.lock().unwrap().push(Instant::now());
    }

    fn count(&self) -> u64 {
        u64::try_from(self.0.lock().unwrap().len()).unwrap()
    }

    /// Upstream writes sent again with no kill since the key's previous request.
    fn unexplained_resends(&self, upstream: &upstream::Upstream) -> u64 {
        upstream::resent_without_kill(&upstream.keys(), &self.0.lock().unwrap())
    }
}
