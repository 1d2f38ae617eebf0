//! What the phone scenarios (Realtime and GPT-Live) share: two nodes on one PostgreSQL whose
//! OpenAI is the simulator, with a short lease so a dead node's call is taken over quickly,
//! tenant `acme` answering a number with `assistant`, and waiting for a call's outputs.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use switchboard_sim::Simulator;

use crate::support::Serve;
use crate::tenant;
use crate::upstream::Upstream;

pub(crate) const OPENAI_KEY: &str = "sk-tenant-openai";
pub(crate) const SECRET: &str = "whsec_c2VjcmV0LWtleS1mb3ItdGVzdGluZy13ZWJob29rcy0xMjM0NTY=";
pub(crate) const CALLER: &str = "+14155550123";
pub(crate) const WAIT: Duration = Duration::from_secs(20);

/// The phone scenario's world: the upstream the tools call, the simulator, and two nodes.
pub(crate) struct Phones {
    pub(crate) upstream: Upstream,
    pub(crate) sim: Simulator,
    /// The arguments every node starts with (a restarted one too).
    pub(crate) extra: Vec<String>,
    pub(crate) nodes: [Serve; 2],
}

/// Starts the simulator and two nodes; tenant `acme` gets `phone` as `features.realtime`
/// and its OpenAI secrets.
pub(crate) async fn start(database: &str, dir: &Path, phone: Value) -> Phones {
    let upstream = Upstream::start().await;
    let sim = Simulator::start().await.expect("simulator");
    sim.set_api_key(OPENAI_KEY);
    let extra: Vec<String> = ["--lease-ms", "1000", "--openai-api-base", &sim.base_url()]
        .map(str::to_owned)
        .to_vec();
    let a = Serve::start_with(database, dir, "a", &extra, None).await;
    let admin = a.admin_key();
    let key = tenant(&a, &admin, &upstream.url).await;
    a.put("/v1/features", &key, json!({ "realtime": phone }))
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
    let b = Serve::start_with(database, dir, "b", &extra, None).await;
    Phones {
        upstream,
        sim,
        extra,
        nodes: [a, b],
    }
}

/// The outputs sent for function call `call` so far (`outputs` lists a call's outputs as
/// (call, output)), once there is one or `limit` has passed.
pub(crate) async fn outputs_for(
    outputs: impl Fn() -> Vec<(String, String)>,
    call: &str,
    limit: Duration,
) -> Vec<String> {
    let deadline = Instant::now() + limit;
    loop {
        let outs: Vec<String> = outputs()
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
