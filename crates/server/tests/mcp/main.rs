//! MCP both ways, against the official MCP Python SDK as the real peer (on 127.0.0.1 only):
//! its client calls an agent's tools over `/v1/agents/{name}/mcp` and a call's over
//! `/v1/calls/{call_id}/mcp`, in both protocol eras, and its server is a tenant's tool source.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod eras;
mod ids;
mod pool;
mod python;
mod sessions;
#[allow(dead_code)]
#[path = "../api/support.rs"]
mod support;

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{Value, json};
use support::{Backend, TestApp, acme, invoke, spawn_app};
use switchboard_server::ServerConfig;
use switchboard_server::mcp::McpSettings;

use python::{CalcServer, client, free_port};

fn endpoint(app: &TestApp, agent: &str) -> String {
    format!("{}/v1/agents/{agent}/mcp", app.base)
}

/// Polls `GET /v1/calls/{id}` until its status is `status`.
async fn wait_for_status(app: &TestApp, key: &str, call: &str, status: &str) -> Value {
    let started = Instant::now();
    loop {
        let (_, body) = app.get(&format!("/v1/calls/{call}"), key).await;
        if body["status"] == status {
            return body;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "call {call} is not {status}: {body}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn text_json(result: &Value) -> Value {
    serde_json::from_str(result["text"].as_str().unwrap()).unwrap()
}

both_backends!(an_mcp_client_lists_and_calls_an_agents_tools, |app| {
    let key = acme(&app, "acme").await;
    let out = client(&json!({
        "url": endpoint(&app, "assistant"),
        "mode": "legacy",
        "headers": {"Authorization": format!("Bearer {key}"), "X-Switchboard-User": "{\"id\": \"u_42\"}"},
        "calls": [
            {"name": "save_meal", "arguments": {"meal_type": "lunch", "dishes": ["soup"]}},
            {"name": "save_meal", "arguments": {"meal_type": "brunch"}},
            {"name": "launch_rocket", "arguments": {}},
        ],
    }))
    .await;
    let mut names: Vec<&str> = out["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    names.sort_unstable();
    assert_eq!(names, ["request_transfer", "save_meal"]);
    let save_meal = out["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "save_meal")
        .unwrap();
    assert_eq!(save_meal["description"], "Log a meal the user consumed");
    assert_eq!(
        save_meal["input_schema"]["required"],
        json!(["meal_type", "dishes"])
    );

    let [ok, invalid, unknown] = out["results"].as_array().unwrap().as_slice() else {
        panic!("three results: {out}");
    };
    assert_eq!(ok["is_error"], false, "{ok}");
    assert_eq!(
        text_json(ok),
        json!({"ok": true, "message": "I've logged your lunch!", "data": {}})
    );
    assert_eq!(invalid["is_error"], true, "{invalid}");
    let error = text_json(invalid);
    assert_eq!(
        (
            error["error"].clone(),
            error["details"][0]["parameter"].clone()
        ),
        (json!("invalid_arguments"), json!("dishes"))
    );
    assert_eq!(unknown["protocol_error"]["code"], -32602, "{unknown}");
    assert!(
        unknown["protocol_error"]["message"]
            .as_str()
            .unwrap()
            .contains("has no tool `launch_rocket`"),
        "{unknown}"
    );

    // One call for the session, with the user from the header, ended when the session closed.
    let call_id = ok["meta"]["switchboard/call_id"].as_str().unwrap();
    assert_eq!(invalid["meta"]["switchboard/call_id"], call_id);
    let call = wait_for_status(&app, &key, call_id, "ended").await;
    assert_eq!(call["agent"], "assistant");
    assert_eq!(call["context"]["user"]["id"], "u_42");
    assert_eq!(
        call["context"]["workflow"]["logged_meals"],
        json!([{"meal_type": "lunch", "dishes": ["soup"]}])
    );
    let tools: Vec<&str> = call["invocations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["tool"].as_str().unwrap())
        .collect();
    assert_eq!(tools, ["save_meal", "save_meal", "launch_rocket"]);
});

both_backends!(the_mcp_endpoint_needs_the_tenants_key_and_agent, |app| {
    let key = acme(&app, "acme").await;
    let other = app.tenant("globex").await;
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    let post = |key: Option<&str>, agent: &str, headers: Vec<(&'static str, String)>| {
        let mut req = app
            .client
            .post(endpoint(&app, agent))
            .header("accept", "application/json, text/event-stream")
            .json(&initialize);
        if let Some(k) = key {
            req = req.bearer_auth(k);
        }
        for (name, value) in headers {
            req = req.header(name, value);
        }
        req.send()
    };
    let status = |r: reqwest::Response| r.status();
    assert_eq!(
        status(post(None, "assistant", vec![]).await.unwrap()),
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        status(post(Some("sb_wrong"), "assistant", vec![]).await.unwrap()),
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        status(post(Some(&other), "assistant", vec![]).await.unwrap()),
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        status(post(Some(&key), "nobody", vec![]).await.unwrap()),
        StatusCode::NOT_FOUND
    );
    let bad_user = post(
        Some(&key),
        "assistant",
        vec![("x-switchboard-user", "[1]".to_owned())],
    )
    .await
    .unwrap();
    assert_eq!(bad_user.status(), StatusCode::BAD_REQUEST);
    let text = bad_user.text().await.unwrap();
    assert!(
        text.contains("X-Switchboard-User header must be a JSON object"),
        "{text}"
    );
    // A Host that is not allowed (DNS rebinding) is refused before anything else.
    let rebinding = post(
        Some(&key),
        "assistant",
        vec![("host", "evil.example.com".to_owned())],
    )
    .await
    .unwrap();
    assert!(
        rebinding.status().is_client_error(),
        "{}",
        rebinding.status()
    );
    assert_eq!(
        status(post(Some(&key), "assistant", vec![]).await.unwrap()),
        StatusCode::OK
    );
});

#[tokio::test]
async fn stateless_mcp_runs_each_request_in_its_own_call_or_the_named_one() {
    let mut app = spawn_app(Backend::Sqlite).await;
    app.stop_server().await;
    let config = ServerConfig {
        tenant_rate_per_s: 10_000,
        mcp: McpSettings {
            stateless: true,
            ..McpSettings::default()
        },
        ..ServerConfig::default()
    };
    let (base, state, stop, server) = support::start_with(&app.url, app.key.clone(), config).await;
    let view = TestApp::view(&app, base);
    let key = acme(&view, "acme").await;
    let meal =
        json!({"name": "save_meal", "arguments": {"meal_type": "lunch", "dishes": ["soup"]}});
    let out = client(&json!({
        "url": endpoint(&view, "assistant"),
        "headers": {"Authorization": format!("Bearer {key}")},
        "calls": [meal, meal],
    }))
    .await;
    let ids: Vec<&str> = out["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["meta"]["switchboard/call_id"].as_str().unwrap())
        .collect();
    assert_ne!(ids[0], ids[1], "a call per request: {out}");
    for id in &ids {
        wait_for_status(&view, &key, id, "ended").await;
    }
    // A request that names a call runs in it, and leaves it going.
    assert_eq!(
        view.post("/v1/calls", &key, json!({"call_id": "c1"}))
            .await
            .0,
        StatusCode::CREATED
    );
    let out = client(&json!({
        "url": endpoint(&view, "assistant"),
        "headers": {"Authorization": format!("Bearer {key}"), "X-Switchboard-Call-Id": "c1"},
        "calls": [meal],
    }))
    .await;
    assert_eq!(out["results"][0]["meta"]["switchboard/call_id"], "c1");
    let (_, call) = view.get("/v1/calls/c1", &key).await;
    assert_eq!(
        (
            call["status"].clone(),
            call["invocations"].as_array().unwrap().len()
        ),
        (json!("active"), 1)
    );
    let _ = stop.send(());
    let _ = server.await;
    state.store.close().await;
    app.stop().await;
}

/// Registers the calc server for a tenant and returns the registration as shown.
async fn register(app: &TestApp, key: &str, calc: &CalcServer) -> Value {
    let (s, body) = app
        .put(
            "/v1/mcp-servers/calc",
            key,
            json!({"url": calc.url(), "headers": {"X-Api-Key": "k-very-secret-7"}}),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{body}");
    body
}

both_backends!(an_mcp_server_is_a_tool_source, |app| {
    let key = acme(&app, "acme").await;
    let calc = CalcServer::start(free_port()).await;
    let shown = register(&app, &key, &calc).await;
    assert_eq!(
        (
            shown["transport"].clone(),
            shown["endpoint"].clone(),
            shown["header_names"].clone()
        ),
        (
            json!("http"),
            json!(format!("http://127.0.0.1:{}", calc.port)),
            json!(["X-Api-Key"])
        )
    );
    assert!(shown["tools"].as_array().unwrap().contains(&json!("add")));
    let (_, listed) = app.get("/v1/mcp-servers", &key).await;
    assert_eq!(listed["items"][0]["label"], "calc");
    assert!(
        !listed.to_string().contains("k-very-secret-7") && !listed.to_string().contains("/mcp"),
        "{listed}"
    );
    let (s, tools) = app.get("/v1/mcp-servers/calc/tools", &key).await;
    assert_eq!(s, StatusCode::OK, "{tools}");
    let add = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "add")
        .unwrap();
    assert_eq!(
        (add["attach_as"].clone(), add["read_only"].clone()),
        (json!("calc/add"), json!(true))
    );

    // A native `slow` tool makes the server's `slow` take the alias `calc_slow`.
    let native_slow = json!({"name": "slow", "description": "Native slow", "actions": [{"type": "respond", "message": "native"}]});
    assert_eq!(
        app.post("/v1/tools", &key, native_slow).await.0,
        StatusCode::CREATED
    );
    let total = json!({"name": "total", "description": "Adds 2 with the calculator",
        "parameters": [{"name": "x", "type": "integer", "required": true}],
        "actions": [{"type": "mcp.call", "server": "calc", "tool": "add", "arguments": {"a": "{{params.x}}", "b": 2}, "into": "result.total"}]});
    assert_eq!(
        app.post("/v1/tools", &key, total).await.0,
        StatusCode::CREATED
    );
    let agent = json!({"instructions": "Calculate.", "tools": [
        {"tool": "slow"}, {"tool": "total"}, {"tool": "calc/add"}, {"tool": "calc/slow"}, {"tool": "calc/whoami"}, {"tool": "calc/regional"}, {"tool": "calc/fail"}, {"tool": "calc/stats"}]});
    let (s, body) = app.put("/v1/agents/math", &key, agent).await;
    assert_eq!(s, StatusCode::OK, "{body}");
    let (s, bad) = app
        .put(
            "/v1/agents/math2",
            &key,
            json!({"tools": [{"tool": "calc/divide"}]}),
        )
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert!(
        bad["error"]["message"]
            .as_str()
            .unwrap()
            .contains("has no tool `divide`; it has: add"),
        "{bad}"
    );
    let (s, bad) = app
        .put(
            "/v1/agents/math2",
            &key,
            json!({"tools": [{"tool": "crm/x"}]}),
        )
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert!(
        bad["error"]["message"]
            .as_str()
            .unwrap()
            .contains("PUT /v1/mcp-servers/crm"),
        "{bad}"
    );

    let (_, toolset) = app.get("/v1/agents/math/toolset?format=mcp", &key).await;
    let mut names: Vec<&str> = toolset["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "add",
            "calc_slow",
            "fail",
            "regional",
            "request_transfer",
            "slow",
            "stats",
            "total",
            "whoami"
        ]
    );
    let add_def = toolset["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "add")
        .unwrap();
    assert_eq!(add_def["inputSchema"]["required"], json!(["a", "b"]));

    let (s, _) = app
        .post("/v1/calls", &key, json!({"call_id": "m1", "agent": "math"}))
        .await;
    assert_eq!(s, StatusCode::CREATED);
    let r = invoke(&app, &key, "m1", "f1", "add", json!({"a": 2, "b": 3})).await;
    assert_eq!(r["result"], json!({"ok": true, "data": {"sum": 5}}), "{r}");
    let r = invoke(&app, &key, "m1", "f2", "total", json!({"x": 40})).await;
    assert_eq!(
        r["result"],
        json!({"ok": true, "data": {"total": {"sum": 42}}}),
        "{r}"
    );
    let r = invoke(&app, &key, "m1", "f3", "whoami", json!({})).await;
    // The header reached the server, over the current revision (discovered, no handshake).
    assert_eq!(
        r["result"]["data"],
        json!({"api_key": "k-very-secret-7", "protocol": "2026-07-28"}),
        "{r}"
    );
    // A parameter the tool marks `x-mcp-header` travels in its header too (the server checks
    // that they agree).
    let r = invoke(
        &app,
        &key,
        "m1",
        "f3r",
        "regional",
        json!({"region": "eu-west"}),
    )
    .await;
    assert_eq!(
        r["result"]["data"],
        json!({"region": "eu-west", "header": "eu-west"}),
        "{r}"
    );
    let r = invoke(&app, &key, "m1", "f4", "fail", json!({})).await;
    assert_eq!(
        (r["error"].clone(), r["result"]["tool"].clone()),
        (json!("tool_execution_failed"), json!("fail"))
    );
    assert!(
        r["result"]["message"]
            .as_str()
            .unwrap()
            .contains("MCP tool `fail` on `calc` failed"),
        "{r}"
    );
    let r = invoke(&app, &key, "m1", "f5", "add", json!({"a": "two"})).await;
    assert_eq!(r["error"], "invalid_arguments", "{r}");
    let r = invoke(&app, &key, "m1", "f6", "slow", json!({})).await;
    assert_eq!(r["result"]["message"], "native");
});

#[tokio::test]
async fn a_dead_mcp_server_is_a_quick_clear_error_and_the_call_goes_on() {
    let app = spawn_app(Backend::Sqlite).await;
    let key = acme(&app, "acme").await;
    let port = free_port();
    let calc = CalcServer::start(port).await;
    register(&app, &key, &calc).await;
    let agent = json!({"tools": [{"tool": "save_meal"}, {"tool": "calc/add"}, {"tool": "calc/slow"}, {"tool": "calc/stats"}]});
    assert_eq!(
        app.put("/v1/agents/math", &key, agent).await.0,
        StatusCode::OK
    );
    let (s, _) = app
        .post("/v1/calls", &key, json!({"call_id": "d1", "agent": "math"}))
        .await;
    assert_eq!(s, StatusCode::CREATED);
    assert_eq!(
        invoke(&app, &key, "d1", "f1", "add", json!({"a": 1, "b": 1})).await["ok"],
        true
    );

    // Killed in the middle of a call: the invocation answers soon, with a clear error.
    let app = std::sync::Arc::new(app);
    let slow = tokio::spawn({
        let (app, key) = (std::sync::Arc::clone(&app), key.clone());
        async move {
            let started = Instant::now();
            let r = invoke(&app, &key, "d1", "f2", "slow", json!({"seconds": 10})).await;
            (r, started.elapsed())
        }
    });
    tokio::time::sleep(Duration::from_millis(700)).await;
    calc.kill();
    let (r, took) = slow.await.unwrap();
    assert_eq!(r["error"], "upstream_unavailable", "{r}");
    assert!(
        r["result"]["message"]
            .as_str()
            .unwrap()
            .contains("MCP server `calc`"),
        "{r}"
    );
    assert!(took < Duration::from_secs(4), "answered after {took:?}");
    // While it is down: the same clear error, fast; the call's other tools still work.
    let started = Instant::now();
    let r = invoke(&app, &key, "d1", "f3", "add", json!({"a": 1, "b": 2})).await;
    assert_eq!(r["error"], "upstream_unavailable", "{r}");
    assert!(started.elapsed() < Duration::from_secs(3));
    let r = invoke(
        &app,
        &key,
        "d1",
        "f4",
        "save_meal",
        json!({"meal_type": "lunch", "dishes": ["soup"]}),
    )
    .await;
    assert_eq!(r["ok"], true, "{r}");
    // Back up on the same port: the next call opens a new session and works.
    let calc = CalcServer::start(port).await;
    let r = invoke(&app, &key, "d1", "f5", "add", json!({"a": 1, "b": 2})).await;
    assert_eq!(r["result"]["data"], json!({"sum": 3}), "{r}");
    drop(calc);
    if let Ok(app) = std::sync::Arc::try_unwrap(app) {
        app.stop().await;
    }
}

#[tokio::test]
async fn a_slow_mcp_tool_times_out_and_is_cancelled_upstream() {
    let app = spawn_app(Backend::Sqlite).await;
    let key = acme(&app, "acme").await;
    let calc = CalcServer::start(free_port()).await;
    register(&app, &key, &calc).await;
    let hurry = json!({"name": "hurry", "description": "Waits at most a second", "timeout": 1,
        "actions": [{"type": "mcp.call", "server": "calc", "tool": "slow", "arguments": {"seconds": 5}}]});
    assert_eq!(
        app.post("/v1/tools", &key, hurry).await.0,
        StatusCode::CREATED
    );
    let agent =
        json!({"tools": [{"tool": "hurry"}, {"tool": "calc/stats"}, {"tool": "calc/grow"}]});
    assert_eq!(
        app.put("/v1/agents/math", &key, agent).await.0,
        StatusCode::OK
    );
    let (s, _) = app
        .post("/v1/calls", &key, json!({"call_id": "t1", "agent": "math"}))
        .await;
    assert_eq!(s, StatusCode::CREATED);
    let started = Instant::now();
    let r = invoke(&app, &key, "t1", "f1", "hurry", json!({})).await;
    assert_eq!(r["error"], "timeout", "{r}");
    assert!(started.elapsed() < Duration::from_secs(3));
    // The server was told: its `slow` run was cancelled, not finished.
    let deadline = Instant::now() + Duration::from_secs(5);
    for attempt in 0.. {
        let fc = format!("s{attempt}");
        let r = invoke(&app, &key, "t1", &fc, "stats", json!({})).await;
        if r["result"]["data"]["cancelled"] == 1 {
            assert_eq!(r["result"]["data"]["finished"], 0);
            break;
        }
        assert!(Instant::now() < deadline, "no cancellation seen: {r}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // `notifications/tools/list_changed` refreshes the kept tool list.
    let r = invoke(&app, &key, "t1", "g1", "grow", json!({})).await;
    assert_eq!(r["ok"], true, "{r}");
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let (_, tools) = app.get("/v1/mcp-servers/calc/tools", &key).await;
        if tools["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "multiply")
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the new tool never showed: {tools}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    drop(calc);
    app.stop().await;
}

both_backends!(mcp_server_registrations_are_checked, |app| {
    let key = app.tenant("acme").await;
    let cases = [
        (json!({}), "give the server's `url`"),
        (json!({"url": "http://x", "command": "y"}), "not both"),
        (
            json!({"command": "python3", "args": ["server.py"]}),
            "--allow-mcp-stdio",
        ),
        (json!({"url": "ftp://example.com/mcp"}), "`ftp`"),
        (
            json!({"url": "https://mcp.example.com/mcp", "headers": {"bad header": "x"}}),
            "header name `bad header`",
        ),
        (
            json!({"url": "https://mcp.example.com/mcp", "headers": {"Mcp-Session-Id": "x"}}),
            "set by the MCP protocol itself",
        ),
    ];
    for (body, message) in cases {
        let (s, got) = app.put("/v1/mcp-servers/calc", &key, body.clone()).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{body}: {got}");
        assert!(
            got["error"]["message"].as_str().unwrap().contains(message),
            "{body}: {got}"
        );
    }
    let (s, got) = app
        .put(
            "/v1/mcp-servers/bad label",
            &key,
            json!({"url": "https://mcp.example.com/mcp"}),
        )
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{got}");
    // An unreachable server is registered; why its tools are unknown is said.
    let port = free_port();
    let (s, got) = app
        .put(
            "/v1/mcp-servers/calc",
            &key,
            json!({"url": format!("http://127.0.0.1:{port}/mcp")}),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{got}");
    assert!(
        got["tools_error"]
            .as_str()
            .unwrap()
            .contains("not reachable"),
        "{got}"
    );
    let (s, got) = app.get("/v1/mcp-servers/calc/tools", &key).await;
    assert_eq!(
        (s, got["error"]["code"].clone()),
        (StatusCode::BAD_GATEWAY, json!("upstream_unavailable"))
    );
    let other = app.tenant("globex").await;
    assert_eq!(
        app.get("/v1/mcp-servers/calc", &other).await.0,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        app.delete("/v1/mcp-servers/calc", &key).await.0,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        app.get("/v1/mcp-servers/calc", &key).await.0,
        StatusCode::NOT_FOUND
    );
});

/// The JSON-RPC message with `id` in an MCP POST's answer (an SSE stream or plain JSON).
fn rpc_answer(body: &str, id: u64) -> Value {
    body.lines()
        .map(|l| l.strip_prefix("data:").unwrap_or(l).trim())
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|m| m["id"] == id)
        .unwrap_or_else(|| panic!("no answer {id} in {body}"))
}

#[tokio::test]
async fn an_open_mcp_session_ends_its_call_when_the_server_shuts_down() {
    let mut app = spawn_app(Backend::Sqlite).await;
    let key = acme(&app, "acme").await;
    let url = endpoint(&app, "assistant");
    let post = |session: Option<String>, body: Value| {
        let mut req = app
            .client
            .post(&url)
            .bearer_auth(&key)
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-06-18")
            .json(&body);
        if let Some(s) = session {
            req = req.header("mcp-session-id", s);
        }
        req.send()
    };
    let init = post(None, json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}))
    .await
    .unwrap();
    let session = init.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let _ = init.text().await.unwrap();
    post(
        Some(session.clone()),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    )
    .await
    .unwrap();
    let called = post(
        Some(session.clone()),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "save_meal", "arguments": {"meal_type": "lunch", "dishes": ["soup"]}}}),
    )
    .await
    .unwrap()
    .text()
    .await
    .unwrap();
    let answer = rpc_answer(&called, 2);
    let call_id = answer["result"]["_meta"]["switchboard/call_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{answer}"))
        .to_owned();
    assert_eq!(
        app.get(&format!("/v1/calls/{call_id}"), &key).await.1["status"],
        "active"
    );
    // The session is still open, with its server-to-client stream, when the server stops:
    // stopping ends its call and does not wait for the client to hang up.
    let stream = app
        .client
        .get(&url)
        .bearer_auth(&key)
        .header("accept", "text/event-stream")
        .header("mcp-protocol-version", "2025-06-18")
        .header("mcp-session-id", &session)
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), StatusCode::OK);
    tokio::time::timeout(Duration::from_secs(10), app.stop_server())
        .await
        .expect("shutdown is not held up by an open MCP stream");
    drop(stream);
    let row = app
        .state
        .store
        .get_call("acme", &call_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(row.status.as_str(), "ended");
    app.stop().await;
}

#[tokio::test]
async fn a_stdio_mcp_server_works_where_the_operator_allows_it() {
    let mut app = spawn_app(Backend::Sqlite).await;
    app.stop_server().await;
    let config = ServerConfig {
        tenant_rate_per_s: 10_000,
        mcp: McpSettings {
            allow_stdio: true,
            ..McpSettings::default()
        },
        ..ServerConfig::default()
    };
    let (base, state, stop, server) = support::start_with(&app.url, app.key.clone(), config).await;
    let view = TestApp::view(&app, base);
    let key = acme(&view, "acme").await;
    let script = python::scripts().join("calc_server.py");
    let (s, shown) = view
        .put(
            "/v1/mcp-servers/local",
            &key,
            json!({"command": python::python(), "args": [script, "stdio"], "env": {"CALC_TOKEN": "t-secret"}}),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{shown}");
    assert_eq!(
        (shown["transport"].clone(), shown["header_names"].clone()),
        (json!("stdio"), json!(["CALC_TOKEN"]))
    );
    assert!(
        shown["tools"].as_array().unwrap().contains(&json!("add")),
        "{shown}"
    );
    let agent = json!({"tools": [{"tool": "local/add"}]});
    assert_eq!(
        view.put("/v1/agents/math", &key, agent).await.0,
        StatusCode::OK
    );
    let (s, _) = view
        .post("/v1/calls", &key, json!({"call_id": "s1", "agent": "math"}))
        .await;
    assert_eq!(s, StatusCode::CREATED);
    let r = invoke(&view, &key, "s1", "f1", "add", json!({"a": 20, "b": 22})).await;
    assert_eq!(r["result"]["data"], json!({"sum": 42}), "{r}");
    assert_eq!(
        view.delete("/v1/mcp-servers/local", &key).await.0,
        StatusCode::NO_CONTENT
    );
    let _ = stop.send(());
    let _ = server.await;
    state.store.close().await;
    app.stop().await;
}

#[tokio::test]
async fn an_unreachable_mcp_server_trips_its_breaker_and_fails_fast() {
    let app = spawn_app(Backend::Sqlite).await;
    let key = acme(&app, "acme").await;
    let calc = CalcServer::start(free_port()).await;
    register(&app, &key, &calc).await;
    let agent = json!({"tools": [{"tool": "save_meal"}, {"tool": "calc/add"}]});
    assert_eq!(
        app.put("/v1/agents/math", &key, agent).await.0,
        StatusCode::OK
    );
    let (s, _) = app
        .post("/v1/calls", &key, json!({"call_id": "b1", "agent": "math"}))
        .await;
    assert_eq!(s, StatusCode::CREATED);
    calc.kill();
    // Five failures in a row (gone, then refused), each a different sum (the same one a sixth
    // time would be a model in a loop, answered by the runaway guard)…
    for i in 0..5 {
        let r = invoke(
            &app,
            &key,
            "b1",
            &format!("f{i}"),
            "add",
            json!({"a": 1, "b": i}),
        )
        .await;
        assert_eq!(r["error"], "upstream_unavailable", "{r}");
        assert!(
            !r["result"]["message"].as_str().unwrap().contains("paused"),
            "{r}"
        );
    }
    // …and the next call does not even try: it fails at once, saying so.
    let started = Instant::now();
    let r = invoke(&app, &key, "b1", "f5", "add", json!({"a": 1, "b": 5})).await;
    assert_eq!(r["error"], "upstream_unavailable", "{r}");
    let message = r["result"]["message"].as_str().unwrap();
    assert!(
        message.contains("MCP server `calc`") && message.contains("paused"),
        "{r}"
    );
    assert!(started.elapsed() < Duration::from_secs(1));
    assert!(matches!(
        app.state.mcp.clients.breaker_state("acme", "calc"),
        switchboard_runtime::http::BreakerState::Open { .. }
    ));
    // Another tenant's breaker for its own `calc` is its own.
    assert_eq!(
        app.state.mcp.clients.breaker_state("globex", "calc"),
        switchboard_runtime::http::BreakerState::Closed
    );
    // The call's other tools go on.
    let r = invoke(
        &app,
        &key,
        "b1",
        "f6",
        "save_meal",
        json!({"meal_type": "lunch", "dishes": ["soup"]}),
    )
    .await;
    assert_eq!(r["ok"], true, "{r}");
    app.stop().await;
}

#[tokio::test]
async fn a_call_keeps_the_mcp_tools_it_started_with_on_another_node() {
    let config = ServerConfig {
        tenant_rate_per_s: 10_000,
        lease: Duration::from_secs(3600),
        ..ServerConfig::default()
    };
    let a = support::spawn_app_with(Backend::Sqlite, config.clone()).await;
    let (base, b_state, stop, server) = support::start_with(&a.url, a.key.clone(), config).await;
    let b = TestApp::view(&a, base);
    let key = acme(&a, "acme").await;
    let calc = CalcServer::start(free_port()).await;
    register(&a, &key, &calc).await;
    let agent = json!({"tools": [{"tool": "calc/add"}, {"tool": "calc/grow"}]});
    assert_eq!(
        a.put("/v1/agents/math", &key, agent).await.0,
        StatusCode::OK
    );
    let (s, _) = a
        .post("/v1/calls", &key, json!({"call_id": "p1", "agent": "math"}))
        .await;
    assert_eq!(s, StatusCode::CREATED);
    // During the call the server grows `multiply`, and the agent is given it.
    assert_eq!(
        invoke(&a, &key, "p1", "f1", "grow", json!({})).await["ok"],
        true
    );
    let agent =
        json!({"tools": [{"tool": "calc/add"}, {"tool": "calc/grow"}, {"tool": "calc/multiply"}]});
    let (s, body) = a.put("/v1/agents/math", &key, agent).await;
    assert_eq!(s, StatusCode::OK, "{body}");
    // A dies; B takes the call over with the tools it started with, not the server's new list.
    support::lease_lapsed(&a).await;
    let r = invoke(&b, &key, "p1", "f2", "multiply", json!({"a": 2, "b": 3})).await;
    assert_eq!(r["error"], "tool_not_found", "{r}");
    let r = invoke(&b, &key, "p1", "f3", "add", json!({"a": 2, "b": 3})).await;
    assert_eq!(r["result"]["data"], json!({"sum": 5}), "{r}");
    assert!(
        b_state.calls.get("acme", "p1").is_some(),
        "B serves the call now"
    );
    // A new call gets the new tool.
    let (s, _) = b
        .post("/v1/calls", &key, json!({"call_id": "p2", "agent": "math"}))
        .await;
    assert_eq!(s, StatusCode::CREATED);
    let r = invoke(&b, &key, "p2", "f1", "multiply", json!({"a": 2, "b": 3})).await;
    assert_eq!(r["result"]["data"], json!({"product": 6}), "{r}");
    drop(calc);
    let _ = stop.send(());
    let _ = server.await;
    b_state.store.close().await;
    a.stop().await;
}

#[tokio::test]
async fn a_server_of_the_previous_revision_is_a_tool_source_too() {
    let app = spawn_app(Backend::Sqlite).await;
    let key = acme(&app, "acme").await;
    let calc = CalcServer::start_legacy(free_port()).await;
    let shown = register(&app, &key, &calc).await;
    assert!(
        shown["tools"].as_array().unwrap().contains(&json!("add")),
        "{shown}"
    );
    let agent = json!({"tools": [{"tool": "calc/add"}, {"tool": "calc/whoami"}]});
    assert_eq!(
        app.put("/v1/agents/math", &key, agent).await.0,
        StatusCode::OK
    );
    let (s, _) = app
        .post("/v1/calls", &key, json!({"call_id": "l1", "agent": "math"}))
        .await;
    assert_eq!(s, StatusCode::CREATED);
    let r = invoke(&app, &key, "l1", "f1", "add", json!({"a": 2, "b": 2})).await;
    assert_eq!(r["result"]["data"], json!({"sum": 4}), "{r}");
    // The client fell back to the handshake, and speaks the revision it agreed on.
    let r = invoke(&app, &key, "l1", "f2", "whoami", json!({})).await;
    assert_eq!(r["result"]["data"]["protocol"], "2025-11-25", "{r}");
    drop(calc);
    app.stop().await;
}
