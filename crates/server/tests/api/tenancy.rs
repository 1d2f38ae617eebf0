//! No probing across tenants: call ids are each tenant's own, metrics are not public, and the
//! stored context is sealed.

use reqwest::StatusCode;
use serde_json::{Value, json};
use sqlx::Connection;
use switchboard_server::ServerConfig;

use crate::both_backends;
use crate::support::{Backend, TestApp, acme, invoke, spawn_app, spawn_app_with};

both_backends!(
    two_tenants_may_use_one_call_id_each_with_its_own_call,
    |app| {
        let a = acme(&app, "tenant-a").await;
        let b = acme(&app, "tenant-b").await;
        let (s, body) = app
            .post(
                "/v1/calls",
                &a,
                json!({"call_id": "shared", "user": {"id": "ann"}}),
            )
            .await;
        assert_eq!(s, StatusCode::CREATED, "{body}");
        let (s, body) = app
            .post(
                "/v1/calls",
                &b,
                json!({"call_id": "shared", "user": {"id": "bob"}}),
            )
            .await;
        assert_eq!(
            s,
            StatusCode::CREATED,
            "another tenant's call id is free: {body}"
        );
        // The same id twice within one tenant is still a conflict.
        let (s, body) = app
            .post("/v1/calls", &a, json!({"call_id": "shared"}))
            .await;
        assert_eq!(s, StatusCode::CONFLICT, "{body}");
        assert!(!body.to_string().contains("tenant-b"), "{body}");

        let lunch = json!({"meal_type": "lunch", "dishes": ["soup"]});
        let dinner = json!({"meal_type": "dinner", "dishes": ["rice"]});
        // The same function call id in both calls: each is answered by its own call.
        let ra = invoke(&app, &a, "shared", "fc1", "save_meal", lunch.clone()).await;
        let rb = invoke(&app, &b, "shared", "fc1", "save_meal", dinner.clone()).await;
        assert_eq!(ra["result"]["message"], "I've logged your lunch!", "{ra}");
        assert_eq!(rb["result"]["message"], "I've logged your dinner!", "{rb}");
        assert_eq!(rb["replayed"], false, "{rb}");

        let (_, va) = app.get("/v1/calls/shared", &a).await;
        let (_, vb) = app.get("/v1/calls/shared", &b).await;
        assert_eq!(va["context"]["user"]["id"], "ann");
        assert_eq!(vb["context"]["user"]["id"], "bob");
        assert_eq!(va["context"]["workflow"]["logged_meals"], json!([lunch]));
        assert_eq!(vb["context"]["workflow"]["logged_meals"], json!([dinner]));
        assert_eq!(va["invocations"].as_array().unwrap().len(), 1);
        assert_eq!(vb["invocations"].as_array().unwrap().len(), 1);

        // Ending one leaves the other going.
        let (s, ended) = app.delete("/v1/calls/shared", &a).await;
        assert_eq!(
            (s, ended["status"].clone()),
            (StatusCode::OK, json!("ended"))
        );
        let (_, vb) = app.get("/v1/calls/shared", &b).await;
        assert_eq!(vb["status"], "active", "{vb}");
        assert_eq!(vb["invocations"].as_array().unwrap().len(), 1, "{vb}");
        let rb3 = invoke(&app, &b, "shared", "fc3", "save_meal", lunch.clone()).await;
        assert_eq!(rb3["result"]["ok"], true, "{rb3}");
        assert_eq!(app.get("/v1/calls/shared", &a).await.1["status"], "ended");
        // A second node picks `b`'s call up from the database as `b`'s (stopping it ends the call).
        let (base, state, stop, server) = crate::support::start_on(&app.url, app.key.clone()).await;
        let other = TestApp::view(&app, base);
        let again = invoke(&other, &b, "shared", "fc1", "save_meal", json!({})).await;
        assert_eq!(
            again["result"]["message"], "I've logged your dinner!",
            "{again}"
        );
        let rb4 = invoke(&other, &b, "shared", "fc4", "save_meal", lunch.clone()).await;
        assert_eq!(rb4["result"]["ok"], true, "{rb4}");
        let _ = stop.send(());
        let _ = server.await;
        state.store.close().await;
    }
);

/// Every raw cell of the `calls` table, read around the store.
async fn raw_calls(app: &TestApp, backend: Backend) -> Vec<String> {
    let sql = "SELECT tenant_id, id, call_info, context, pinned FROM calls";
    let rows: Vec<(String, String, String, String, String)> = match backend {
        Backend::Sqlite => {
            let mut conn = sqlx::SqliteConnection::connect(&app.url).await.unwrap();
            sqlx::query_as(sql).fetch_all(&mut conn).await.unwrap()
        }
        Backend::Postgres => {
            let mut conn = sqlx::PgConnection::connect(&app.url).await.unwrap();
            sqlx::query_as(sql).fetch_all(&mut conn).await.unwrap()
        }
    };
    rows.into_iter()
        .flat_map(|(a, b, c, d, e)| [a, b, c, d, e])
        .collect()
}

async fn the_stored_context_is_sealed(backend: Backend) {
    let app = spawn_app(backend).await;
    let key = acme(&app, "acme").await;
    let token = "tok-SENTINEL-sealed-at-rest";
    let (s, body) = app
        .post(
            "/v1/calls",
            &key,
            json!({"call_id": "c1", "user": {"id": "u_7", "auth_token": token}}),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{body}");
    invoke(
        &app,
        &key,
        "c1",
        "f1",
        "save_meal",
        json!({"meal_type": "lunch", "dishes": ["soup"]}),
    )
    .await;
    let cells = raw_calls(&app, backend).await;
    assert!(cells.iter().any(|c| c == "c1"), "the scan sees the row");
    for cell in &cells {
        assert!(
            !cell.contains(token),
            "the token is stored in clear: {cell}"
        );
        assert!(
            !cell.contains("u_7") || !cell.contains("logged_meals"),
            "the context is stored in clear: {cell}"
        );
    }
    // Read through the API, it is all there.
    let (_, view) = app.get("/v1/calls/c1", &key).await;
    assert_eq!(view["context"]["user"]["id"], "u_7");
    assert_eq!(
        view["context"]["workflow"]["logged_meals"][0]["meal_type"],
        "lunch"
    );
    app.stop().await;
}

#[tokio::test]
async fn the_stored_context_is_sealed_sqlite() {
    the_stored_context_is_sealed(Backend::Sqlite).await;
}

#[tokio::test]
async fn the_stored_context_is_sealed_postgres() {
    the_stored_context_is_sealed(Backend::Postgres).await;
}

both_backends!(metrics_need_the_admin_key, |app| {
    let key = app.tenant("acme").await;
    let (s, body) = app.get("/metrics", "").await;
    assert_eq!(s, StatusCode::UNAUTHORIZED, "{body}");
    let (s, body) = app.get("/metrics", &key).await;
    assert_eq!(s, StatusCode::FORBIDDEN, "a tenant's key: {body}");
    let (s, body) = app.get("/metrics", &app.admin).await;
    assert_eq!(s, StatusCode::OK, "{body}");
});

#[tokio::test]
async fn metrics_are_served_without_a_key_on_their_own_listener() {
    let app = spawn_app_with(Backend::Sqlite, ServerConfig::default()).await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(switchboard_server::serve_metrics(
        listener,
        app.state.clone(),
        async move {
            let _ = rx.await;
        },
    ));
    let client = reqwest::Client::new();
    let resp = client
        .get(format!("http://{addr}/metrics"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    assert!(
        resp.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/plain"),
        "{:?}",
        resp.headers()
    );
    // Nothing but metrics there.
    let resp = client
        .get(format!("http://{addr}/v1/tools"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::NOT_FOUND);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], "not_found");
    // The main listener still wants the admin key.
    assert_eq!(app.get("/metrics", "").await.0, StatusCode::UNAUTHORIZED);
    let _ = tx.send(());
    server.await.unwrap().unwrap();
    app.stop().await;
}
