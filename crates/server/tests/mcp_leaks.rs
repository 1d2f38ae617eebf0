//! A registered MCP server's URL never leaks: whatever goes wrong reaching it, the answers, the
//! model's output, the call's record and every log line (ours, rmcp's, reqwest's, at TRACE)
//! name it by its label and `scheme://host:port` only. In a test binary of its own: the log
//! subscriber is process-wide.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "mcp/python.rs"]
#[allow(dead_code)]
mod python;
#[path = "api/support.rs"]
#[allow(dead_code)]
mod support;

use std::sync::{Arc, Mutex, OnceLock};

use python::{CalcServer, free_port};
use reqwest::StatusCode;
use serde_json::json;
use support::{Backend, TestApp, acme, invoke, spawn_app};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Every log line of the process, as JSON.
#[derive(Clone, Default)]
struct LogBuffer(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for LogBuffer {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Captures all targets at TRACE (and the `log` records of crates that use it) from now on.
fn logs() -> LogBuffer {
    static LOGS: OnceLock<LogBuffer> = OnceLock::new();
    LOGS.get_or_init(|| {
        let buffer = LogBuffer::default();
        let writer = buffer.clone();
        tracing_subscriber::fmt()
            .json()
            .with_writer(move || writer.clone())
            .with_max_level(tracing::Level::TRACE)
            .try_init()
            .expect("the only subscriber of this process");
        buffer
    })
    .clone()
}

/// A server on 127.0.0.1 that answers every request with a 404 page quoting the URL it was
/// asked for (as many do); it stops with the test's runtime.
async fn echoing_error_page() -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0u8; 4096];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match socket.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let head = String::from_utf8_lossy(&head);
                let target = head.split(' ').nth(1).unwrap_or_default();
                let page = format!(
                    "<html><body><h1>404</h1><p>No route for {target}</p><p>http://127.0.0.1:{port}{target}</p></body></html>"
                );
                let answer = format!(
                    "HTTP/1.1 404 Not Found\r\ncontent-type: text/html\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{page}",
                    page.len()
                );
                let _ = socket.write_all(answer.as_bytes()).await;
            });
        }
    });
    port
}

/// What a tenant sees of one server: its registration, its tool list, a tool's output for the
/// model, and the call's record; each must be free of `secrets` and name the server.
async fn seen(app: &TestApp, key: &str, label: &str, url: &str, origin: &str, secrets: &[&str]) {
    let (s, put) = app
        .put(
            &format!("/v1/mcp-servers/{label}"),
            key,
            json!({"url": url}),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{put}");
    let (s, listed) = app
        .get(&format!("/v1/mcp-servers/{label}/tools?refresh=true"), key)
        .await;
    assert_eq!(s, StatusCode::BAD_GATEWAY, "{listed}");
    let tool = format!("ask_{label}");
    let def = json!({"name": tool, "description": "Asks the server",
        "actions": [{"type": "mcp.call", "server": label, "tool": "add", "arguments": {"a": 1}}]});
    let (s, body) = app.post("/v1/tools", key, def).await;
    assert_eq!(s, StatusCode::CREATED, "{body}");
    let agent = format!("agent_{label}");
    let (s, body) = app
        .put(
            &format!("/v1/agents/{agent}"),
            key,
            json!({"tools": [{"tool": tool}]}),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{body}");
    let call = format!("call_{label}");
    let (s, body) = app
        .post("/v1/calls", key, json!({"call_id": call, "agent": agent}))
        .await;
    assert_eq!(s, StatusCode::CREATED, "{body}");
    let output = invoke(app, key, &call, "f1", &tool, json!({})).await;
    assert_eq!(output["error"], "upstream_unavailable", "{output}");
    let (_, record) = app.get(&format!("/v1/calls/{call}"), key).await;
    for (what, text) in [
        ("the PUT answer", put.to_string()),
        ("the tools?refresh=true answer", listed.to_string()),
        ("the model's output", output.to_string()),
        ("the call's record", record.to_string()),
    ] {
        for secret in secrets {
            assert!(!text.contains(secret), "{secret} is in {what}: {text}");
        }
        let named = format!("`{label}` ({origin})");
        assert!(
            text.contains(&named),
            "{what} names the server as {named}: {text}"
        );
    }
    assert!(
        put["tools_error"].is_string(),
        "why its tools are unknown is said: {put}"
    );
}

/// Nothing of `secrets` in any log line of the process so far.
fn assert_logs_free_of(secrets: &[&str]) {
    let text = String::from_utf8(logs().0.lock().unwrap().clone()).unwrap();
    assert!(!text.is_empty(), "the logs were captured");
    for secret in secrets {
        if let Some(at) = text.find(secret) {
            let from = text[..at].rfind('\n').map_or(0, |n| n + 1);
            let to = text[at..].find('\n').map_or(text.len(), |n| at + n);
            panic!("{secret} is in the logs: {}", &text[from..to]);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_servers_url_never_leaks() {
    let _ = logs();
    let app = spawn_app(Backend::Sqlite).await;
    let key = acme(&app, "acme").await;

    let nobody = free_port();
    seen(
        &app,
        &key,
        "refused",
        &format!("http://127.0.0.1:{nobody}/p-refused-7/mcp?access_token=tok-REFUSED-1"),
        &format!("http://127.0.0.1:{nobody}"),
        &["tok-REFUSED-1", "p-refused-7"],
    )
    .await;
    seen(
        &app,
        &key,
        "nowhere",
        "https://no-such-host.invalid/p-nowhere-7/mcp?access_token=tok-NOWHERE-2",
        "https://no-such-host.invalid:443",
        &["tok-NOWHERE-2", "p-nowhere-7"],
    )
    .await;
    let page = echoing_error_page().await;
    seen(
        &app,
        &key,
        "echo",
        &format!(
            "http://alice:pw-ECHO-4@127.0.0.1:{page}/p-echo-7/mcp?access_token=tok-ECHO-3&x=%2Fenc-ECHO-5"
        ),
        &format!("http://127.0.0.1:{page}"),
        &[
            "tok-ECHO-3",
            "p-echo-7",
            "pw-ECHO-4",
            "enc-ECHO-5",
            "alice:",
        ],
    )
    .await;
    // What went wrong is said, so the tenant knows where to look.
    let (_, refused) = app
        .get("/v1/mcp-servers/refused/tools?refresh=true", &key)
        .await;
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(&format!("could not connect to http://127.0.0.1:{nobody}")),
        "{refused}"
    );
    // The page's status is said, so the tenant knows where to look.
    let (_, put) = app
        .get("/v1/mcp-servers/echo/tools?refresh=true", &key)
        .await;
    let message = put["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("404"), "{put}");

    // A server that works, with a token in its URL and a key in a header: its tools are listed
    // and called, and neither reaches a log line on the way.
    let calc = CalcServer::start(free_port()).await;
    let (s, put) = app
        .put(
            "/v1/mcp-servers/calc",
            &key,
            json!({"url": format!("{}?access_token=tok-CALC-6", calc.url()), "headers": {"X-Api-Key": "k-CALC-8"}}),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{put}");
    assert!(
        put["tools"].as_array().unwrap().contains(&json!("add")),
        "{put}"
    );
    let (s, body) = app
        .put(
            "/v1/agents/math",
            &key,
            json!({"tools": [{"tool": "calc/add"}]}),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{body}");
    let (s, body) = app
        .post("/v1/calls", &key, json!({"call_id": "m1", "agent": "math"}))
        .await;
    assert_eq!(s, StatusCode::CREATED, "{body}");
    let r = invoke(&app, &key, "m1", "f1", "add", json!({"a": 2, "b": 3})).await;
    assert_eq!(r["result"]["data"], json!({"sum": 5}), "{r}");
    drop(calc);

    app.stop().await;
    assert_logs_free_of(&[
        "tok-CALC-6",
        "k-CALC-8",
        "tok-REFUSED-1",
        "p-refused-7",
        "tok-NOWHERE-2",
        "p-nowhere-7",
        "tok-ECHO-3",
        "p-echo-7",
        "pw-ECHO-4",
        "enc-ECHO-5",
    ]);
}
