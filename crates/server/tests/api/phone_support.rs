//! What the phone tests of both doors share: a server whose OpenAI is the simulator (Realtime
//! and GPT-Live sides), tenant `acme` with its OpenAI key and webhook secret, an upstream for
//! the tools, and ringing a number through either API.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};
use switchboard_server::ServerConfig;
use switchboard_sim::{LiveBackend, LiveSim, ModelHandle, Simulator};
use wiremock::{Mock, MockServer};

use crate::support::{Backend, TestApp, refer, spawn_app_with};

pub(crate) const OPENAI_KEY: &str = "sk-tenant-openai";
/// `whsec_` + base64 of 32 bytes, as OpenAI shows webhook secrets.
pub(crate) const SECRET: &str = "whsec_c2VjcmV0LWtleS1mb3ItdGVzdGluZy13ZWJob29rcy0xMjM0NTY=";
/// Answered by Realtime.
pub(crate) const RT_NUMBER: &str = "+18005550100";
/// Answered by GPT-Live (when the door's setup routes it so).
pub(crate) const LIVE_NUMBER: &str = "+18005550199";
pub(crate) const CALLER: &str = "+14155550123";
pub(crate) const WAIT: Duration = Duration::from_secs(5);

/// How one door's tests set the tenant up.
pub(crate) struct PhoneSetup {
    /// The upstream's answers, mounted before the tools are made.
    pub(crate) mocks: Vec<Mock>,
    /// `features.realtime` (numbers, voice, …); `refer` settings come with it.
    pub(crate) phone: Value,
    /// The tools, given the upstream's URI.
    pub(crate) tools: fn(&str) -> Vec<Value>,
}

/// A server whose OpenAI is the simulator, and tenant `acme` set up by a [`PhoneSetup`].
pub(crate) struct Phone {
    pub(crate) app: TestApp,
    pub(crate) sim: Simulator,
    pub(crate) live: LiveSim,
    pub(crate) key: String,
    pub(crate) upstream: MockServer,
}

impl Phone {
    pub(crate) async fn start(backend: Backend, setup: PhoneSetup) -> Phone {
        let sim = Simulator::start().await.expect("simulator");
        sim.set_api_key(OPENAI_KEY);
        let app = spawn_app_with(
            backend,
            ServerConfig {
                tenant_rate_per_s: 10_000,
                openai: switchboard_realtime::Endpoints::from_api_base(&sim.base_url()),
                ..ServerConfig::default()
            },
        )
        .await;
        let upstream = MockServer::start().await;
        for mock in setup.mocks {
            mock.mount(&upstream).await;
        }
        let key = app.tenant("acme").await;
        let mut features = refer();
        features["realtime"] = setup.phone;
        let (s, body) = app.put("/v1/features", &key, features).await;
        assert_eq!(s, StatusCode::OK, "{body}");
        for (name, value) in [
            ("openai_api_key", OPENAI_KEY),
            ("openai_webhook_secret", SECRET),
        ] {
            let (s, body) = app
                .put(
                    &format!("/v1/secrets/{name}"),
                    &key,
                    json!({"value": value}),
                )
                .await;
            assert_eq!(s, StatusCode::NO_CONTENT, "{body}");
        }
        for t in (setup.tools)(&upstream.uri()) {
            let (s, body) = app.post("/v1/tools", &key, t).await;
            assert_eq!(s, StatusCode::CREATED, "{body}");
        }
        let live = sim.live();
        Phone {
            app,
            sim,
            live,
            key,
            upstream,
        }
    }

    /// Makes transfer destination `from` fall back to `to` (for calls that start after).
    pub(crate) async fn fall_back(&self, from: &str, to: &str) {
        let (_, mut features) = self.app.get("/v1/features", &self.key).await;
        for d in features["refer"]["destinations"]
            .as_array_mut()
            .expect("destinations")
        {
            if d["destination_id"] == from {
                d["fallback"] = json!(to);
            }
        }
        let (s, body) = self.app.put("/v1/features", &self.key, features).await;
        assert_eq!(s, StatusCode::OK, "{body}");
    }

    /// The record of function call `fc` of call `call`, as `GET /v1/calls/{id}` shows it.
    pub(crate) async fn record(&self, call: &str, fc: &str) -> Value {
        let (_, view) = self.app.get(&format!("/v1/calls/{call}"), &self.key).await;
        view["invocations"]
            .as_array()
            .and_then(|all| all.iter().find(|r| r["function_call_id"] == fc))
            .cloned()
            .unwrap_or_else(|| panic!("no record of {fc}: {view}"))
    }

    /// Puts agent `name`; returns it as stored.
    pub(crate) async fn put_agent(&self, name: &str, agent: Value) -> Value {
        let (s, body) = self
            .app
            .put(&format!("/v1/agents/{name}"), &self.key, agent)
            .await;
        assert_eq!(s, StatusCode::OK, "{body}");
        body
    }

    pub(crate) fn webhook(&self) -> String {
        format!("{}/v1/realtime/webhook/acme", self.app.base)
    }

    /// Rings `RT_NUMBER` through Realtime; returns the model's handle once Switchboard has
    /// accepted and attached.
    pub(crate) async fn ring_realtime(&self, call_id: &str) -> ModelHandle {
        let status = self
            .sim
            .send_incoming_call(&self.webhook(), SECRET, call_id, CALLER, RT_NUMBER)
            .await
            .expect("webhook");
        assert_eq!(status, 200);
        self.sim
            .wait_request("accept", call_id, WAIT)
            .await
            .expect("accepted");
        self.sim.model(call_id, WAIT).await.expect("attached")
    }

    /// Rings `LIVE_NUMBER` through GPT-Live; returns the backend once accepted and attached.
    pub(crate) async fn ring_live(&self, session_id: &str) -> LiveBackend {
        let status = self
            .live
            .send_incoming(
                &self.webhook(),
                SECRET,
                session_id,
                CALLER,
                LIVE_NUMBER,
                false,
            )
            .await
            .expect("webhook");
        assert_eq!(status, 200);
        self.live
            .wait_request("accept", session_id, WAIT)
            .await
            .expect("accepted");
        self.live.backend(session_id, WAIT).await.expect("attached")
    }

    /// Checks neither API saw a protocol violation, and stops the server.
    pub(crate) async fn stop(self) {
        let v = self.live.violations();
        assert!(v.is_empty(), "GPT-Live protocol violations: {v:?}");
        let v = self.sim.violations();
        assert!(v.is_empty(), "Realtime protocol violations: {v:?}");
        drop(self.upstream);
        self.app.stop().await;
    }
}
