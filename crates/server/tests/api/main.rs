//! The REST API end to end: a real server on 127.0.0.1:0 over a fresh database, driven over
//! HTTP; every test runs on SQLite and on PostgreSQL.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod adaptive;
mod alerts;
mod booking_races;
mod caldav_bookings;
mod caldav_race;
mod caldav_zones;
mod call_cap;
mod caller_memory;
mod calls_search;
mod commits;
mod conformance;
mod connections;
mod console;
mod console_browser;
mod demo;
mod email_rate;
mod error_statuses;
mod expiry;
pub(crate) mod google;
mod guards;
mod limits;
mod live;
mod live_sdk;
mod memory;
mod ownership;
mod peers;
mod phone_booking;
mod phone_support;
mod publishing;
mod realtime;
mod redaction;
mod replay;
mod shapes;
mod support;
mod tenancy;
mod toolkits;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use support::{Backend, TestApp, acme, invoke, save_meal, spawn_app};

both_backends!(tools_are_versioned_data, |app| {
    let key = app.tenant("acme").await;
    let (s, v1) = app.post("/v1/tools", &key, save_meal()).await;
    assert_eq!((s, v1["version"].clone()), (StatusCode::CREATED, json!(1)));
    assert_eq!(
        app.post("/v1/tools", &key, save_meal()).await.0,
        StatusCode::CONFLICT
    );
    let mut changed = save_meal();
    changed["description"] = json!("Log a meal (v2)");
    let (s, v2) = app.put("/v1/tools/save_meal", &key, changed).await;
    assert_eq!((s, v2["version"].clone()), (StatusCode::OK, json!(2)));
    assert_eq!(
        app.get("/v1/tools/save_meal", &key).await.1["definition"]["description"],
        "Log a meal (v2)"
    );
    assert_eq!(
        app.get("/v1/tools/save_meal/versions/1", &key).await.1["definition"]["description"],
        "Log a meal the user consumed"
    );
    assert_eq!(
        app.get("/v1/tools/save_meal/versions", &key)
            .await
            .1
            .as_array()
            .unwrap()
            .len(),
        2
    );
    let (_, list) = app.get("/v1/tools?limit=10", &key).await;
    assert_eq!(list["items"].as_array().unwrap().len(), 1);
    assert_eq!(
        app.delete("/v1/tools/save_meal", &key).await.0,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        app.get("/v1/tools/save_meal", &key).await.0,
        StatusCode::NOT_FOUND
    );
});

both_backends!(a_broken_tool_gets_every_problem_with_its_place, |app| {
    let key = app.tenant("acme").await;
    let broken = json!({"name": "save meal", "description": "d", "parameters": [{"name": "x", "type": "str"}], "actions": [{"type": "respnd", "message": "hi"}]});
    let (s, body) = app.post("/v1/tools", &key, broken.clone()).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert_eq!(body["error"]["code"], "invalid_tool");
    let pointers: Vec<&str> = body["error"]["details"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["pointer"].as_str().unwrap())
        .collect();
    assert_eq!(pointers, ["/name", "/parameters/0/type", "/actions/0/type"]);
    let (s, v) = app.post("/v1/tools:validate", &key, broken).await;
    assert_eq!(
        (s, v["ok"].clone(), v["problems"].as_array().unwrap().len()),
        (StatusCode::OK, json!(false), 3)
    );
    let (_, v) = app.post("/v1/tools:validate", &key, save_meal()).await;
    assert_eq!(
        (v["ok"].clone(), v["side_effect"].clone()),
        (json!(true), json!("read"))
    );
});

both_backends!(a_tool_can_be_tested_without_a_call, |app| {
    let key = app.tenant("acme").await;
    let mut tool = save_meal();
    tool["actions"].as_array_mut().unwrap().push(json!({"type": "api_call", "url": "https://crm.example.com/meals", "body": {"user": "{{user.id}}"}}));
    app.post("/v1/tools", &key, tool).await;
    let run = json!({"params": {"meal_type": "lunch", "dishes": ["soup"]}, "context": {"user": {"id": "u1"}}});
    let (s, r) = app.post("/v1/tools/save_meal:test", &key, run).await;
    assert_eq!(s, StatusCode::OK, "{r}");
    assert_eq!(r["output"]["message"], "I've logged your lunch!");
    assert_eq!(r["effects"][0]["url"], "https://crm.example.com/meals");
    assert_eq!(r["effects"][0]["body"], json!({"user": "u1"}));
    assert_eq!(r["writes"][0]["op"], "append");
    let (s, r) = app
        .post(
            "/v1/tools/save_meal:test",
            &key,
            json!({"params": {"meal_type": "brunch", "dishes": []}}),
        )
        .await;
    assert_eq!(
        (s, r["output"]["error"].clone()),
        (StatusCode::OK, json!("invalid_arguments"))
    );
    // Arguments that are not an object are the request's mistake, named as such.
    let (s, r) = app
        .post("/v1/tools/save_meal:test", &key, json!({"params": false}))
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{r}");
    assert!(
        r["error"]["message"].as_str().unwrap().contains("`params`"),
        "{r}"
    );
    assert_eq!(
        app.post("/v1/tools/save_meal", &key, json!({})).await.0,
        StatusCode::METHOD_NOT_ALLOWED
    );
    assert_eq!(
        app.post("/v1/tools/nope:test", &key, json!({})).await.0,
        StatusCode::NOT_FOUND
    );
});

both_backends!(agents_and_their_toolsets, |app| {
    let key = acme(&app, "acme").await;
    let (_, agent) = app.get("/v1/agents/assistant", &key).await;
    assert_eq!(
        agent["tools"][0],
        json!({"tool": "save_meal", "enabled": true, "config": {"unit": "g"}, "sensitive_config_set": true})
    );
    for (format, first) in [
        ("openai-realtime", "/tools/0/name"),
        ("openai-chat", "/tools/0/function/name"),
        ("openai-responses", "/tools/0/name"),
        ("anthropic", "/tools/0/name"),
        ("mcp", "/tools/0/name"),
    ] {
        let (s, set) = app
            .get(
                &format!("/v1/agents/assistant/toolset?format={format}"),
                &key,
            )
            .await;
        assert_eq!(s, StatusCode::OK, "{format}: {set}");
        assert_eq!(
            set.pointer(first),
            Some(&json!("request_transfer")),
            "{format}"
        );
        assert_eq!(set["tools"].as_array().unwrap().len(), 2, "{format}");
    }
    let (_, strict) = app.get("/v1/agents/assistant/toolset?format=openai-responses&strict=true&tool_choice=save_meal", &key).await;
    assert_eq!(
        strict["tool_choice"],
        json!({"type": "function", "name": "save_meal"})
    );
    assert_eq!(
        app.get("/v1/agents/assistant/toolset?format=gemini", &key)
            .await
            .0,
        StatusCode::BAD_REQUEST
    );
    let (s, body) = app
        .put(
            "/v1/agents/other",
            &key,
            json!({"tools": [{"tool": "missing_tool"}]}),
        )
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("missing_tool")
    );
    // Sensitive config: absent keeps it, null clears it.
    app.put(
        "/v1/agents/assistant",
        &key,
        json!({"tools": [{"tool": "save_meal"}], "default": true}),
    )
    .await;
    assert_eq!(
        app.get("/v1/agents/assistant", &key).await.1["tools"][0]["sensitive_config_set"],
        true
    );
    app.put(
        "/v1/agents/assistant",
        &key,
        json!({"tools": [{"tool": "save_meal", "sensitive_config": null}], "default": true}),
    )
    .await;
    assert_eq!(
        app.get("/v1/agents/assistant", &key).await.1["tools"][0]["sensitive_config_set"],
        false
    );
});

both_backends!(a_call_over_http, |app| {
    let key = acme(&app, "acme").await;
    let (s, started) = app.post("/v1/calls", &key, json!({"call_id": "c1", "from": "+14255551212", "user": {"id": "u_42", "auth_token": "tok-abcdef-123"}})).await;
    assert_eq!(s, StatusCode::CREATED, "{started}");
    assert_eq!(started["agent"], "assistant");
    assert_eq!(started["toolset"]["tool_choice"], "auto");
    let r = invoke(
        &app,
        &key,
        "c1",
        "fc1",
        "save_meal",
        json!({"meal_type": "lunch", "dishes": ["soup"]}),
    )
    .await;
    assert_eq!(
        r["result"],
        json!({"ok": true, "message": "I've logged your lunch!", "data": {}})
    );
    // A repeated function call id is answered with the first answer, not run again.
    let again = invoke(
        &app,
        &key,
        "c1",
        "fc1",
        "save_meal",
        json!({"meal_type": "dinner", "dishes": ["x"]}),
    )
    .await;
    assert_eq!(
        (
            again["replayed"].clone(),
            again["result"]["message"].clone()
        ),
        (json!(true), json!("I've logged your lunch!"))
    );
    let bad = invoke(
        &app,
        &key,
        "c1",
        "fc2",
        "save_meal",
        json!({"meal_type": "brunch"}),
    )
    .await;
    assert_eq!(bad["error"], "invalid_arguments");
    let t = invoke(
        &app,
        &key,
        "c1",
        "fc3",
        "request_transfer",
        json!({"destination_id": "support"}),
    )
    .await;
    assert_eq!(
        t["actions"],
        json!([{"type": "transfer", "target_uri": "tel:+14155552000"}])
    );
    let unknown = invoke(&app, &key, "c1", "fc4", "launch_rocket", json!({})).await;
    assert_eq!(unknown["error"], "tool_not_found");
    let (_, call) = app.get("/v1/calls/c1", &key).await;
    assert_eq!(
        call["context"]["workflow"]["logged_meals"],
        json!([{"meal_type": "lunch", "dishes": ["soup"]}])
    );
    assert_eq!(call["context"]["call"]["from"], "+14255551212");
    assert_eq!(call["invocations"].as_array().unwrap().len(), 4);
    let text = call.to_string();
    assert!(
        !text.contains("tok-abcdef-123"),
        "the user's token is redacted: {text}"
    );
    assert_eq!(
        app.post("/v1/calls/c1/responses/resp_9/cancel", &key, json!({}))
            .await
            .0,
        StatusCode::ACCEPTED
    );
    let (s, ended) = app.delete("/v1/calls/c1", &key).await;
    assert_eq!(
        (s, ended["status"].clone()),
        (StatusCode::OK, json!("ended"))
    );
    let (s, _) = app
        .post(
            "/v1/calls/c1/invocations",
            &key,
            json!({"function_call_id": "fc9", "name": "save_meal"}),
        )
        .await;
    assert_eq!(s, StatusCode::CONFLICT);
    assert_eq!(app.get("/v1/calls/c1", &key).await.1["status"], "ended");
});

both_backends!(
    a_changed_tool_reaches_the_next_call_and_live_calls_keep_theirs,
    |app| {
        let key = acme(&app, "acme").await;
        app.post("/v1/calls", &key, json!({"call_id": "old"})).await;
        let mut v2 = save_meal();
        v2["on_success"] =
            json!([{"type": "respond", "message": "v2 logged your {{params.meal_type}}"}]);
        assert_eq!(
            app.put("/v1/tools/save_meal", &key, v2).await.0,
            StatusCode::OK
        );
        app.post("/v1/calls", &key, json!({"call_id": "new"})).await;
        let args = json!({"meal_type": "lunch", "dishes": ["soup"]});
        assert_eq!(
            invoke(&app, &key, "new", "f", "save_meal", args.clone()).await["result"]["message"],
            "v2 logged your lunch"
        );
        assert_eq!(
            invoke(&app, &key, "old", "f", "save_meal", args).await["result"]["message"],
            "I've logged your lunch!"
        );
    }
);

both_backends!(a_call_is_served_by_two_nodes_alike, |app| {
    let key = acme(&app, "acme").await;
    app.post("/v1/calls", &key, json!({"call_id": "c1"})).await;
    invoke(
        &app,
        &key,
        "c1",
        "f1",
        "save_meal",
        json!({"meal_type": "lunch", "dishes": ["soup"]}),
    )
    .await;
    // A second server on the same database (another node, or this one restarted) picks the call up.
    let (base, state, stop, server) = support::start_on(&app.url, app.key.clone()).await;
    let other = TestApp::view(&app, base);
    let r = invoke(
        &other,
        &key,
        "c1",
        "f2",
        "save_meal",
        json!({"meal_type": "dinner", "dishes": ["rice"]}),
    )
    .await;
    assert!(r["result"]["ok"].as_bool().unwrap(), "{r}");
    let (_, call) = other.get("/v1/calls/c1", &key).await;
    assert_eq!(
        call["context"]["workflow"]["logged_meals"]
            .as_array()
            .unwrap()
            .len(),
        2,
        "{call}"
    );
    let _ = stop.send(());
    let _ = server.await;
    state.store.close().await;
});

both_backends!(tenants_are_isolated, |app| {
    let a = acme(&app, "tenant-a").await;
    let b = app.tenant("tenant-b").await;
    app.post("/v1/calls", &a, json!({"call_id": "call-a"}))
        .await;
    app.put(
        "/v1/secrets/crm_token",
        &a,
        json!({"value": "secret-value-123"}),
    )
    .await;
    let key_id = app.get("/v1/api-keys", &a).await.1[0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let probes: Vec<(Method, String, Option<Value>)> = vec![
        (Method::GET, "/v1/tools/save_meal".into(), None),
        (Method::GET, "/v1/tools/save_meal/versions".into(), None),
        (Method::GET, "/v1/tools/save_meal/versions/1".into(), None),
        (Method::DELETE, "/v1/tools/save_meal".into(), None),
        (
            Method::POST,
            "/v1/tools/save_meal:test".into(),
            Some(json!({})),
        ),
        (Method::GET, "/v1/agents/assistant".into(), None),
        (Method::DELETE, "/v1/agents/assistant".into(), None),
        (Method::GET, "/v1/agents/assistant/toolset".into(), None),
        (Method::GET, "/v1/calls/call-a".into(), None),
        (
            Method::POST,
            "/v1/calls/call-a/invocations".into(),
            Some(json!({"function_call_id": "x", "name": "save_meal"})),
        ),
        (
            Method::POST,
            "/v1/calls/call-a/responses/r/cancel".into(),
            Some(json!({})),
        ),
        (Method::DELETE, "/v1/calls/call-a".into(), None),
        (Method::DELETE, "/v1/secrets/crm_token".into(), None),
        (Method::DELETE, format!("/v1/api-keys/{key_id}"), None),
    ];
    for (method, path, body) in probes {
        let (s, resp) = app.call(method.clone(), &path, &b, body).await;
        assert_eq!(
            s,
            StatusCode::NOT_FOUND,
            "{method} {path} with another tenant's key: {resp}"
        );
    }
    // A PUT with B's key makes B's own tool of that name; A's is untouched.
    assert_eq!(
        app.put("/v1/tools/save_meal", &b, save_meal()).await.0,
        StatusCode::OK
    );
    // B's own lists hold none of A's things.
    assert_eq!(app.get("/v1/agents", &b).await.1["items"], json!([]));
    assert_eq!(app.get("/v1/secrets", &b).await.1, json!([]));
    assert_eq!(
        app.get("/v1/api-keys", &b)
            .await
            .1
            .as_array()
            .unwrap()
            .len(),
        1
    );
    // A still has everything (B's PUT made B its own tool).
    assert_eq!(app.get("/v1/tools/save_meal", &a).await.1["version"], 1);
    assert_eq!(app.get("/v1/calls/call-a", &a).await.0, StatusCode::OK);
});

both_backends!(secrets_never_come_back, |app| {
    let key = acme(&app, "acme").await;
    assert_eq!(
        app.put(
            "/v1/secrets/crm_token",
            &key,
            json!({"value": "secret-value-123"})
        )
        .await
        .0,
        StatusCode::NO_CONTENT
    );
    app.post(
        "/v1/calls",
        &key,
        json!({"call_id": "c1", "user": {"auth_token": "tok-abcdef-123"}}),
    )
    .await;
    invoke(
        &app,
        &key,
        "c1",
        "f1",
        "save_meal",
        json!({"meal_type": "lunch", "dishes": ["soup"]}),
    )
    .await;
    let mut seen = String::new();
    for path in [
        "/v1/secrets",
        "/v1/agents",
        "/v1/agents/assistant",
        "/v1/tools",
        "/v1/calls/c1",
        "/v1/features",
        "/v1/api-keys",
    ] {
        seen.push_str(&app.get(path, &key).await.1.to_string());
    }
    assert!(seen.contains("crm_token"), "names are listed");
    for secret in ["secret-value-123", "sk-very-secret-1", "tok-abcdef-123"] {
        assert!(!seen.contains(secret), "{secret} leaked");
    }
});

both_backends!(keys_and_roles, |app| {
    let key = app.tenant("acme").await;
    assert_eq!(app.get("/v1/tools", "").await.0, StatusCode::UNAUTHORIZED);
    assert_eq!(
        app.get("/v1/tools", "sb_acme_nope").await.0,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        app.get("/v1/tools", &app.admin).await.0,
        StatusCode::FORBIDDEN
    );
    assert_eq!(app.get("/v1/tenants", &key).await.0, StatusCode::FORBIDDEN);
    let (s, created) = app.post("/v1/api-keys", &key, json!({"label": "ci"})).await;
    assert_eq!(s, StatusCode::CREATED);
    let second = created["key"].as_str().unwrap().to_owned();
    assert_eq!(app.get("/v1/tools", &second).await.0, StatusCode::OK);
    let listed = app.get("/v1/api-keys", &key).await.1;
    assert!(!listed.to_string().contains(&second), "a key is shown once");
    let id = created["id"].as_str().unwrap();
    assert_eq!(
        app.delete(&format!("/v1/api-keys/{id}"), &key).await.0,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        app.get("/v1/tools", &second).await.0,
        StatusCode::UNAUTHORIZED
    );
    let (_, tenants) = app.get("/v1/tenants", &app.admin).await;
    assert_eq!(tenants["items"][0]["id"], "acme");
    assert_eq!(
        app.post("/v1/tenants", &app.admin, json!({"id": "acme"}))
            .await
            .0,
        StatusCode::CONFLICT
    );
    assert_eq!(
        app.post("/v1/tenants", &app.admin, json!({"id": "Bad Id"}))
            .await
            .0,
        StatusCode::BAD_REQUEST
    );
});

both_backends!(bad_input_is_a_clear_4xx, |app| {
    let key = acme(&app, "acme").await;
    let cases: Vec<(Method, &str, Value)> = vec![
        (Method::POST, "/v1/tools", json!("not an object")),
        (Method::POST, "/v1/tools", json!({"name": 5})),
        (
            Method::PUT,
            "/v1/tools/save_meal",
            json!({"name": "other", "description": "d"}),
        ),
        (Method::PUT, "/v1/agents/a", json!({"tools": "save_meal"})),
        (Method::PUT, "/v1/agents/a", json!({"unknown": 1})),
        (
            Method::PUT,
            "/v1/agents/a",
            json!({"tools": [{"tool": "save_meal", "config": 3}]}),
        ),
        (
            Method::PUT,
            "/v1/features",
            json!({"refer": {"enabled": "yes"}}),
        ),
        (Method::PUT, "/v1/features", json!({"teleport": {}})),
        (Method::PUT, "/v1/secrets/x", json!({"value": ""})),
        (Method::POST, "/v1/calls", json!({"agent": "nobody"})),
        (Method::POST, "/v1/calls", json!({"user": "me"})),
        (
            Method::POST,
            "/v1/calls/none/invocations",
            json!({"function_call_id": "f", "name": "save_meal"}),
        ),
        (Method::POST, "/v1/tenants", json!({"id": 3})),
        (Method::GET, "/v1/tools?limit=0", Value::Null),
        (Method::GET, "/v1/tools?limit=abc", Value::Null),
        (Method::GET, "/v1/tools?after=%%%", Value::Null),
        (Method::GET, "/v1/tools/save_meal/versions/x", Value::Null),
        (Method::GET, "/v1/nothing/here", Value::Null),
    ];
    for (method, path, body) in cases {
        let key = if path.starts_with("/v1/tenants") {
            app.admin.clone()
        } else {
            key.clone()
        };
        let body = (!body.is_null()).then_some(body);
        let (s, resp) = app.call(method.clone(), path, &key, body).await;
        assert!(s.is_client_error(), "{method} {path}: {s} {resp}");
        let message = resp["error"]["message"]
            .as_str()
            .unwrap_or_else(|| panic!("{method} {path}: no error envelope: {resp}"));
        assert!(message.len() > 10, "{method} {path}: {message}");
    }
    // Malformed JSON, and a body over the limit.
    let resp = app
        .client
        .post(format!("{}/v1/tools", app.base))
        .bearer_auth(&key)
        .header("content-type", "application/json")
        .body("{\"name\": ")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::BAD_REQUEST);
    let huge = "x".repeat(2 * 1024 * 1024);
    let resp = app
        .client
        .post(format!("{}/v1/tools", app.base))
        .bearer_auth(&key)
        .header("content-type", "application/json")
        .body(huge)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::PAYLOAD_TOO_LARGE);
});

both_backends!(health_and_readiness, |app| {
    assert_eq!(app.get("/healthz", "").await.1["status"], "ok");
    assert_eq!(app.get("/readyz", "").await.1["status"], "ready");
    let (s, doc) = app.get("/openapi.json", "").await;
    assert_eq!(
        (s, doc["openapi"].as_str().map(|v| v.starts_with("3.1"))),
        (StatusCode::OK, Some(true))
    );
});

#[test]
fn the_openapi_document_covers_every_endpoint() {
    let doc = serde_json::to_value(switchboard_server::openapi()).unwrap();
    let paths = doc["paths"].as_object().unwrap();
    for (path, method) in [
        ("/v1/tenants", "post"),
        ("/v1/tenants/{tenant_id}/api-keys", "post"),
        ("/v1/api-keys", "post"),
        ("/v1/api-keys/{key_id}", "delete"),
        ("/v1/features", "put"),
        ("/v1/phone_numbers/{number}", "put"),
        ("/v1/secrets/{name}", "put"),
        ("/v1/tools", "post"),
        ("/v1/tools:validate", "post"),
        ("/v1/tools/{name}", "put"),
        ("/v1/tools/{name}:test", "post"),
        ("/v1/tools/{name}:replay", "post"),
        ("/v1/tools/{name}/versions", "get"),
        ("/v1/agents/{name}", "put"),
        ("/v1/agents/{name}/toolset", "get"),
        ("/v1/calls", "post"),
        ("/v1/calls", "get"),
        ("/v1/calls/{call_id}", "delete"),
        ("/v1/calls/{call_id}/invocations", "post"),
        ("/v1/calls/{call_id}/invocations", "get"),
        ("/v1/calls/{call_id}/responses/{response_id}/cancel", "post"),
        ("/v1/mcp-servers", "get"),
        ("/v1/mcp-servers/{label}", "put"),
        ("/v1/mcp-servers/{label}", "delete"),
        ("/v1/mcp-servers/{label}/tools", "get"),
        ("/v1/toolkits", "get"),
        ("/v1/toolkits/{name}", "get"),
        ("/v1/agents/{name}/connections/{toolkit}", "post"),
        ("/v1/agents/{name}/connections/{toolkit}", "delete"),
        ("/v1/connections", "get"),
        ("/v1/oauth/callback", "get"),
        ("/v1/memory/callers/{caller}", "get"),
        ("/v1/memory/callers/{caller}", "delete"),
        ("/healthz", "get"),
        ("/readyz", "get"),
    ] {
        assert!(
            paths.get(path).and_then(|p| p.get(method)).is_some(),
            "{method} {path} is not documented"
        );
    }
    // Every operation names each of its path's parameters (on itself or on its path), so a
    // client or a schema-driven tool can fill them in.
    for (path, item) in paths {
        let names: Vec<&str> = path
            .split('{')
            .skip(1)
            .filter_map(|s| s.split_once('}').map(|(n, _)| n))
            .collect();
        let declared = |params: &Value, name: &str| {
            params
                .as_array()
                .is_some_and(|all| all.iter().any(|p| p["name"] == name && p["in"] == "path"))
        };
        for (method, op) in item.as_object().unwrap() {
            if method == "parameters" {
                continue;
            }
            for name in &names {
                assert!(
                    declared(&item["parameters"], name) || declared(&op["parameters"], name),
                    "{method} {path} does not declare its path parameter `{name}`"
                );
            }
        }
    }
    insta::assert_json_snapshot!("openapi", doc);
}

#[tokio::test]
async fn a_tenant_at_its_live_call_cap_gets_429() {
    let mut app = spawn_app(Backend::Sqlite).await;
    app.stop_server().await;
    let config = switchboard_server::ServerConfig {
        max_calls_per_tenant: 2,
        ..Default::default()
    };
    let (base, state, stop, server) = support::start_with(&app.url, app.key.clone(), config).await;
    let view = TestApp::view(&app, base);
    let key = acme(&view, "acme").await;
    for id in ["c1", "c2"] {
        assert_eq!(
            view.post("/v1/calls", &key, json!({"call_id": id})).await.0,
            StatusCode::CREATED
        );
    }
    let (s, body) = view.post("/v1/calls", &key, json!({"call_id": "c3"})).await;
    assert_eq!(
        (s, body["error"]["code"].clone()),
        (StatusCode::TOO_MANY_REQUESTS, json!("rate_limited"))
    );
    // Ending one frees a place.
    view.delete("/v1/calls/c1", &key).await;
    assert_eq!(
        view.post("/v1/calls", &key, json!({"call_id": "c3"}))
            .await
            .0,
        StatusCode::CREATED
    );
    let _ = stop.send(());
    let _ = server.await;
    state.store.close().await;
    app.stop().await;
}

#[tokio::test]
async fn a_tenant_over_its_rate_gets_429_with_retry_after() {
    let mut app = spawn_app(Backend::Sqlite).await;
    app.stop_server().await;
    let config = switchboard_server::ServerConfig {
        tenant_rate_per_s: 2,
        ..Default::default()
    };
    let (base, state, stop, server) = support::start_with(&app.url, app.key.clone(), config).await;
    let (_, key) = state
        .store
        .create_tenant("acme", "Acme", &json!({}))
        .await
        .map(|_| ())
        .and(state.store.create_api_key(Some("acme"), "k").await)
        .unwrap();
    let key = secrecy::ExposeSecret::expose_secret(&key).to_owned();
    let client = reqwest::Client::new();
    let mut limited = None;
    for _ in 0..10 {
        let r = client
            .get(format!("{base}/v1/tools"))
            .bearer_auth(&key)
            .send()
            .await
            .unwrap();
        if r.status() == StatusCode::TOO_MANY_REQUESTS {
            limited = Some(r);
            break;
        }
    }
    let r = limited.expect("the sixth quick request at most is limited");
    assert!(r.headers().get("retry-after").is_some());
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"]["code"], "rate_limited");
    let _ = stop.send(());
    let _ = server.await;
    state.store.close().await;
    app.stop().await;
}
