//! An MCP server that answers two concurrent `tools/call`s each with the other's JSON-RPC id: a
//! real streamable-HTTP server on 127.0.0.1, written here because no SDK server can be made to
//! mix its answers up. Two calls of one tenant share the pool's session to it; each must get a
//! protocol error naming the server, never the other call's result — in both protocol eras,
//! with answers as JSON and as an SSE stream.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode as AxumStatus, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio::sync::oneshot;

use crate::support::{Backend, TestApp, acme, invoke, spawn_app};

/// Which revision the server speaks, and how it answers a POST.
#[derive(Debug, Clone, Copy)]
struct Style {
    /// 2025-11-25 only: `server/discover` is refused as an older server refuses it, and
    /// `initialize` opens a session.
    legacy: bool,
    /// Answers as an SSE stream rather than one JSON body.
    sse: bool,
}

/// A `tools/call` waiting for the next one, to be answered with its id.
type Waiting = (Value, Value, oneshot::Sender<Value>);

#[derive(Clone)]
struct Swapper {
    style: Style,
    first: Arc<Mutex<Option<Waiting>>>,
}

fn answer(style: Style, body: Value) -> Response {
    let mut response = if style.sse {
        let event = format!("event: message\ndata: {body}\n\n");
        ([(header::CONTENT_TYPE, "text/event-stream")], event).into_response()
    } else {
        (
            [(header::CONTENT_TYPE, "application/json")],
            body.to_string(),
        )
            .into_response()
    };
    if style.legacy {
        response
            .headers_mut()
            .insert("mcp-session-id", header::HeaderValue::from_static("s-1"));
    }
    response
}

fn result(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

async fn mcp(swapper: axum::extract::State<Swapper>, _headers: HeaderMap, body: Bytes) -> Response {
    let style = swapper.style;
    let Ok(request) = serde_json::from_slice::<Value>(&body) else {
        return AxumStatus::BAD_REQUEST.into_response();
    };
    let id = request["id"].clone();
    let server_info = json!({"name": "swapper", "version": "1.0.0"});
    match request["method"].as_str().unwrap_or_default() {
        "server/discover" if style.legacy => (
            AxumStatus::BAD_REQUEST,
            [(header::CONTENT_TYPE, "text/plain")],
            "Bad Request: No valid session ID provided",
        )
            .into_response(),
        "server/discover" => answer(
            style,
            result(
                &id,
                json!({"resultType": "complete", "supportedVersions": ["2026-07-28"],
                    "capabilities": {"tools": {}}, "ttlMs": 0, "cacheScope": "public",
                    "_meta": {"io.modelcontextprotocol/serverInfo": server_info}}),
            ),
        ),
        "initialize" => answer(
            style,
            result(
                &id,
                json!({"protocolVersion": "2025-11-25", "capabilities": {"tools": {}}, "serverInfo": server_info}),
            ),
        ),
        "tools/list" => answer(
            style,
            result(
                &id,
                json!({"tools": [{"name": "echo", "description": "Says the word back.",
                    "inputSchema": {"type": "object", "properties": {"word": {"type": "string"}}, "required": ["word"]}}],
                    "ttlMs": 60000, "cacheScope": "private", "resultType": "complete"}),
            ),
        ),
        "tools/call" => {
            let word = request["params"]["arguments"]["word"].clone();
            let said = json!({"content": [{"type": "text", "text": json!({"word": word}).to_string()}],
                "structuredContent": {"word": word}, "isError": false, "resultType": "complete"});
            let (tx, rx) = oneshot::channel();
            let first = swapper.first.lock().unwrap().take();
            match first {
                // The second call: each is answered with the other's id.
                Some((first_id, first_said, first_tx)) => {
                    let _ = first_tx.send(result(&id, first_said));
                    answer(style, result(&first_id, said))
                }
                None => {
                    *swapper.first.lock().unwrap() = Some((id, said, tx));
                    match tokio::time::timeout(Duration::from_secs(10), rx).await {
                        Ok(Ok(body)) => answer(style, body),
                        _ => AxumStatus::SERVICE_UNAVAILABLE.into_response(),
                    }
                }
            }
        }
        // Notifications (`notifications/initialized`, `notifications/cancelled`).
        _ if request.get("id").is_none() => AxumStatus::ACCEPTED.into_response(),
        _ => answer(
            style,
            json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "no such method"}}),
        ),
    }
}

/// Starts the server; it stops with the test's runtime.
async fn start(style: Style) -> String {
    let swapper = Swapper {
        style,
        first: Arc::new(Mutex::new(None)),
    };
    let app = Router::new()
        .route(
            "/mcp",
            post(mcp)
                .get(|| async { AxumStatus::METHOD_NOT_ALLOWED })
                .delete(|| async { AxumStatus::OK }),
        )
        .with_state(swapper);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    url
}

/// Two calls of one tenant call `echo` at once through the pool's one session; the server
/// swaps the answers' ids.
async fn two_calls_get_no_answer_of_the_other(app: &TestApp, style: Style) {
    let key = acme(app, "acme").await;
    let url = start(style).await;
    let (s, body) = app
        .put("/v1/mcp-servers/swapper", &key, json!({"url": url}))
        .await;
    assert_eq!(s, StatusCode::OK, "{style:?}: {body}");
    let agent = json!({"tools": [{"tool": "swapper/echo"}]});
    assert_eq!(
        app.put("/v1/agents/echoer", &key, agent).await.0,
        StatusCode::OK
    );
    for call in ["c1", "c2"] {
        let (s, body) = app
            .post(
                "/v1/calls",
                &key,
                json!({"call_id": call, "agent": "echoer"}),
            )
            .await;
        assert_eq!(s, StatusCode::CREATED, "{body}");
    }
    let (one, two) = tokio::join!(
        invoke(app, &key, "c1", "f1", "echo", json!({"word": "w_alpha"})),
        invoke(app, &key, "c2", "f2", "echo", json!({"word": "w_bravo"})),
    );
    for (answer, other) in [(&one, "w_bravo"), (&two, "w_alpha")] {
        assert!(
            !answer.to_string().contains(other),
            "{style:?}: got the other call's result: {answer}"
        );
        assert_eq!(
            (answer["ok"].clone(), answer["error"].clone()),
            (json!(false), json!("upstream_unavailable")),
            "{style:?}: {answer}"
        );
        let message = answer["result"]["message"].as_str().unwrap();
        assert!(
            message.contains("MCP server `swapper`")
                && message.contains("with the id of another request"),
            "{style:?}: {message}"
        );
    }
}

#[tokio::test]
async fn an_answer_with_another_requests_id_reaches_no_other_call() {
    for legacy in [false, true] {
        for sse in [false, true] {
            let app = spawn_app(Backend::Sqlite).await;
            two_calls_get_no_answer_of_the_other(&app, Style { legacy, sse }).await;
            app.stop().await;
        }
    }
}
