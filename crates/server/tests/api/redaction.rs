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

// --- Encoded echoes: an upstream that repeats the secret the way the request carried it.

/// A secret with the characters each encoding treats differently, and a space.
const AWKWARD: &str = "Ab+/c=d@e#f!g h-0042";

/// `s` as a form encodes it (what `api_call`'s `query` sends).
fn form_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'*' => {
                (b as char).to_string()
            }
            b' ' => "+".to_owned(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// `s` percent-encoded with lower-case hex and `%20`.
fn percent_lower(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02x}"),
        })
        .collect()
}

/// The forms the upstream echoes `key` in, given the query string it received: each is what an
/// upstream's error page could repeat.
fn echoed_forms(key: &str, query: &str) -> Vec<(&'static str, String)> {
    use base64::Engine as _;
    use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
    let html: String = key
        .chars()
        .map(|c| match c {
            '+' | '/' | '=' | '@' | '#' | '!' => format!("&#{};", c as u32),
            ' ' => "&#x20;".to_owned(),
            c => c.to_string(),
        })
        .collect();
    let json_ascii: String = key
        .chars()
        .map(|c| match c {
            '/' => "\\/".to_owned(),
            c if c.is_ascii_alphanumeric() => c.to_string(),
            c => format!("\\u{:04x}", c as u32),
        })
        .collect();
    vec![
        ("the query string as received", query.to_owned()),
        ("the key form-encoded", form_encode(key)),
        (
            "the key percent-encoded, lower-case hex",
            percent_lower(key),
        ),
        ("the key with HTML references", html),
        (
            "JSON text with \\/ and \\u escapes",
            format!("{{\"key\":\"{json_ascii}\"}}"),
        ),
        ("the key in base64", STANDARD.encode(key)),
        (
            "the key in base64url, unpadded",
            URL_SAFE_NO_PAD.encode(key),
        ),
        (
            "a Basic credential of user:key",
            STANDARD.encode(format!("user:{key}")),
        ),
        ("the query string in base64", STANDARD.encode(query)),
        (
            "the query string in base64url",
            URL_SAFE_NO_PAD.encode(query),
        ),
    ]
}

/// Answers every request 401 with an error body that repeats its `key` in every form above.
struct EchoingUpstream;

impl wiremock::Respond for EchoingUpstream {
    fn respond(&self, req: &wiremock::Request) -> wiremock::ResponseTemplate {
        let query = req.url.query().unwrap_or_default().to_owned();
        let key = req
            .url
            .query_pairs()
            .find(|(k, _)| k == "key")
            .map(|(_, v)| v.into_owned())
            .unwrap_or_default();
        let mut body = serde_json::Map::new();
        body.insert("error".into(), json!(format!("invalid key {key}")));
        for (i, (_, form)) in echoed_forms(&key, &query).into_iter().enumerate() {
            body.insert(format!("echo_{i}"), json!(format!("[{form}]")));
        }
        wiremock::ResponseTemplate::new(401).set_body_json(Value::Object(body))
    }
}

/// A tool that sends its key in the query string and, when the upstream refuses it, copies the
/// upstream's whole error body into its answer, the context and a log message.
fn lookup(base: &str) -> Value {
    json!({
        "name": "lookup",
        "description": "Looks something up.",
        "parameters": [{"name": "q", "type": "string", "required": true}],
        "actions": [{"type": "api_call", "method": "GET", "url": format!("{base}/lookup"),
            "query": {"key": "{{secrets.api_key}}", "q": "{{params.q}}"}, "retry_count": 0}],
        "on_failure": [
            {"type": "context.set", "data": {"last_error": "{{ response.body }}"}},
            {"type": "log", "level": "warn", "message": "lookup failed: {{ response.body }}"},
            {"type": "respond", "message": "The lookup failed: {{ response.body }}"}
        ]
    })
}

/// Every string of `v` at any depth (keys too), and those of any JSON text one holds.
fn strings(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) => {
            out.push(s.clone());
            if let Ok(inner) = serde_json::from_str::<Value>(s)
                && (inner.is_object() || inner.is_array())
            {
                strings(&inner, out);
            }
        }
        Value::Array(a) => a.iter().for_each(|x| strings(x, out)),
        Value::Object(o) => o.iter().for_each(|(k, x)| {
            out.push(k.clone());
            strings(x, out);
        }),
        _ => {}
    }
}

/// The HTML text of a page with its character references undone.
fn unescape_html(page: &str) -> String {
    page.replace("&#x2f;", "/")
        .replace("&#x27;", "'")
        .replace("&quot;", "\"")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

/// Panics naming the place and the form when any form of the secret is in `text`.
fn assert_clean(place: &str, text: &str, forms: &[(&'static str, String)]) {
    for (what, form) in forms {
        assert!(
            !text.contains(form.as_str()),
            "{what} ({form}) leaked in {place}: {text}"
        );
    }
}

async fn sign_in(app: &TestApp, key: &str) -> String {
    let r = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
        .post(format!("{}/console/signin", app.base))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("key={}", form_encode(key)))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let set = r.headers()["set-cookie"].to_str().unwrap();
    set.split(';').next().unwrap().to_owned()
}

async fn encoded_echoes(app: std::sync::Arc<TestApp>) {
    let upstream = wiremock::MockServer::start().await;
    wiremock::Mock::given(wiremock::matchers::path("/lookup"))
        .respond_with(EchoingUpstream)
        .mount(&upstream)
        .await;
    let key = app.tenant("acme").await;
    let (s, body) = app.post("/v1/tools", &key, lookup(&upstream.uri())).await;
    assert_eq!(s, StatusCode::CREATED, "{body}");
    let agent = json!({"instructions": "Help.", "default": true,
        "tools": [{"tool": "lookup", "sensitive_config": {"api_key": AWKWARD}}]});
    let (s, body) = app.put("/v1/agents/assistant", &key, agent).await;
    assert_eq!(s, StatusCode::OK, "{body}");
    let (s, body) = app.post("/v1/calls", &key, json!({"call_id": "c1"})).await;
    assert_eq!(s, StatusCode::CREATED, "{body}");

    let answer = invoke(
        &app,
        &key,
        "c1",
        "f1",
        "lookup",
        json!({"q": "hello world"}),
    )
    .await;
    assert_eq!(answer["ok"], false, "{answer}");

    // The upstream got the key as the query sends it, and echoed each form back.
    let received = upstream.received_requests().await.unwrap();
    assert_eq!(received.len(), 1);
    let query = received[0].url.query().unwrap().to_owned();
    assert!(query.contains(&form_encode(AWKWARD)), "{query}");
    let mut forms = echoed_forms(AWKWARD, &query);
    forms.push(("the key itself", AWKWARD.to_owned()));
    let message = answer["result"]["message"].as_str().unwrap();
    assert!(
        message.contains("\"error\":\"invalid key [redacted]\""),
        "{message}"
    );
    // Each echo came back, its secret part redacted, the rest of it kept.
    for i in 0..forms.len() - 1 {
        assert!(
            message.contains(&format!("\"echo_{i}\":\"[")),
            "echo {i} missing: {message}"
        );
    }
    assert_eq!(
        message.matches("[redacted]").count(),
        forms.len(),
        "{message}"
    );

    let (s, view) = app.get("/v1/calls/c1", &key).await;
    assert_eq!(s, StatusCode::OK, "{view}");
    assert_eq!(
        view["context"]["workflow"]["last_error"]["error"], "invalid key [redacted]",
        "{view}"
    );
    let records = app.state.store.invocations("acme", "c1").await.unwrap();
    assert!(records[0].trace.is_some(), "the replay trace is kept");
    let records = serde_json::to_value(&records).unwrap();
    let (s, replay) = app.post("/v1/tools/lookup:replay", &key, json!({})).await;
    assert_eq!(s, StatusCode::OK, "{replay}");
    assert_eq!(
        replay["invocations"].as_array().unwrap().len(),
        1,
        "{replay}"
    );
    let cookie = sign_in(&app, &key).await;
    let page = app
        .client
        .get(format!("{}/console/calls/c1", app.base))
        .header("cookie", cookie)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        unescape_html(&page).contains("invalid key [redacted]"),
        "the call page shows the echo: {page}"
    );
    let (s, ended) = app.delete("/v1/calls/c1", &key).await;
    assert_eq!(s, StatusCode::OK, "{ended}");

    for (place, v) in [
        ("the answer", &answer),
        ("GET /v1/calls/c1", &view),
        ("the stored records and their replay trace", &records),
        ("the replay report", &replay),
        ("DELETE /v1/calls/c1", &ended),
    ] {
        let mut all = vec![v.to_string()];
        strings(v, &mut all);
        for s in all {
            assert_clean(place, &s, &forms);
        }
    }
    assert_clean("the console's call page", &unescape_html(&page), &forms);
}

async fn encoded_echoes_on(backend: Backend) {
    let logs = Logs::default();
    let subscriber = tracing_subscriber::fmt()
        .with_writer({
            let logs = logs.clone();
            move || logs.clone()
        })
        .with_max_level(tracing::Level::DEBUG)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    let app = std::sync::Arc::new(crate::support::spawn_app(backend).await);
    let result = tokio::spawn(encoded_echoes(std::sync::Arc::clone(&app))).await;
    if let Ok(app) = std::sync::Arc::try_unwrap(app) {
        app.stop().await;
    }
    if let Err(e) = result {
        std::panic::resume_unwind(e.into_panic());
    }
    let text = String::from_utf8_lossy(&logs.0.lock().unwrap()).into_owned();
    assert!(text.contains("api_call_finished"), "the logs were captured");
    let mut forms = echoed_forms(
        AWKWARD,
        &format!("key={}&q=hello+world", form_encode(AWKWARD)),
    );
    forms.push(("the key itself", AWKWARD.to_owned()));
    assert_clean("the log lines", &text, &forms);
}

/// The log lines written while a test runs.
#[derive(Clone, Default)]
struct Logs(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn secrets_echoed_encoded_by_an_upstream_are_redacted_sqlite() {
    encoded_echoes_on(Backend::Sqlite).await;
}

#[tokio::test]
async fn secrets_echoed_encoded_by_an_upstream_are_redacted_postgres() {
    encoded_echoes_on(Backend::Postgres).await;
}
