//! The per-tenant live-call cap holds under concurrent starts: counted and taken in one
//! transaction in the store.

use std::sync::Arc;

use reqwest::StatusCode;
use serde_json::json;
use switchboard_server::ServerConfig;

use crate::support::{Backend, acme, spawn_app_with};

#[tokio::test]
async fn concurrent_starts_take_exactly_the_places_the_cap_leaves() {
    const CAP: usize = 3;
    const STARTS: usize = 12;
    for backend in [Backend::Sqlite, Backend::Postgres] {
        let config = ServerConfig {
            tenant_rate_per_s: 10_000,
            max_calls_per_tenant: CAP,
            ..ServerConfig::default()
        };
        let app = Arc::new(spawn_app_with(backend, config).await);
        let key = acme(&app, "acme").await;
        let starts: Vec<_> = (0..STARTS)
            .map(|i| {
                let (app, key) = (Arc::clone(&app), key.clone());
                tokio::spawn(async move {
                    app.post("/v1/calls", &key, json!({"call_id": format!("c{i}")}))
                        .await
                })
            })
            .collect();
        let (mut created, mut refused) = (Vec::new(), 0);
        for s in starts {
            let (status, body) = s.await.unwrap();
            match status {
                StatusCode::CREATED => created.push(body["call_id"].as_str().unwrap().to_owned()),
                StatusCode::TOO_MANY_REQUESTS => {
                    assert_eq!(body["error"]["code"], "rate_limited", "{body}");
                    assert!(
                        body["error"]["message"]
                            .as_str()
                            .unwrap()
                            .contains("max_calls_per_tenant"),
                        "{body}"
                    );
                    refused += 1;
                }
                other => panic!("unexpected {other}: {body}"),
            }
        }
        assert_eq!((created.len(), refused), (CAP, STARTS - CAP), "{backend:?}");
        // Ending one frees one place.
        app.delete(&format!("/v1/calls/{}", created[0]), &key).await;
        let (s, body) = app
            .post("/v1/calls", &key, json!({"call_id": "c_after"}))
            .await;
        assert_eq!(s, StatusCode::CREATED, "{body}");
        if let Ok(app) = Arc::try_unwrap(app) {
            app.stop().await;
        }
    }
}

#[tokio::test]
async fn picking_a_call_up_checks_the_nodes_cap_too() {
    for backend in [Backend::Sqlite, Backend::Postgres] {
        // Node A may hold five of the tenant's calls, node B one.
        let a = spawn_app_with(
            backend,
            ServerConfig {
                tenant_rate_per_s: 10_000,
                max_calls_per_tenant: 5,
                // No heartbeat during the test: a node marked dead stays dead.
                lease: std::time::Duration::from_secs(3600),
                ..ServerConfig::default()
            },
        )
        .await;
        let key = acme(&a, "acme").await;
        for id in ["c1", "c2"] {
            let (s, body) = a.post("/v1/calls", &key, json!({"call_id": id})).await;
            assert_eq!(s, StatusCode::CREATED, "{body}");
        }
        let config = ServerConfig {
            tenant_rate_per_s: 10_000,
            max_calls_per_tenant: 1,
            ..ServerConfig::default()
        };
        let (base, state, stop, server) =
            crate::support::start_with(&a.url, a.key.clone(), config).await;
        let b = crate::support::TestApp::view(&a, base);
        // A dies: B takes its calls over.
        crate::support::lease_lapsed(&a).await;
        let meal = json!({"meal_type": "lunch", "dishes": ["soup"]});
        // Two requests for one call at once: one pick-up, both answered.
        let (first, second) = tokio::join!(
            crate::support::invoke(&b, &key, "c1", "f1", "save_meal", meal.clone()),
            crate::support::invoke(&b, &key, "c1", "f1", "save_meal", meal.clone()),
        );
        assert_eq!(
            (first["ok"].clone(), second["ok"].clone()),
            (json!(true), json!(true))
        );
        assert_eq!(state.calls.count("acme"), 1);
        // A second call would be over node B's cap.
        let (s, body) = b
            .post(
                "/v1/calls/c2/invocations",
                &key,
                json!({"function_call_id": "f2", "name": "save_meal", "arguments": meal}),
            )
            .await;
        assert_eq!(s, StatusCode::TOO_MANY_REQUESTS, "{body}");
        let _ = stop.send(());
        let _ = server.await;
        state.store.close().await;
        a.stop().await;
    }
}
