//! Publishing: replay by calls, change notes and publishers, rollback, and the console's
//! confirmation before publishing a draft that newly fails recorded calls.

use reqwest::StatusCode;
use serde_json::json;

use crate::both_backends;
use crate::console::sign_in;
use crate::replay::{lookup_order, recorded};
use crate::support::{Backend, TestApp, spawn_app};

both_backends!(
    replay_takes_the_last_calls_with_all_their_invocations,
    |app| {
        // c1 holds two invocations (1234, 404), c2 one (5678, the newest).
        let (key, _orders) = recorded(&app, "acme").await;
        let one = app
            .post(
                "/v1/tools/lookup_order:replay",
                &key,
                json!({"last_calls": 1}),
            )
            .await;
        assert_eq!(one.0, StatusCode::OK, "{}", one.1);
        assert_eq!(one.1["calls"], json!(["c2"]), "{}", one.1);
        assert_eq!(one.1["summary"]["total"], 1);
        let two = app
            .post(
                "/v1/tools/lookup_order:replay",
                &key,
                json!({"last_calls": 2}),
            )
            .await
            .1;
        assert_eq!(two["calls"], json!(["c2", "c1"]), "{two}");
        assert_eq!(two["summary"]["total"], 3, "every invocation of both calls");
        assert_eq!(two["truncated"], false);
        // Capped by `last`: the oldest invocation is left out, and the report says so.
        let capped = app
            .post(
                "/v1/tools/lookup_order:replay",
                &key,
                json!({"last_calls": 2, "last": 2}),
            )
            .await
            .1;
        assert_eq!(capped["summary"]["total"], 2, "{capped}");
        assert_eq!(capped["truncated"], true);
        // Out of range, or with `calls`: a 400 naming the field.
        for (body, says) in [
            (json!({"last_calls": 0}), "last_calls is 0"),
            (json!({"last_calls": 51}), "1 to 50 calls"),
            (json!({"last_calls": 1, "calls": ["c1"]}), "not both"),
        ] {
            let (s, e) = app.post("/v1/tools/lookup_order:replay", &key, body).await;
            assert_eq!(s, StatusCode::BAD_REQUEST, "{e}");
            assert!(e.to_string().contains(says), "{e}");
        }
        // Another tenant's calls are never replayed.
        let other = app.tenant("other").await;
        app.post("/v1/tools", &other, lookup_order("http://127.0.0.1:9"))
            .await;
        let none = app
            .post(
                "/v1/tools/lookup_order:replay",
                &other,
                json!({"last_calls": 50}),
            )
            .await
            .1;
        assert_eq!(none["calls"], json!([]), "{none}");
    }
);

both_backends!(versions_keep_notes_and_publishers_and_roll_back, |app| {
    let key = app.tenant("acme").await;
    let (s, v1) = app
        .post(
            "/v1/tools?note=first%20cut",
            &key,
            lookup_order("http://127.0.0.1:9"),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{v1}");
    assert_eq!(v1["note"], "first cut");
    let by = v1["published_by"].as_str().unwrap().to_owned();
    assert!(by.starts_with("key "), "{by}");
    assert!(!by.contains(&key), "the key itself is never shown: {by}");
    let mut def = lookup_order("http://127.0.0.1:9");
    def["description"] = json!("Look up an order");
    let (s, v2) = app
        .put(
            "/v1/tools/lookup_order?note=shorter%20description",
            &key,
            def,
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{v2}");
    assert_eq!(
        (v2["version"].clone(), v2["note"].clone()),
        (json!(2), json!("shorter description"))
    );

    // Rollback: a new version with v1's definition and a note saying so.
    let (s, v3) = app
        .post(
            "/v1/tools/lookup_order:rollback",
            &key,
            json!({"version": 1}),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{v3}");
    assert_eq!(v3["version"], 3);
    assert_eq!(v3["note"], "rollback to v1");
    assert_eq!(v3["definition"], v1["definition"]);
    assert_eq!(
        app.get("/v1/tools/lookup_order", &key).await.1["version"],
        3
    );
    // With its own note.
    let (_, v4) = app
        .post(
            "/v1/tools/lookup_order:rollback",
            &key,
            json!({"version": 2, "note": "v1 confused callers"}),
        )
        .await;
    assert_eq!(
        (v4["version"].clone(), v4["note"].clone()),
        (json!(4), json!("v1 confused callers"))
    );
    let versions = app.get("/v1/tools/lookup_order/versions", &key).await.1;
    let notes: Vec<&str> = versions
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["note"].as_str().unwrap())
        .collect();
    assert_eq!(
        notes,
        [
            "first cut",
            "shorter description",
            "rollback to v1",
            "v1 confused callers"
        ]
    );

    // Errors name the thing.
    for (body, status, says) in [
        (
            json!({"version": 4}),
            StatusCode::CONFLICT,
            "version 4 is the current version",
        ),
        (
            json!({"version": 2}),
            StatusCode::CONFLICT,
            "same definition as the current version 4",
        ),
        (
            json!({"version": 9}),
            StatusCode::NOT_FOUND,
            "versions are 1 to 4",
        ),
        (
            json!({"version": 1, "note": "x".repeat(501)}),
            StatusCode::BAD_REQUEST,
            "limit of 500",
        ),
        (
            json!({"to": 1}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "unknown field `to`",
        ),
    ] {
        let (s, e) = app
            .post("/v1/tools/lookup_order:rollback", &key, body)
            .await;
        assert_eq!(s, status, "{e}");
        assert!(e.to_string().contains(says), "{e}");
    }
    assert_eq!(
        app.get("/v1/tools/lookup_order", &key).await.1["version"],
        4,
        "no error made a version"
    );
    // Another tenant cannot roll this tool back.
    let other = app.tenant("other").await;
    let (s, e) = app
        .post(
            "/v1/tools/lookup_order:rollback",
            &other,
            json!({"version": 1}),
        )
        .await;
    assert_eq!(s, StatusCode::NOT_FOUND, "{e}");
    // The operation is POST only, and in the OpenAPI document.
    let (s, _) = app.get("/v1/tools/lookup_order:rollback", &key).await;
    assert_eq!(s, StatusCode::METHOD_NOT_ALLOWED);
    let doc = app.get("/openapi.json", "").await.1;
    assert!(
        doc["paths"]["/v1/tools/{name}:rollback"]["post"].is_object(),
        "no rollback in the document"
    );
});

both_backends!(
    the_console_confirms_a_publish_that_newly_fails_calls,
    |app| {
        let (key, orders) = recorded(&app, "acme").await;
        let b = sign_in(&app, &key).await;
        // A draft asking another URL: its recorded outcomes no longer match, so 1234 and 5678
        // newly fail.
        let mut draft = lookup_order(&format!("{}/v2", orders.uri()));
        draft["description"] = json!("Look up an order's status (v2)");
        let text = serde_json::to_string_pretty(&draft).unwrap();
        let (_, replayed) = b
            .post(
                "/console/tools/lookup_order/replay",
                &[("definition", &text)],
            )
            .await;
        assert!(
            replayed.contains("from <strong id=\"replay-calls\">2</strong> call(s)"),
            "{replayed}"
        );
        let (_, asked) = b
            .post(
                "/console/tools/lookup_order/publish",
                &[("definition", &text), ("note", "move to v2")],
            )
            .await;
        assert!(asked.contains("id=\"confirm-publish\""), "{asked}");
        assert!(asked.contains("href=\"/console/calls/c1\""), "{asked}");
        assert!(asked.contains("href=\"/console/calls/c2\""), "{asked}");
        assert_eq!(
            app.get("/v1/tools/lookup_order", &key).await.1["version"],
            1,
            "not published before confirming"
        );
        let (_, published) = b
            .post(
                "/console/tools/lookup_order/publish",
                &[
                    ("definition", &text),
                    ("note", "move to v2"),
                    ("confirmed", "yes"),
                ],
            )
            .await;
        assert!(published.contains("version 2"), "{published}");
        let v2 = app.get("/v1/tools/lookup_order", &key).await.1;
        assert_eq!(v2["note"], "move to v2");
        assert!(
            v2["published_by"]
                .as_str()
                .unwrap()
                .starts_with("console (key "),
            "{v2}"
        );
        // A draft that fails nothing new publishes at once.
        let (_, same) = b
            .post(
                "/console/tools/lookup_order/publish",
                &[(
                    "definition",
                    &serde_json::to_string(&lookup_order(&orders.uri())).unwrap(),
                )],
            )
            .await;
        assert!(same.contains("version 3"), "{same}");
        // The versions list shows notes and publishers, with a rollback button for each earlier
        // version; rolling back from the console makes version 4.
        let (_, page) = b.get("/console/tools/lookup_order").await;
        assert!(
            page.contains("move to v2") && page.contains("console (key "),
            "{page}"
        );
        assert!(
            page.contains("Roll back to v2") && !page.contains("Roll back to v3"),
            "{page}"
        );
        let (_, rolled) = b
            .post("/console/tools/lookup_order/rollback", &[("version", "2")])
            .await;
        assert!(
            rolled.contains("Rolled back") && rolled.contains("version 4"),
            "{rolled}"
        );
        let (_, again) = b
            .post("/console/tools/lookup_order/rollback", &[("version", "4")])
            .await;
        assert!(again.contains("current version"), "{again}");
    }
);
