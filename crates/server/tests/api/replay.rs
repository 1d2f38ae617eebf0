//! Replay: recorded invocations run against a draft with their recorded effect outcomes,
//! performing nothing; and `:test` with mocked effect outcomes.

use reqwest::StatusCode;
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::both_backends;
use crate::support::{Backend, TestApp, invoke, spawn_app};

const SECRET: &str = "sk-order-secret-9";
const TOKEN: &str = "tok-user-777777";

pub(crate) fn lookup_order(base: &str) -> Value {
    json!({
        "name": "lookup_order",
        "description": "Look up an order's status",
        "parameters": [{"name": "order_id", "type": "string", "required": true}],
        "actions": [
            {"type": "api_call", "method": "GET", "url": format!("{base}/orders/{{{{params.order_id}}}}"),
             "headers": {"Authorization": "Bearer {{secrets.api_key}}", "X-User": "{{user.auth_token}}"}},
            {"type": "context.set", "data": {"last_order": "{{params.order_id}}"}}
        ],
        "on_success": [{"type": "respond", "message": "Order {{params.order_id}} is {{response.body.status}}."}]
    })
}

/// A tenant with `lookup_order` on its default agent, an order service, and three recorded
/// invocations in two calls: 1234 (shipped), 404 (the service answers 404), 5678 (pending).
pub(crate) async fn recorded(app: &TestApp, tenant: &str) -> (String, MockServer) {
    let orders = MockServer::start().await;
    for (id, status) in [("1234", "shipped"), ("5678", "pending")] {
        Mock::given(method("GET"))
            .and(path(format!("/orders/{id}")))
            .respond_with(ResponseTemplate::new(200).set_body_json(json!({"status": status})))
            .mount(&orders)
            .await;
    }
    Mock::given(method("GET"))
        .and(path("/orders/404"))
        .respond_with(ResponseTemplate::new(404).set_body_json(json!({"error": "no such order"})))
        .mount(&orders)
        .await;
    let key = app.tenant(tenant).await;
    let (s, body) = app
        .post("/v1/tools", &key, lookup_order(&orders.uri()))
        .await;
    assert_eq!(s, StatusCode::CREATED, "{body}");
    let agent = json!({"tools": [{"tool": "lookup_order", "sensitive_config": {"api_key": SECRET}}], "default": true});
    assert_eq!(
        app.put("/v1/agents/desk", &key, agent).await.0,
        StatusCode::OK
    );
    for call in ["c1", "c2"] {
        let (s, body) = app
            .post(
                "/v1/calls",
                &key,
                json!({"call_id": call, "user": {"id": "u1", "auth_token": TOKEN}}),
            )
            .await;
        assert_eq!(s, StatusCode::CREATED, "{body}");
    }
    let ok = invoke(
        app,
        &key,
        "c1",
        "f1",
        "lookup_order",
        json!({"order_id": "1234"}),
    )
    .await;
    assert_eq!(ok["result"]["message"], "Order 1234 is shipped.", "{ok}");
    let failed = invoke(
        app,
        &key,
        "c1",
        "f2",
        "lookup_order",
        json!({"order_id": "404"}),
    )
    .await;
    assert_eq!(failed["error"], "api_call_failed", "{failed}");
    invoke(
        app,
        &key,
        "c2",
        "f1",
        "lookup_order",
        json!({"order_id": "5678"}),
    )
    .await;
    (key, orders)
}

async fn replay(app: &TestApp, key: &str, body: Value) -> Value {
    let (s, r) = app.post("/v1/tools/lookup_order:replay", key, body).await;
    assert_eq!(s, StatusCode::OK, "{r}");
    r
}

fn verdicts(r: &Value) -> Vec<(String, String)> {
    r["invocations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            (
                i["arguments"]["order_id"].as_str().unwrap().to_owned(),
                i["verdict"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

both_backends!(
    recorded_calls_replay_against_a_draft_performing_nothing,
    |app| {
        let (key, orders) = recorded(&app, "acme").await;
        let hits = orders.received_requests().await.unwrap().len();
        assert_eq!(hits, 3);

        // The current version, replayed: nothing changes.
        let same = replay(&app, &key, json!({})).await;
        assert_eq!(
            same["summary"],
            json!({"total": 3, "unchanged": 3, "changed": 0, "newly_failing": 0, "newly_passing": 0, "skipped": 0}),
            "{same}"
        );
        assert_eq!(same["version"], 1);
        // Newest first.
        assert_eq!(
            verdicts(&same),
            [
                ("5678", "unchanged"),
                ("404", "unchanged"),
                ("1234", "unchanged")
            ]
            .map(|(a, b)| (a.to_owned(), b.to_owned()))
        );
        let first = &same["invocations"][2];
        assert_eq!(first["call_id"], "c1");
        assert_eq!(first["effects"][0]["status"], "recorded");
        assert_eq!(
            first["replayed_writes"][0],
            json!({"op": "set", "scope": "workflow", "keys": ["last_order"], "value": "1234"})
        );

        // A draft with a new message that carries on after an HTTP error.
        let mut draft = lookup_order(&orders.uri());
        draft["actions"][0]["on_error"] = json!("continue");
        draft["on_success"] = json!([{"type": "respond", "message": "Your order {{params.order_id}}: {{response.body.status | default('unknown')}}."}]);
        let r = replay(&app, &key, json!({"definition": draft})).await;
        assert_eq!(
            verdicts(&r),
            [
                ("5678", "changed"),
                ("404", "newly_passing"),
                ("1234", "changed")
            ]
            .map(|(a, b)| (a.to_owned(), b.to_owned())),
            "{r}"
        );
        assert_eq!(r["version"], Value::Null);
        let changed = &r["invocations"][0];
        assert_eq!(
            changed["recorded_output"]["message"],
            "Order 5678 is pending."
        );
        assert_eq!(
            changed["replayed_output"]["message"],
            "Your order 5678: pending."
        );
        assert_eq!(
            (
                changed["output_changed"].clone(),
                changed["writes_changed"].clone(),
                changed["effects_changed"].clone()
            ),
            (json!(true), json!(false), json!(false))
        );
        assert_eq!(
            r["invocations"][1]["replayed_output"]["message"],
            "Your order 404: unknown."
        );

        // A draft that calls another URL: its requests diverge, are not answered with the
        // recorded outcomes, and the calls that passed now fail.
        let mut moved = lookup_order(&format!("{}/v2", orders.uri()));
        moved["description"] = json!("Look up an order (v2 API)");
        let r = replay(&app, &key, json!({"definition": moved})).await;
        assert_eq!(
            r["summary"],
            json!({"total": 3, "unchanged": 0, "changed": 1, "newly_failing": 2, "newly_passing": 0, "skipped": 0}),
            "{r}"
        );
        let diverged = &r["invocations"][0];
        assert_eq!(diverged["effects"][0]["status"], "diverged");
        assert!(
            diverged["effects"][0]["request"]["url"]
                .as_str()
                .unwrap()
                .contains("/v2/orders/5678")
        );
        assert!(
            diverged["effects_not_requested"][0]["url"]
                .as_str()
                .unwrap()
                .ends_with("/orders/5678")
        );
        assert_eq!(diverged["replayed_output"]["error"], "upstream_unavailable");

        // Nothing was performed by any replay.
        assert_eq!(orders.received_requests().await.unwrap().len(), hits);

        // Secrets: the agent tool's sensitive config and the user's token never come back; the
        // recorded and replayed requests both hold `[redacted]` where they were.
        let text = same.to_string() + &r.to_string();
        for secret in [SECRET, TOKEN] {
            assert!(!text.contains(secret), "{secret} leaked: {text}");
        }
        assert_eq!(
            first["effects"][0]["request"]["headers"],
            json!([
                ["Authorization", "Bearer [redacted]"],
                ["X-User", "[redacted]"]
            ])
        );

        // Selections: given calls, and the newest N.
        let r = replay(&app, &key, json!({"calls": ["c2"]})).await;
        assert_eq!(verdicts(&r), [("5678".to_owned(), "unchanged".to_owned())]);
        let r = replay(&app, &key, json!({"calls": ["c1"], "version": 1})).await;
        assert_eq!(r["summary"]["total"], 2);
        let r = replay(&app, &key, json!({"last": 1})).await;
        assert_eq!(verdicts(&r), [("5678".to_owned(), "unchanged".to_owned())]);

        // A call's view does not carry the replay traces.
        let (_, call) = app.get("/v1/calls/c1", &key).await;
        assert!(call["invocations"][0].get("trace").is_none(), "{call}");
    }
);

both_backends!(
    a_replay_refuses_what_it_cannot_do_and_sees_one_tenant,
    |app| {
        let (key, orders) = recorded(&app, "acme").await;
        let bad: Vec<(Value, &str)> = vec![
            (
                json!({"definition": lookup_order(&orders.uri()), "version": 1}),
                "not both",
            ),
            (json!({"last": 0}), "1 to 200"),
            (json!({"last": 500}), "1 to 200"),
            (
                json!({"definition": {"name": "other_tool", "description": "d"}}),
                "differs",
            ),
            (
                json!({"definition": {"description": "d", "actions": [{"type": "respnd"}]}}),
                "problem",
            ),
            (json!({"calls": vec!["c"; 51]}), "over the limit"),
            (json!({"selection": "all"}), "unknown field"),
        ];
        for (body, says) in bad {
            let (s, r) = app
                .post("/v1/tools/lookup_order:replay", &key, body.clone())
                .await;
            assert_eq!(s.as_u16() / 100, 4, "{body}: {s} {r}");
            let message = r["error"]["message"].as_str().unwrap_or_default();
            assert!(message.contains(says), "{body}: {message}");
        }
        assert_eq!(
            app.post("/v1/tools/lookup_order:replay", &key, json!({"version": 9}))
                .await
                .0,
            StatusCode::NOT_FOUND
        );
        let (s, r) = app.get("/v1/tools/lookup_order:replay", &key).await;
        assert_eq!(s, StatusCode::METHOD_NOT_ALLOWED, "{r}");

        // Another tenant: no such tool, and a draft of that name finds none of acme's records.
        let other = app.tenant("other").await;
        assert_eq!(
            app.post("/v1/tools/lookup_order:replay", &other, json!({}))
                .await
                .0,
            StatusCode::NOT_FOUND
        );
        let (s, r) = app
            .post(
                "/v1/tools/lookup_order:replay",
                &other,
                json!({"definition": lookup_order(&orders.uri()), "calls": ["c1"]}),
            )
            .await;
        assert_eq!(
            (s, r["summary"]["total"].clone()),
            (StatusCode::OK, json!(0)),
            "{r}"
        );
        let (_, r) = app
            .post(
                "/v1/tools/lookup_order:replay",
                &other,
                json!({"definition": lookup_order(&orders.uri())}),
            )
            .await;
        assert_eq!(r["invocations"], json!([]));
    }
);

both_backends!(a_test_run_takes_mocked_effect_outcomes, |app| {
    let (key, orders) = recorded(&app, "acme").await;
    let hits = orders.received_requests().await.unwrap().len();
    // A test run has no agent, so no sensitive config: a version without the headers.
    let mut plain = lookup_order(&orders.uri());
    plain["actions"][0]
        .as_object_mut()
        .unwrap()
        .remove("headers");
    assert_eq!(
        app.put("/v1/tools/lookup_order", &key, plain).await.0,
        StatusCode::OK
    );
    let run = |mocks: Value| json!({"params": {"order_id": "1"}, "mocks": mocks});
    let (s, r) = app
        .post(
            "/v1/tools/lookup_order:test",
            &key,
            run(json!([{"kind": "http", "status": 200, "body": {"status": "lost"}}])),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{r}");
    assert_eq!(r["output"]["message"], "Order 1 is lost.");
    let (_, r) = app
        .post(
            "/v1/tools/lookup_order:test",
            &key,
            run(json!([{"kind": "http", "status": 503, "body": {}}])),
        )
        .await;
    assert_eq!(r["output"]["error"], "api_call_failed", "{r}");
    assert!(r["writes"].as_array().unwrap().is_empty());
    let (_, r) = app
        .post(
            "/v1/tools/lookup_order:test",
            &key,
            run(json!([{"kind": "failed", "code": "timeout", "message": "no answer in 5 s"}])),
        )
        .await;
    assert_eq!(r["output"]["error"], "timeout", "{r}");
    let (s, r) = app
        .post(
            "/v1/tools/lookup_order:test",
            &key,
            run(json!([{"kind": "teleport"}])),
        )
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert!(
        r["error"]["message"].as_str().unwrap().contains("mocks[0]"),
        "{r}"
    );
    let (s, _) = app
        .post(
            "/v1/tools/lookup_order:test",
            &key,
            json!({"params": {"order_id": "1"}, "effects": "perform", "mocks": [{"kind": "done"}]}),
        )
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert_eq!(orders.received_requests().await.unwrap().len(), hits);
});

#[tokio::test]
async fn a_trace_over_the_record_bound_is_not_kept_and_the_replay_says_why() {
    let config = switchboard_server::ServerConfig {
        records: switchboard_runtime::RecordLimits {
            max_record_field_bytes: 256,
            ..Default::default()
        },
        ..Default::default()
    };
    let app = crate::support::spawn_app_with(Backend::Sqlite, config).await;
    let (key, _orders) = recorded(&app, "acme").await;
    let r = replay(&app, &key, json!({"last": 1})).await;
    assert_eq!(r["summary"]["skipped"], 1, "{r}");
    let reason = r["invocations"][0]["reason"].as_str().unwrap();
    assert!(reason.contains("max_record_field_bytes"), "{reason}");
    app.stop().await;
}
