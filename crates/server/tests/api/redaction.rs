//! Secrets are redacted as values: a secret or user token holding `"`, `\`, a newline or
//! non-ASCII text is kept out of answers, call views and records, whatever JSON escaping the
//! text around it uses, and wherever a tool copied it.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::both_backends;
use crate::support::{Backend, TestApp, invoke, spawn_app};

const SECRET: &str = "sk-\"quo\\ted\u{e9}\u{1F511}\nline-1";
const TOKEN: &str = "tok-\"q\\b-\u{fc}\u{2028}\n-42";
const SIGNING: &str = "whsec_c2VjcmV0LXNpZ25pbmcta2V5LTEyMw==";

/// Whether `needle` appears in any string of `v` (keys included), in any JSON text a string
/// holds (parsed, so every escape form is covered), or in `v`'s own text.
fn leaks(v: &Value, needle: &str) -> bool {
    let escaped = serde_json::to_string(needle).unwrap();
    let inner = &escaped[1..escaped.len() - 1];
    let text = v.to_string();
    if text.contains(needle) || text.contains(inner) {
        return true;
    }
    match v {
        Value::String(s) => {
            s.contains(needle)
                || serde_json::from_str::<Value>(s).is_ok_and(|x| x.is_object() || x.is_array())
                    && leaks(&serde_json::from_str(s).unwrap(), needle)
        }
        Value::Array(a) => a.iter().any(|x| leaks(x, needle)),
        Value::Object(o) => o
            .iter()
            .any(|(k, x)| k.contains(needle) || leaks(x, needle)),
        _ => false,
    }
}

fn copy_secrets() -> Value {
    json!({
        "name": "copy_secrets",
        "description": "Copies what it should not.",
        "parameters": [{"name": "note", "type": "string", "required": true}],
        "actions": [
            {"type": "context.set", "data": {
                "workflow.copied": {"secret": "{{secrets.api_key}}", "token": "{{user.auth_token}}", "note": "{{params.note}}"},
                "workflow.line": "secret={{secrets.api_key}} token={{user.auth_token}}"
            }},
            {"type": "log", "message": "copied {{secrets.api_key}} and {{user.auth_token}}"}
        ],
        "on_success": [{"type": "respond", "message": "secret {{secrets.api_key}} token {{user.auth_token}}"}]
    })
}

async fn tenant(app: &TestApp) -> String {
    let key = app.tenant("acme").await;
    let (s, body) = app.post("/v1/tools", &key, copy_secrets()).await;
    assert_eq!(s, StatusCode::CREATED, "{body}");
    let agent = json!({"instructions": "Help.", "default": true,
        "tools": [{"tool": "copy_secrets", "sensitive_config": {"api_key": SECRET}}]});
    let (s, body) = app.put("/v1/agents/assistant", &key, agent).await;
    assert_eq!(s, StatusCode::OK, "{body}");
    let (s, body) = app
        .put(
            "/v1/secrets/signing_secret",
            &key,
            json!({"value": SIGNING}),
        )
        .await;
    assert_eq!(s, StatusCode::NO_CONTENT, "{body}");
    key
}

both_backends!(secrets_with_escapes_are_redacted_as_values, |app| {
    let key = tenant(&app).await;
    let (s, body) = app
        .post(
            "/v1/calls",
            &key,
            json!({"call_id": "c1", "user": {"id": "u1", "auth_token": TOKEN}}),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{body}");
    // The model repeats the token in its arguments, escaped two ways.
    let answer = invoke(
        &app,
        &key,
        "c1",
        "f1",
        "copy_secrets",
        json!({"note": format!("mine is {TOKEN}")}),
    )
    .await;
    let ascii_args = serde_json::to_string(&json!({"note": SIGNING}))
        .unwrap()
        .replace("whsec", "\\u0077hsec");
    let (s, answer2) = app
        .post(
            "/v1/calls/c1/invocations",
            &key,
            json!({"function_call_id": "f2", "name": "copy_secrets", "arguments_json": ascii_args}),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{answer2}");
    assert_eq!(answer["ok"], true, "{answer}");
    assert!(
        answer["output"].as_str().unwrap().contains("[redacted]"),
        "{answer}"
    );
    let (s, view) = app.get("/v1/calls/c1", &key).await;
    assert_eq!(s, StatusCode::OK, "{view}");
    assert!(
        view["context"]["workflow"]["copied"]["secret"]
            .as_str()
            .unwrap()
            .contains("[redacted]"),
        "{view}"
    );
    assert_eq!(view["context"]["user"]["id"], "u1");
    let records = app.state.store.invocations("acme", "c1").await.unwrap();
    assert_eq!(records.len(), 2);
    let records = serde_json::to_value(&records).unwrap();
    assert!(
        leaks(&records, "mine is"),
        "the check itself finds what is there"
    );
    let (s, ended) = app.delete("/v1/calls/c1", &key).await;
    assert_eq!(s, StatusCode::OK, "{ended}");
    for secret in [SECRET, TOKEN, SIGNING] {
        for (what, v) in [
            ("answer", &answer),
            ("answer with an escaped argument", &answer2),
            ("GET /v1/calls/c1", &view),
            ("records", &records),
            ("DELETE /v1/calls/c1", &ended),
        ] {
            assert!(!leaks(v, secret), "{secret:?} leaked in {what}: {v}");
        }
    }
});
