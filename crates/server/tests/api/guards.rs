//! Runaway guards over the HTTP door: an agent's overrides checked at save (each problem at its
//! JSON Pointer) and applied to its calls; a terminal tool run twice is `already_done`.

use super::*;

both_backends!(
    an_agents_guards_are_checked_at_save_and_applied_to_its_calls,
    |app| {
        let key = acme(&app, "acme").await;
        let bad = json!({"tools": [{"tool": "save_meal"}], "default": true,
        "guards": {"identical_calls": {"max": 0, "window": 60}, "calls_per_minute": "lots"}});
        let (s, body) = app.put("/v1/agents/assistant", &key, bad).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{body}");
        assert_eq!(body["error"]["code"], "invalid_agent");
        let mut pointers: Vec<&str> = body["error"]["details"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["pointer"].as_str().unwrap())
            .collect();
        pointers.sort_unstable();
        assert_eq!(
            pointers,
            [
                "/guards/calls_per_minute",
                "/guards/identical_calls/max",
                "/guards/identical_calls/window"
            ],
            "{body}"
        );
        let good = json!({"tools": [{"tool": "save_meal"}], "default": true,
        "guards": {"identical_calls": {"max": 2}}});
        let (s, body) = app.put("/v1/agents/assistant", &key, good).await;
        assert_eq!(s, StatusCode::OK, "{body}");
        assert_eq!(
            body["guards"],
            json!({"identical_calls": {"max": 2, "window_s": 60}, "calls_per_minute": 60})
        );
        let (s, started) = app.post("/v1/calls", &key, json!({"call_id": "c1"})).await;
        assert_eq!(s, StatusCode::CREATED, "{started}");
        // Saved after the call started: the call keeps the guards it started with.
        let (s, _) = app
            .put(
                "/v1/agents/assistant",
                &key,
                json!({"tools": [{"tool": "save_meal"}], "default": true}),
            )
            .await;
        assert_eq!(s, StatusCode::OK);
        let meal = json!({"meal_type": "lunch", "dishes": ["soup"]});
        let first = invoke(&app, &key, "c1", "fc1", "save_meal", meal.clone()).await;
        assert_eq!(first["result"]["ok"], true, "{first}");
        let second = invoke(&app, &key, "c1", "fc2", "save_meal", meal.clone()).await;
        assert_eq!(second["result"]["ok"], true, "{second}");
        let third = invoke(&app, &key, "c1", "fc3", "save_meal", meal).await;
        assert_eq!(third["error"], "loop_detected", "{third}");
        assert_eq!(third["result"]["details"]["guard"], "identical_calls");
        // A transfer, then another: the second is already done, and no second transfer is asked.
        let t = invoke(
            &app,
            &key,
            "c1",
            "fc4",
            "request_transfer",
            json!({"destination_id": "sales"}),
        )
        .await;
        assert_eq!(
            t["actions"],
            json!([{"type": "transfer", "target_uri": "sip:sales@example.com"}])
        );
        let again = invoke(
            &app,
            &key,
            "c1",
            "fc5",
            "request_transfer",
            json!({"destination_id": "support"}),
        )
        .await;
        assert_eq!(again["error"], "already_done", "{again}");
        assert_eq!(again["actions"], json!([]), "{again}");
        let (_, call) = app.get("/v1/calls/c1", &key).await;
        let errors: Vec<Value> = call["invocations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["error"].clone())
            .collect();
        assert_eq!(
            errors,
            [
                json!(null),
                json!(null),
                json!("loop_detected"),
                json!(null),
                json!("already_done")
            ],
            "{call}"
        );
        let (_, ctx) = app.get("/v1/calls/c1", &key).await;
        assert_eq!(
            ctx["context"]["workflow"]["logged_meals"]
                .as_array()
                .unwrap()
                .len(),
            2,
            "the refused call wrote nothing"
        );
    }
);

/// The document names every error code a model can get, the guards' included.
#[test]
fn the_openapi_document_lists_every_error_code() {
    let doc = serde_json::to_value(switchboard_server::openapi()).unwrap();
    let described = doc
        .pointer("/components/schemas/InvocationResult/properties/error/description")
        .and_then(Value::as_str)
        .unwrap_or_default();
    for code in switchboard_core::ErrorCode::ALL {
        assert!(
            described.contains(&format!("`{code}`")),
            "{code} is missing from {described:?}"
        );
    }
}

both_backends!(an_agents_turn_budget_is_checked_at_save_and_kept, |app| {
    let key = acme(&app, "acme").await;
    for bad in [
        json!(0),
        json!(199),
        json!(5001),
        json!(700.5),
        json!("700"),
        json!(-1),
    ] {
        let body = json!({"tools": [{"tool": "save_meal"}], "turn_budget_ms": bad});
        let (s, answer) = app.put("/v1/agents/assistant", &key, body).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{bad}: {answer}");
        assert_eq!(answer["error"]["code"], "invalid_agent");
        let details = answer["error"]["details"].as_array().unwrap();
        assert_eq!(details.len(), 1, "{answer}");
        assert_eq!(details[0]["pointer"], "/turn_budget_ms", "{answer}");
        assert!(
            details[0]["message"]
                .as_str()
                .unwrap()
                .contains("200 to 5000"),
            "{answer}"
        );
    }
    let (s, body) = app
        .put(
            "/v1/agents/assistant",
            &key,
            json!({"tools": [{"tool": "save_meal"}], "turn_budget_ms": 500}),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{body}");
    assert_eq!(body["turn_budget_ms"], 500);
    let (s, body) = app.get("/v1/agents/assistant", &key).await;
    assert_eq!(s, StatusCode::OK, "{body}");
    assert_eq!(body["turn_budget_ms"], 500, "kept across a read");
    // Left out: the default, not shown.
    let (s, body) = app
        .put(
            "/v1/agents/assistant",
            &key,
            json!({"tools": [{"tool": "save_meal"}]}),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{body}");
    assert!(body.get("turn_budget_ms").is_none(), "{body}");
});
