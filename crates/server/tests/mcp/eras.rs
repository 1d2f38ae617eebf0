//! Both MCP revisions on both endpoints: the official SDK's `Client` in its default mode
//! (2026-07-28: no handshake, no session) and in legacy mode (2025-11-25 sessions), against an
//! agent's endpoint and a call's; and raw 2026-07-28 requests for what the SDK does not show
//! (discover, cache hints, header checks, 405s, another tenant).

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use super::python::client;
use super::support::{Backend, TestApp, acme, spawn_app};
use super::{endpoint, rpc_answer, wait_for_status};
use crate::both_backends;

fn call_endpoint(app: &TestApp, call: &str) -> String {
    format!("{}/v1/calls/{call}/mcp", app.base)
}

fn meal(kind: &str) -> Value {
    json!({"name": "save_meal", "arguments": {"meal_type": kind, "dishes": ["soup"]}})
}

fn call_ids(out: &Value) -> Vec<String> {
    out["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            r["meta"]["switchboard/call_id"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect()
}

/// One 2026-07-28 request: the revision in `_meta` and the headers, unless `headers` overrides
/// them. The HTTP status and the body as text.
async fn modern(
    app: &TestApp,
    url: &str,
    key: &str,
    method: &str,
    params: Value,
    headers: &[(&str, &str)],
) -> (StatusCode, String) {
    let mut params = params;
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    let mut all = reqwest::header::HeaderMap::new();
    let mut set = |name: &str, value: &str| {
        all.insert(
            reqwest::header::HeaderName::from_bytes(name.as_bytes()).unwrap(),
            value.parse().unwrap(),
        );
    };
    set("accept", "application/json, text/event-stream");
    set("mcp-protocol-version", "2026-07-28");
    set("mcp-method", method);
    if let Some(name) = params["name"].as_str() {
        set("mcp-name", name);
    }
    for (name, value) in headers {
        set(name, value);
    }
    let r = app
        .client
        .post(url)
        .bearer_auth(key)
        .headers(all)
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}))
        .send()
        .await
        .unwrap();
    (r.status(), r.text().await.unwrap())
}

both_backends!(
    a_modern_client_on_the_agent_endpoint_gets_a_call_per_request_unless_it_names_one,
    |app| {
        let key = acme(&app, "acme").await;
        let auth = format!("Bearer {key}");
        let out = client(&json!({
            "url": endpoint(&app, "assistant"),
            "headers": {"Authorization": auth},
            "calls": [meal("lunch"), meal("dinner")],
        }))
        .await;
        assert_eq!(out["protocol_version"], "2026-07-28", "{out}");
        let ids = call_ids(&out);
        assert_ne!(ids[0], ids[1], "stateless: a call per request: {out}");
        for id in &ids {
            wait_for_status(&app, &key, id, "ended").await;
        }
        // Naming a call joins it (and leaves it going).
        assert_eq!(
            app.post("/v1/calls", &key, json!({"call_id": "c_named"}))
                .await
                .0,
            StatusCode::CREATED
        );
        let out = client(&json!({
            "url": endpoint(&app, "assistant"),
            "headers": {"Authorization": auth, "X-Switchboard-Call-Id": "c_named"},
            "calls": [meal("lunch"), meal("dinner")],
        }))
        .await;
        assert_eq!(call_ids(&out), ["c_named", "c_named"], "{out}");
        let (_, call) = app.get("/v1/calls/c_named", &key).await;
        assert_eq!(call["status"], "active");
        assert_eq!(
            call["context"]["workflow"]["logged_meals"]
                .as_array()
                .unwrap()
                .len(),
            2,
            "{call}"
        );
    }
);

both_backends!(
    the_call_endpoint_keeps_one_calls_context_in_both_eras,
    |app| {
        let key = acme(&app, "acme").await;
        let auth = format!("Bearer {key}");
        assert_eq!(
            app.post(
                "/v1/calls",
                &key,
                json!({"call_id": "c_voice", "user": {"id": "u_7"}})
            )
            .await
            .0,
            StatusCode::CREATED
        );
        for (mode, first) in [("auto", "breakfast"), ("legacy", "dinner")] {
            let out = client(&json!({
            "url": call_endpoint(&app, "c_voice"),
            "mode": mode,
            "headers": {"Authorization": auth},
            "calls": [meal(first), meal("lunch"), {"name": "save_meal", "arguments": {"meal_type": "x"}}, {"name": "launch_rocket", "arguments": {}}],
        }))
        .await;
            let expected = if mode == "auto" {
                "2026-07-28"
            } else {
                "2025-11-25"
            };
            assert_eq!(out["protocol_version"], expected, "{out}");
            let mut names: Vec<&str> = out["tools"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t["name"].as_str().unwrap())
                .collect();
            names.sort_unstable();
            assert_eq!(names, ["request_transfer", "save_meal"], "{out}");
            let results = out["results"].as_array().unwrap();
            assert_eq!(results[0]["is_error"], false, "{out}");
            assert_eq!(
                results[0]["meta"]["switchboard/call_id"], "c_voice",
                "{out}"
            );
            assert_eq!(
                results[1]["meta"]["switchboard/call_id"], "c_voice",
                "{out}"
            );
            assert_eq!(results[2]["is_error"], true, "invalid arguments: {out}");
            assert!(
                results[2]["text"]
                    .as_str()
                    .unwrap()
                    .contains("invalid_arguments"),
                "{out}"
            );
            assert_eq!(
                results[3]["protocol_error"]["code"], -32602,
                "unknown tool: {out}"
            );
        }
        // Every tool shared the call's context, and the call goes on (the endpoint does not end it).
        let (_, call) = app.get("/v1/calls/c_voice", &key).await;
        assert_eq!(call["status"], "active", "{call}");
        assert_eq!(call["context"]["user"]["id"], "u_7");
        let kinds: Vec<&str> = call["context"]["workflow"]["logged_meals"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["meal_type"].as_str().unwrap())
            .collect();
        assert_eq!(kinds, ["breakfast", "lunch", "dinner", "lunch"], "{call}");
    }
);

both_backends!(the_call_endpoint_is_the_calls_tenants_only, |app| {
    let key = acme(&app, "acme").await;
    let other = acme(&app, "globex").await;
    assert_eq!(
        app.post("/v1/calls", &key, json!({"call_id": "c_mine"}))
            .await
            .0,
        StatusCode::CREATED
    );
    let url = call_endpoint(&app, "c_mine");
    // Another tenant's key finds no such call, in either era; nothing runs in it.
    let (s, _) = modern(&app, &url, &other, "tools/call", meal("lunch"), &[]).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    let init = app
        .client
        .post(&url)
        .bearer_auth(&other)
        .header("accept", "application/json, text/event-stream")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}))
        .send()
        .await
        .unwrap();
    assert_eq!(init.status(), StatusCode::NOT_FOUND);
    let (s, _) = modern(&app, &url, "sb_wrong", "tools/list", json!({}), &[]).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    let (s, _) = modern(
        &app,
        &call_endpoint(&app, "c_nobody"),
        &key,
        "tools/list",
        json!({}),
        &[],
    )
    .await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    // A header naming another call than the path is refused.
    let (s, body) = modern(
        &app,
        &url,
        &key,
        "tools/list",
        json!({}),
        &[("x-switchboard-call-id", "c_else")],
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{body}");
    let (_, call) = app.get("/v1/calls/c_mine", &key).await;
    assert_eq!(call["invocations"], json!([]), "{call}");
    // An ended call's endpoint answers no more.
    assert!(app.delete("/v1/calls/c_mine", &key).await.0.is_success());
    let (s, _) = modern(&app, &url, &key, "tools/call", meal("late"), &[]).await;
    assert_eq!(s, StatusCode::CONFLICT);
});

both_backends!(
    modern_requests_get_discovery_cache_hints_and_the_revisions_errors,
    |app| {
        let key = acme(&app, "acme").await;
        let url = endpoint(&app, "assistant");
        let (s, body) = modern(&app, &url, &key, "server/discover", json!({}), &[]).await;
        assert_eq!(s, StatusCode::OK, "{body}");
        let discover = rpc_answer(&body, 1);
        let versions = discover["result"]["supportedVersions"].as_array().unwrap();
        assert!(
            versions.contains(&json!("2026-07-28")) && versions.contains(&json!("2025-11-25")),
            "{discover}"
        );
        assert_eq!(discover["result"]["cacheScope"], "private", "{discover}");
        assert!(
            discover["result"]["capabilities"]["tools"].is_object(),
            "{discover}"
        );

        let (s, body) = modern(&app, &url, &key, "tools/list", json!({}), &[]).await;
        assert_eq!(s, StatusCode::OK, "{body}");
        let list = rpc_answer(&body, 1);
        assert_eq!(list["result"]["ttlMs"], 30_000, "{list}");
        assert_eq!(list["result"]["cacheScope"], "private", "{list}");
        // No session is minted for a modern request.
        let r = app
            .client
            .post(&url)
            .bearer_auth(&key)
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", "tools/list")
            .json(
                &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {}}}}),
            )
            .send()
            .await
            .unwrap();
        assert!(r.headers().get("mcp-session-id").is_none());

        // Mcp-Name must match the body's tool; Mcp-Method the body's method.
        let (s, body) = modern(
            &app,
            &url,
            &key,
            "tools/call",
            meal("lunch"),
            &[("mcp-name", "launch_rocket")],
        )
        .await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{body}");
        assert_eq!(rpc_answer(&body, 1)["error"]["code"], -32020, "{body}");
        let (s, body) = modern(
            &app,
            &url,
            &key,
            "tools/list",
            json!({}),
            &[("mcp-method", "tools/call")],
        )
        .await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{body}");
        // The revision in the header must be the body's.
        let (s, body) = modern(
            &app,
            &url,
            &key,
            "tools/list",
            json!({}),
            &[("mcp-protocol-version", "2099-01-01")],
        )
        .await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{body}");
        // GET and DELETE mean nothing to a modern client.
        for method in [Method::GET, Method::DELETE] {
            let r = app
                .client
                .request(method.clone(), &url)
                .bearer_auth(&key)
                .header("accept", "application/json, text/event-stream")
                .header("mcp-protocol-version", "2026-07-28")
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), StatusCode::METHOD_NOT_ALLOWED, "{method}");
        }
    }
);
