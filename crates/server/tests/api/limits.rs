//! The limits on JSON depth and template results, end to end: what a call accepts can be read
//! back, and what it refuses leaves the call as it was.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::both_backends;
use crate::support::{Backend, TestApp, invoke, spawn_app};

/// `[[[…1…]]]`, `depth` levels deep (built without recursion).
fn nested(depth: usize) -> Value {
    let mut v = json!(1);
    for _ in 0..depth {
        v = Value::Array(vec![v]);
    }
    v
}

/// A tenant whose default agent has `keep` (stores its argument `v` in `workflow.v`), `peek`
/// (answers with `workflow.v`), `blow_up` (a whole-value template that builds a huge list) and
/// `spread` (a map over 1000 items of 64 KB each); returns its key, with call `c1` started.
async fn tenant_with_a_call(app: &TestApp) -> String {
    let key = app.tenant("acme").await;
    let tools = [
        json!({"name": "keep", "description": "Keep a value",
               "parameters": [{"name": "v", "type": "array", "required": true}],
               "actions": [{"type": "context.set", "data": {"v": "{{params.v}}"}}]}),
        json!({"name": "peek", "description": "Show the kept value",
               "actions": [{"type": "context.set", "data": {"result.v": "{{workflow.v}}"}}]}),
        json!({"name": "blow_up", "description": "Build a huge value",
               "parameters": [{"name": "s", "type": "string", "required": true}],
               "actions": [{"type": "context.set", "data": {"big": "{{ [params.s] * 5000 }}"}}]}),
        json!({"name": "spread", "description": "Make 1000 large items",
               "actions": [{"type": "transform", "input": "{{ range(1000) | list }}", "op": "map",
                            "expr": "'x' * 64000 ~ item", "into": "spread"}]}),
    ];
    for tool in tools {
        let (s, body) = app.post("/v1/tools", &key, tool).await;
        assert_eq!(s, StatusCode::CREATED, "{body}");
    }
    let agent = json!({"instructions": "Help.", "default": true,
                       "tools": [{"tool": "keep"}, {"tool": "peek"}, {"tool": "blow_up"}, {"tool": "spread"}]});
    let (s, body) = app.put("/v1/agents/assistant", &key, agent).await;
    assert_eq!(s, StatusCode::OK, "{body}");
    let (s, body) = app.post("/v1/calls", &key, json!({"call_id": "c1"})).await;
    assert_eq!(s, StatusCode::CREATED, "{body}");
    key
}

/// The call answers `GET` and still holds `workflow.v` as `v` (or nothing).
async fn call_holds(app: &TestApp, key: &str, v: Option<&Value>) {
    let (s, call) = app.get("/v1/calls/c1", key).await;
    assert_eq!(s, StatusCode::OK, "{call}");
    assert_eq!(call["context"]["workflow"].get("v"), v);
}

both_backends!(json_depth_holds_on_write_and_read, |app| {
    let key = tenant_with_a_call(&app).await;
    // Arguments at the limit (64 levels with their object) are kept, read back, seen by the
    // next tool.
    let at_limit = nested(63);
    let r = invoke(&app, &key, "c1", "fc1", "keep", json!({"v": at_limit})).await;
    assert_eq!(r["ok"], true, "{r}");
    call_holds(&app, &key, Some(&at_limit)).await;
    let r = invoke(&app, &key, "c1", "fc2", "peek", json!({})).await;
    assert_eq!(r["result"]["data"]["v"], at_limit);

    // Deeper arguments — as JSON text (the 126 levels that once made the call unreadable), or
    // as an object in the body — are refused with the limit named, and nothing is written.
    let deep_text = json!({"v": nested(125)}).to_string();
    let (s, r) = app
        .post(
            "/v1/calls/c1/invocations",
            &key,
            json!({"function_call_id": "fc3", "name": "keep", "arguments_json": deep_text}),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{r}");
    assert_eq!(r["error"], "invalid_arguments", "{r}");
    let message = r["result"]["message"].as_str().unwrap();
    assert!(
        message.contains("nest 126 levels deep, over the limit of 64"),
        "{message}"
    );
    let (s, r) = app
        .post(
            "/v1/calls/c1/invocations",
            &key,
            json!({"function_call_id": "fc4", "name": "keep", "arguments": {"v": nested(200)}}),
        )
        .await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{r}");
    assert_eq!(r["error"]["code"], "too_deep");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("max_json_depth"),
        "{r}"
    );
    call_holds(&app, &key, Some(&at_limit)).await;

    // The call goes on.
    let r = invoke(&app, &key, "c1", "fc5", "keep", json!({"v": [1]})).await;
    assert_eq!(r["ok"], true, "{r}");
    call_holds(&app, &key, Some(&json!([1]))).await;
});

both_backends!(template_results_and_transforms_are_bounded, |app| {
    let key = tenant_with_a_call(&app).await;
    let r = invoke(
        &app,
        &key,
        "c1",
        "fc1",
        "blow_up",
        json!({"s": "s".repeat(100)}),
    )
    .await;
    assert_eq!(r["error"], "tool_execution_failed", "{r}");
    let message = r["result"]["message"].as_str().unwrap();
    assert!(
        message.contains("blow_up failed at /actions/0 (context.set)")
            && message.contains("max_template_output"),
        "{message}"
    );
    let r = invoke(&app, &key, "c1", "fc2", "spread", json!({})).await;
    assert_eq!(r["error"], "tool_execution_failed", "{r}");
    let message = r["result"]["message"].as_str().unwrap();
    assert!(
        message.contains("spread failed at /actions/0 (transform)")
            && message.contains("of 1000")
            && message.contains("max_transform_output"),
        "{message}"
    );
    let (s, call) = app.get("/v1/calls/c1", &key).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(
        call["context"]["workflow"],
        json!({}),
        "nothing was written"
    );
    let r = invoke(&app, &key, "c1", "fc3", "keep", json!({"v": [1]})).await;
    assert_eq!(r["ok"], true, "{r}");
});

// Every REST body is held to the same depth, not only invocations.
both_backends!(deep_request_bodies_are_refused_everywhere, |app| {
    let key = app.tenant("acme").await;
    let mut tool = json!({"name": "t", "description": "d",
                          "actions": [{"type": "context.set", "data": {"v": 1}}]});
    tool["actions"][0]["data"]["v"] = nested(100);
    let (s, r) = app.post("/v1/tools", &key, tool).await;
    assert_eq!(
        (s, r["error"]["code"].clone()),
        (StatusCode::UNPROCESSABLE_ENTITY, json!("too_deep")),
        "{r}"
    );
    let (s, r) = app
        .post(
            "/v1/calls",
            &key,
            json!({"call_id": "c2", "user": {"deep": nested(100)}}),
        )
        .await;
    assert_eq!(
        (s, r["error"]["code"].clone()),
        (StatusCode::UNPROCESSABLE_ENTITY, json!("too_deep")),
        "{r}"
    );
    assert_eq!(app.get("/v1/calls/c2", &key).await.0, StatusCode::NOT_FOUND);
});
