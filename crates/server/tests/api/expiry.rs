//! HTTP-door calls that nobody ends expire once idle for `call_idle_timeout`: ended as `DELETE`
//! ends them (what runs answered, the place among the tenant's live calls freed), on the node
//! that owns them, and, when that node died, by another node from the database.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};
use switchboard_server::ServerConfig;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::support::{Backend, TestApp, acme, invoke, lease_lapsed, spawn_app_with, start_with};

const IDLE: Duration = Duration::from_secs(1);

fn config(idle: Option<Duration>) -> ServerConfig {
    ServerConfig {
        tenant_rate_per_s: 10_000,
        max_calls_per_tenant: 1,
        call_idle_timeout: idle,
        ..ServerConfig::default()
    }
}

/// Polls the call's view until its status is `status` (at most 10 s).
async fn wait_for(app: &TestApp, key: &str, call: &str, status: &str) -> Value {
    for _ in 0..200 {
        let (_, view) = app.get(&format!("/v1/calls/{call}"), key).await;
        if view["status"] == status {
            return view;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("call {call} did not become {status}");
}

fn meal() -> Value {
    json!({"meal_type": "lunch", "dishes": ["soup"]})
}

/// A call its client forgot to end, with an async tool still running, ends once idle: the
/// tool is answered `cancelled`, the tenant's only place is free again. A call in use does not.
#[tokio::test]
async fn an_idle_call_ends_and_gives_its_place_back() {
    for backend in [Backend::Sqlite, Backend::Postgres] {
        let app = spawn_app_with(backend, config(Some(IDLE))).await;
        let key = acme(&app, "acme").await;
        let upstream = MockServer::start().await;
        Mock::given(method("GET"))
            .and(path("/report"))
            .respond_with(ResponseTemplate::new(200).set_delay(Duration::from_secs(5)))
            .mount(&upstream)
            .await;
        let report = json!({"name": "report", "description": "A report in the background.", "async": true,
            "actions": [{"type": "api_call", "method": "GET", "url": format!("{}/report", upstream.uri())}]});
        assert_eq!(
            app.post("/v1/tools", &key, report).await.0,
            StatusCode::CREATED
        );
        let agent = json!({"tools": [{"tool": "save_meal"}, {"tool": "report"}], "default": true});
        assert_eq!(
            app.put("/v1/agents/assistant", &key, agent).await.0,
            StatusCode::OK
        );

        let (s, body) = app
            .post("/v1/calls", &key, json!({"call_id": "forgotten"}))
            .await;
        assert_eq!(s, StatusCode::CREATED, "{body}");
        assert_eq!(
            invoke(&app, &key, "forgotten", "f1", "save_meal", meal()).await["ok"],
            true
        );
        let started = invoke(&app, &key, "forgotten", "f2", "report", json!({})).await;
        assert_eq!(started["result"]["message"], "started", "{started}");
        let (s, body) = app
            .post("/v1/calls", &key, json!({"call_id": "next"}))
            .await;
        assert_eq!(
            s,
            StatusCode::TOO_MANY_REQUESTS,
            "the place is taken: {body}"
        );

        let view = wait_for(&app, &key, "forgotten", "ended").await;
        let report = view["invocations"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["function_call_id"] == "f2" && r["error"] == "cancelled");
        assert!(report.is_some(), "the running tool is answered: {view}");
        let (s, body) = app
            .post("/v1/calls", &key, json!({"call_id": "next"}))
            .await;
        assert_eq!(s, StatusCode::CREATED, "the place is free: {body}");
        // In use, a call lives on past the timeout (different meals: the same one again and
        // again would be a loop, refused by the runaway guards).
        for i in 0..8 {
            let fc = format!("n{i}");
            let meal = json!({"meal_type": "lunch", "dishes": [format!("dish {i}")]});
            assert_eq!(
                invoke(&app, &key, "next", &fc, "save_meal", meal).await["ok"],
                true
            );
            tokio::time::sleep(IDLE / 4).await;
        }
        let (_, view) = app.get("/v1/calls/next", &key).await;
        assert_eq!(view["status"], "active", "{view}");
        app.stop().await;
    }
}

/// A dead node's idle call is taken over and ended by another node, which the database shows
/// it to: its place among the tenant's live calls is free again.
#[tokio::test]
async fn an_idle_call_of_a_dead_node_is_ended_by_another() {
    for backend in [Backend::Sqlite, Backend::Postgres] {
        // A's heartbeat would revive it: a long lease keeps it dead once marked so. A itself
        // expires nothing.
        let a = spawn_app_with(
            backend,
            ServerConfig {
                lease: Duration::from_secs(3600),
                ..config(None)
            },
        )
        .await;
        let key = acme(&a, "acme").await;
        let (s, body) = a
            .post("/v1/calls", &key, json!({"call_id": "orphan"}))
            .await;
        assert_eq!(s, StatusCode::CREATED, "{body}");
        assert_eq!(
            invoke(&a, &key, "orphan", "f1", "save_meal", meal()).await["ok"],
            true
        );
        lease_lapsed(&a).await;
        let (base, b_state, stop, server) =
            start_with(&a.url, a.key.clone(), config(Some(IDLE))).await;
        let b = TestApp::view(&a, base);
        let view = wait_for(&b, &key, "orphan", "ended").await;
        assert_eq!(view["invocations_total"], 1, "{view}");
        let (s, body) = b.post("/v1/calls", &key, json!({"call_id": "next"})).await;
        assert_eq!(s, StatusCode::CREATED, "the place is free: {body}");
        let _ = stop.send(());
        let _ = server.await;
        b_state.store.close().await;
        a.stop().await;
    }
}
