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
