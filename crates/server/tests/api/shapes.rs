//! The HTTP door takes a model's function call in the shape the model produced it, and answers
//! in the shape that goes back to that model.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::{Backend, TestApp, acme, spawn_app};

async fn invoke_raw(app: &TestApp, key: &str, body: Value) -> (StatusCode, Value) {
    app.post("/v1/calls/c1/invocations", key, body).await
}

#[tokio::test]
async fn arguments_may_be_the_models_json_text() {
    let app = spawn_app(Backend::Sqlite).await;
    let key = acme(&app, "acme").await;
    assert_eq!(
        app.post("/v1/calls", &key, json!({"call_id": "c1"}))
            .await
            .0,
        StatusCode::CREATED
    );
    // As OpenAI's events carry it: a string holding the JSON object.
    let (s, answer) = invoke_raw(
        &app,
        &key,
        json!({"function_call_id": "f1", "name": "save_meal",
        "arguments": "{\"meal_type\": \"lunch\", \"dishes\": [\"soup\"]}"}),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{answer}");
    assert_eq!(answer["ok"], true, "{answer}");
    assert!(
        answer.get("item").is_none(),
        "no item unless asked: {answer}"
    );
    // Broken JSON text is the model's mistake, answered like arguments_json's.
    let (s, answer) = invoke_raw(
        &app,
        &key,
        json!({"function_call_id": "f2", "name": "save_meal",
        "arguments": "{\"meal_type\": \"lunch\", "}),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{answer}");
    assert_eq!(answer["error"], "tool_args_parse_error", "{answer}");
    app.stop().await;
}

/// Arguments that are valid JSON but not an object are the model's mistake, whichever field or
/// item carries them: answered `tool_args_parse_error` (seed 004's "Tool arguments must be a
/// JSON object."), nothing run.
#[tokio::test]
async fn arguments_that_are_not_an_object_are_answered_tool_args_parse_error() {
    let app = spawn_app(Backend::Sqlite).await;
    let key = acme(&app, "acme").await;
    assert_eq!(
        app.post("/v1/calls", &key, json!({"call_id": "c1"}))
            .await
            .0,
        StatusCode::CREATED
    );
    let call = |fc: &str| json!({"function_call_id": fc, "name": "save_meal"});
    let with = |mut body: Value, field: &str, value: Value| {
        body[field] = value;
        body
    };
    let cases = [
        with(call("a1"), "arguments_json", json!("[1,2]")),
        with(call("a2"), "arguments_json", json!("\"text\"")),
        with(call("a3"), "arguments_json", json!("3")),
        with(call("a4"), "arguments_json", json!("null")),
        with(call("a5"), "arguments", json!([1, 2])),
        with(call("a6"), "arguments", json!(3)),
        with(call("a7"), "arguments", json!(true)),
        with(call("a8"), "arguments", json!("null")),
        json!({"item": {"type": "tool_use", "id": "a9", "name": "save_meal", "input": [1, 2]}}),
        json!({"item": {"type": "function_call", "call_id": "a10", "name": "save_meal", "arguments": "3"}}),
    ];
    for body in cases {
        let (s, answer) = invoke_raw(&app, &key, body.clone()).await;
        assert_eq!(s, StatusCode::OK, "{body}: {answer}");
        assert_eq!(
            (answer["ok"].clone(), answer["error"].clone()),
            (json!(false), json!("tool_args_parse_error")),
            "{body}: {answer}"
        );
        let message = answer["result"]["message"].as_str().unwrap_or_default();
        assert!(
            message.starts_with(
                "Tool arguments must be a JSON object; the arguments for save_meal are"
            ),
            "{body}: {answer}"
        );
    }
    let (_, view) = app.get("/v1/calls/c1", &key).await;
    assert_eq!(
        view["context"]["workflow"],
        json!({}),
        "nothing ran: {view}"
    );
    app.stop().await;
}

#[tokio::test]
async fn a_models_item_is_answered_with_the_matching_item() {
    let app = spawn_app(Backend::Sqlite).await;
    let key = acme(&app, "acme").await;
    assert_eq!(
        app.post("/v1/calls", &key, json!({"call_id": "c1"}))
            .await
            .0,
        StatusCode::CREATED
    );
    // An OpenAI Responses function_call item, passed through untouched.
    let item = json!({"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "save_meal",
        "arguments": "{\"meal_type\":\"lunch\",\"dishes\":[\"soup\"]}", "status": "completed"});
    let (s, answer) = invoke_raw(&app, &key, json!({"item": item, "response_id": "resp_1"})).await;
    assert_eq!(s, StatusCode::OK, "{answer}");
    assert_eq!(answer["function_call_id"], "call_1");
    assert_eq!(
        answer["item"],
        json!({"type": "function_call_output", "call_id": "call_1", "output": answer["output"]})
    );
    // The same item again is a repeat: the first answer, in the same shape.
    let (_, again) = invoke_raw(&app, &key, json!({"item": item})).await;
    assert_eq!(again["replayed"], true, "{again}");
    assert_eq!(again["item"], answer["item"]);
    // An Anthropic tool_use block; a failing tool is a tool_result with is_error.
    let block = json!({"type": "tool_use", "id": "toolu_1", "name": "save_meal", "input": {"meal_type": "brunch"}});
    let (s, answer) = invoke_raw(&app, &key, json!({"item": block})).await;
    assert_eq!(s, StatusCode::OK, "{answer}");
    assert_eq!(answer["error"], "invalid_arguments", "{answer}");
    assert_eq!(
        answer["item"],
        json!({"type": "tool_result", "tool_use_id": "toolu_1", "content": answer["output"], "is_error": true})
    );
    // A Chat Completions tool call, answered as a tool message.
    let chat = json!({"id": "call_c", "type": "function", "function": {"name": "save_meal",
        "arguments": "{\"meal_type\":\"dinner\",\"dishes\":[\"rice\"]}"}});
    let (_, answer) = invoke_raw(&app, &key, json!({"item": chat})).await;
    assert_eq!(
        answer["item"],
        json!({"role": "tool", "tool_call_id": "call_c", "content": answer["output"]})
    );
    // Plain fields may ask for an item too.
    let (_, answer) = invoke_raw(
        &app,
        &key,
        json!({"function_call_id": "f9", "name": "save_meal",
        "arguments": {"meal_type": "lunch", "dishes": []}, "answer_as": "anthropic"}),
    )
    .await;
    assert_eq!(answer["item"]["tool_use_id"], "f9", "{answer}");
    // Both at once, or an item that is not a function call: a 400 that names the fix.
    let (s, body) = invoke_raw(&app, &key, json!({"item": chat, "function_call_id": "x"})).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{body}");
    let (s, body) = invoke_raw(
        &app,
        &key,
        json!({"item": {"type": "message", "content": "hi"}}),
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("tool_use"),
        "{body}"
    );
    let (s, body) = invoke_raw(&app, &key, json!({"name": "save_meal"})).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{body}");
    let (_, call) = app.get("/v1/calls/c1", &key).await;
    assert_eq!(call["invocations"].as_array().unwrap().len(), 4, "{call}");
    app.stop().await;
}
