//! An MCP server that answers concurrent `tools/call`s with each other's JSON-RPC ids, behind
//! a TCP proxy, under traffic from many calls on two nodes (which share a pooled session to it
//! per node): no call ever gets another call's answer. A swapped answer is that call's error;
//! the rest are answered right.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::http::{StatusCode as AxumStatus, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use reqwest::Method;
use serde_json::{Value, json};
use tokio::sync::oneshot;

use crate::support::proxy::Proxy;
use crate::support::{Serve, TempDir, with_postgres};
use crate::{SERIAL, Totals, invoke_until_answered, until_ok};

/// Pairs of overlapping calls met so far.
static PAIRS: AtomicU64 = AtomicU64::new(0);

/// A `tools/call` waiting a moment for another to swap ids with.
type Waiting = (Value, Value, oneshot::Sender<Value>);

fn json_answer(body: Value) -> Response {
    (
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

fn result(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// A 2026-07-28 server with one tool, `echo`, which swaps the ids of every other pair of calls
/// that overlap, and answers the rest right.
async fn swapper(
    waiting: axum::extract::State<Arc<Mutex<Option<Waiting>>>>,
    body: Bytes,
) -> Response {
    let Ok(request) = serde_json::from_slice::<Value>(&body) else {
        return AxumStatus::BAD_REQUEST.into_response();
    };
    let id = request["id"].clone();
    match request["method"].as_str().unwrap_or_default() {
        "server/discover" => json_answer(result(
            &id,
            json!({"resultType": "complete", "supportedVersions": ["2026-07-28"],
                "capabilities": {"tools": {}}, "ttlMs": 0, "cacheScope": "public",
                "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "swapper", "version": "1.0.0"}}}),
        )),
        "tools/list" => json_answer(result(
            &id,
            json!({"tools": [{"name": "echo", "description": "Says the word back.",
                "inputSchema": {"type": "object", "properties": {"word": {"type": "string"}}, "required": ["word"]}}],
                "ttlMs": 60000, "cacheScope": "private", "resultType": "complete"}),
        )),
        "tools/call" => {
            let word = request["params"]["arguments"]["word"].clone();
            let said = json!({"content": [{"type": "text", "text": json!({"word": word}).to_string()}],
                "structuredContent": {"word": word}, "isError": false, "resultType": "complete"});
            let first = waiting.lock().unwrap().take();
            match first {
                // Every other pair is answered right.
                Some((first_id, first_said, first_tx))
                    if PAIRS.fetch_add(1, Ordering::Relaxed) % 2 == 1 =>
                {
                    let _ = first_tx.send(result(&first_id, first_said));
                    json_answer(result(&id, said))
                }
                Some((first_id, first_said, first_tx)) => {
                    let _ = first_tx.send(result(&id, first_said));
                    json_answer(result(&first_id, said))
                }
                None => {
                    let (tx, rx) = oneshot::channel();
                    *waiting.lock().unwrap() = Some((id.clone(), said.clone(), tx));
                    match tokio::time::timeout(Duration::from_millis(150), rx).await {
                        Ok(Ok(swapped)) => json_answer(swapped),
                        // Alone: answered right, unless another took it meanwhile.
                        _ => {
                            let mut waiting = waiting.lock().unwrap();
                            match waiting.take() {
                                Some((own, own_said, _)) if own == id => {
                                    json_answer(result(&id, own_said))
                                }
                                // Another's, which took ours meanwhile: left for the next.
                                other => {
                                    *waiting = other;
                                    json_answer(result(&id, said))
                                }
                            }
                        }
                    }
                }
            }
        }
        _ if request.get("id").is_none() => AxumStatus::ACCEPTED.into_response(),
        _ => json_answer(
            json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "no such method"}}),
        ),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_mcp_server_swapping_ids_under_traffic() {
    let _serial = SERIAL.lock().await;
    with_postgres(|database| async move {
        let dir = TempDir::new();
        let app = axum::Router::new()
            .route("/mcp", post(swapper).delete(|| async { AxumStatus::OK }))
            .with_state(Arc::new(Mutex::new(None)));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let server = listener.local_addr().unwrap();
        let serving = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        let proxy = Proxy::start(server).await;
        let a = Serve::start(&database, dir.path(), "a").await;
        let admin = a.admin_key();
        let key = a.tenant(&admin, "acme").await;
        let url = format!("http://{}/mcp", proxy.host_port());
        a.put("/v1/mcp-servers/swapper", &key, json!({"url": url})).await;
        a.put("/v1/agents/echoer", &key, json!({"default": true, "tools": [{"tool": "swapper/echo"}]}))
            .await;
        let b = Serve::start(&database, dir.path(), "b").await;
        let bases = vec![a.base.clone(), b.base.clone()];
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(40))
            .build()
            .unwrap();
        let mut workers = Vec::new();
        for c in 0..8 {
            let (client, bases, key) = (client.clone(), bases.clone(), key.clone());
            workers.push(tokio::spawn(async move {
                let call = format!("mcp-{c}");
                until_ok(&client, &bases, &key, Method::POST, "/v1/calls", Some(json!({"call_id": call}))).await;
                let mut seen = Vec::new();
                for i in 0..15 {
                    let word = format!("w{c}x{i}y");
                    let body = json!({"function_call_id": format!("{call}-{i}"), "name": "echo", "arguments": {"word": word}});
                    let answer =
                        invoke_until_answered(&client, &bases, &key, &call, &body, Duration::from_secs(60)).await;
                    seen.push((word, answer));
                }
                seen
            }));
        }
        let mut totals = Totals::default();
        let (mut right, mut refused) = (0, 0);
        for w in workers {
            for (word, answer) in w.await.unwrap() {
                totals.invocations += 1;
                let Some(answer) = answer else {
                    totals.answers_lost += 1;
                    continue;
                };
                let words = words_in(answer["output"].as_str().unwrap_or_default());
                if answer["ok"] == true && words == [word.as_str()] {
                    right += 1;
                } else if answer["error"] == "upstream_unavailable" && words.is_empty() {
                    refused += 1;
                } else {
                    // Another call's word, or an answer that is neither.
                    eprintln!("{word}: {answer}");
                    totals.answers_duplicated += 1;
                }
            }
        }
        eprintln!("an_mcp_server_swapping_ids_under_traffic: {right} answered right, {refused} swapped answers refused");
        totals.faults = refused;
        serving.abort();
        drop((a, b));
        totals.report("an_mcp_server_swapping_ids_under_traffic");
    })
    .await;
}

/// The words (`w<call>x<n>y`) a text names.
fn words_in(text: &str) -> Vec<&str> {
    let mut found = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find('w') {
        let tail = &rest[at..];
        let end = tail.find('y').map(|y| y + 1);
        match end {
            Some(end)
                if tail[1..end - 1].split_once('x').is_some_and(|(c, n)| {
                    !c.is_empty()
                        && !n.is_empty()
                        && c.bytes().all(|b| b.is_ascii_digit())
                        && n.bytes().all(|b| b.is_ascii_digit())
                }) =>
            {
                if !found.contains(&&tail[..end]) {
                    found.push(&tail[..end]);
                }
                rest = &tail[end..];
            }
            _ => rest = &tail[1..],
        }
    }
    found
}
