//! Requests the OpenAPI document calls valid are accepted, and answers are what it describes:
//! found by schema-driven fuzzing (scripts/fuzz-api.sh), kept here as plain requests.

use super::*;

/// The status and the `Allow` header of a request without a body.
async fn allow_of(app: &TestApp, method: Method, path: &str, key: &str) -> (StatusCode, String) {
    let resp = app
        .client
        .request(method, format!("{}{path}", app.base))
        .bearer_auth(key)
        .send()
        .await
        .expect("request");
    let allow = resp
        .headers()
        .get("allow")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    (resp.status(), allow)
}

both_backends!(an_empty_after_cursor_lists_from_the_start, |app| {
    let key = app.tenant("acme").await;
    app.post("/v1/tools", &key, save_meal()).await;
    for path in ["/v1/tools", "/v1/agents", "/v1/mcp-servers"] {
        let (s, all) = app.get(path, &key).await;
        assert_eq!(s, StatusCode::OK, "{path}");
        let (s, empty) = app.get(&format!("{path}?after="), &key).await;
        assert_eq!((s, &empty), (StatusCode::OK, &all), "{path}?after=");
    }
    let (s, page) = app.get("/v1/tools?after=", &key).await;
    assert_eq!(
        (s, page["items"][0]["name"].clone()),
        (StatusCode::OK, json!("save_meal"))
    );
    let (s, _) = app.get("/v1/tenants?after=", &app.admin).await;
    assert_eq!(s, StatusCode::OK);
});

both_backends!(
    a_tool_path_answers_a_method_it_lacks_with_405_and_its_methods,
    |app| {
        let key = app.tenant("acme").await;
        app.post("/v1/tools", &key, save_meal()).await;
        for (method, path, allow) in [
            (
                Method::POST,
                "/v1/tools/save_meal",
                "GET, HEAD, PUT, DELETE",
            ),
            (
                Method::PATCH,
                "/v1/tools/save_meal",
                "GET, HEAD, PUT, DELETE",
            ),
            (Method::OPTIONS, "/v1/tools/save_meal:test", "POST"),
            (Method::GET, "/v1/tools/save_meal:test", "POST"),
            (Method::PUT, "/v1/tools/save_meal:test", "POST"),
            (Method::DELETE, "/v1/tools/save_meal:test", "POST"),
        ] {
            let got = allow_of(&app, method.clone(), path, &key).await;
            assert_eq!(
                got,
                (StatusCode::METHOD_NOT_ALLOWED, allow.to_owned()),
                "{method} {path}"
            );
        }
        let (s, body) = app.post("/v1/tools/save_meal", &key, json!({})).await;
        assert_eq!(s, StatusCode::METHOD_NOT_ALLOWED);
        let message = body["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("POST /v1/tools/{name}:test"), "{message}");
        // The tool is still there, and still testable.
        assert_eq!(app.get("/v1/tools/save_meal", &key).await.0, StatusCode::OK);
        let (s, _) = app
            .post(
                "/v1/tools/save_meal:test",
                &key,
                json!({"params": {"meal_type": "lunch"}}),
            )
            .await;
        assert_eq!(s, StatusCode::OK);
    }
);

both_backends!(
    validating_a_body_that_is_not_an_object_is_a_bad_request,
    |app| {
        let key = app.tenant("acme").await;
        for body in [json!([null, null]), json!("save_meal"), json!(1)] {
            let (s, v) = app.post("/v1/tools:validate", &key, body.clone()).await;
            assert_eq!(s, StatusCode::BAD_REQUEST, "{body}");
            assert_eq!(v["error"]["code"], "invalid_request", "{body}");
        }
        let (s, v) = app.post("/v1/tools:validate", &key, json!({})).await;
        assert_eq!((s, v["ok"].clone()), (StatusCode::OK, json!(false)));
    }
);

// The document takes any JSON as `arguments`: what is not an object is the model's mistake,
// answered for it as seed 004's executor answers it, not refused as a bad request.
both_backends!(
    arguments_that_are_not_an_object_are_answered_for_the_model,
    |app| {
        let key = app.tenant("acme").await;
        app.post("/v1/tools", &key, save_meal()).await;
        app.put(
            "/v1/agents/assistant",
            &key,
            json!({"instructions": "Help.", "default": true, "tools": [{"tool": "save_meal"}]}),
        )
        .await;
        let (s, _) = app
            .post("/v1/calls", &key, json!({"call_id": "call_args2"}))
            .await;
        assert_eq!(s, StatusCode::CREATED);
        for (fc, arguments) in [("fc_a", json!([null, null])), ("fc_n", json!(3))] {
            let (s, v) = app
                .post(
                    "/v1/calls/call_args2/invocations",
                    &key,
                    json!({"function_call_id": fc, "name": "save_meal", "arguments": arguments}),
                )
                .await;
            assert_eq!(
                (s, v["error"].clone()),
                (StatusCode::OK, json!("tool_args_parse_error")),
                "{arguments}: {v}"
            );
        }
        // A string is the model's JSON text (as OpenAI's events carry it): text that is no JSON
        // object is the model's mistake, answered for it.
        let (s, v) = app
            .post(
                "/v1/calls/call_args2/invocations",
                &key,
                json!({"function_call_id": "fc_s", "name": "save_meal", "arguments": "lunch"}),
            )
            .await;
        assert_eq!(
            (s, v["error"].clone()),
            (StatusCode::OK, json!("tool_args_parse_error")),
            "{v}"
        );
        let (s, v) = app
        .post(
            "/v1/calls/call_args2/invocations",
            &key,
            json!({"function_call_id": "fc_2", "name": "save_meal", "arguments": {"meal_type": "lunch"}}),
        )
        .await;
        // An object is taken, and answered for the model.
        assert_eq!(
            (s, v["function_call_id"].clone()),
            (StatusCode::OK, json!("fc_2"))
        );
    }
);
