//! Slow and idle clients against a real listener on 127.0.0.1:0, speaking raw HTTP/1.1 over TCP:
//! each connection is closed at the bound that holds for what it is doing, a node at its cap
//! makes room by closing its quietest connection (and answers `503` when every one is busy),
//! and a request in flight is never cut by the connection's own timeouts. The timeouts are a
//! few hundred milliseconds here; every wait is bounded.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{Value, json};
use switchboard_server::ServerConfig;
use switchboard_server::listener::ConnectionLimits;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::{Backend, TestApp, spawn_app_with};

/// Long enough that nothing but the bound under test closes a connection.
const LONG: Duration = Duration::from_secs(30);

fn limits() -> ConnectionLimits {
    ConnectionLimits {
        max_connections: 64,
        header_read_timeout: LONG,
        idle_timeout: LONG,
        body_read_timeout: LONG,
        send_timeout: LONG,
    }
}

async fn app_with(connections: ConnectionLimits) -> TestApp {
    let config = ServerConfig {
        tenant_rate_per_s: 10_000,
        connections,
        ..ServerConfig::default()
    };
    spawn_app_with(Backend::Sqlite, config).await
}

async fn connect(app: &TestApp) -> TcpStream {
    TcpStream::connect(app.base.trim_start_matches("http://"))
        .await
        .unwrap()
}

/// Reads until the server closes the connection (end of stream or reset), at most `within`:
/// how long it took and everything read, or `None` if it stayed open.
async fn closed_within(
    stream: &mut (impl AsyncRead + Unpin),
    within: Duration,
) -> Option<(Duration, Vec<u8>)> {
    let started = Instant::now();
    let deadline = tokio::time::Instant::now() + within;
    let mut read = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    loop {
        match tokio::time::timeout_at(deadline, stream.read(&mut buf)).await {
            Err(_) => return None,
            Ok(Ok(0) | Err(_)) => return Some((started.elapsed(), read)),
            Ok(Ok(n)) => read.extend_from_slice(&buf[..n]),
        }
    }
}

/// Reads one response whose body is `Content-Length` long: its status and body.
async fn response(stream: &mut TcpStream) -> (u16, String, String) {
    let mut read = Vec::new();
    let mut buf = [0u8; 4096];
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let text = String::from_utf8_lossy(&read).into_owned();
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let length = head
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length: ")
                        .map(str::to_owned)
                })
                .and_then(|l| l.trim().parse::<usize>().ok())
                .unwrap_or(0);
            if body.len() >= length {
                let status = head.split(' ').nth(1).unwrap().parse().unwrap();
                return (status, head.to_owned(), body[..length].to_owned());
            }
        }
        let n = tokio::time::timeout_at(deadline, stream.read(&mut buf))
            .await
            .expect("a response within 10 s")
            .unwrap();
        assert!(n > 0, "closed before a whole response: {text}");
        read.extend_from_slice(&buf[..n]);
    }
}

const HEALTHZ: &[u8] = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";

/// Sends `bytes` one at a time, `every` apart, until the connection fails or all are sent.
fn trickle(mut writer: tokio::net::tcp::OwnedWriteHalf, bytes: Vec<u8>, every: Duration) {
    tokio::spawn(async move {
        for b in bytes {
            if writer.write_all(&[b]).await.is_err() {
                return;
            }
            tokio::time::sleep(every).await;
        }
    });
}

#[tokio::test]
async fn a_request_head_sent_a_byte_at_a_time_is_cut_at_the_header_timeout() {
    let header = Duration::from_millis(400);
    let app = app_with(ConnectionLimits {
        header_read_timeout: header,
        ..limits()
    })
    .await;
    let metrics_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let metrics_addr = metrics_listener.local_addr().unwrap();
    let (stop_metrics, stopped) = tokio::sync::oneshot::channel::<()>();
    let metrics = tokio::spawn(switchboard_server::serve_metrics(
        metrics_listener,
        app.state.clone(),
        async move {
            let _ = stopped.await;
        },
    ));
    let opened = Instant::now();
    let mut slow = vec![connect(&app).await, connect(&app).await];
    slow.push(TcpStream::connect(metrics_addr).await.unwrap());
    let head = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ".repeat(20);
    let mut readers = Vec::new();
    for stream in slow {
        let (reader, writer) = stream.into_split();
        trickle(writer, head.clone(), Duration::from_millis(50));
        readers.push(reader);
    }
    // Meanwhile the node answers.
    assert_eq!(app.get("/healthz", "").await.0, StatusCode::OK);
    for mut stream in readers {
        closed_within(&mut stream, Duration::from_secs(5))
            .await
            .expect("a head trickled in is cut at the header timeout");
        let after = opened.elapsed();
        assert!(after >= header - Duration::from_millis(100), "{after:?}");
    }
    let _ = stop_metrics.send(());
    metrics.await.unwrap().unwrap();
    app.stop().await;
}

#[tokio::test]
async fn an_idle_keep_alive_connection_is_closed_after_the_idle_timeout_not_the_header_one() {
    let idle = Duration::from_millis(1200);
    let app = app_with(ConnectionLimits {
        header_read_timeout: Duration::from_millis(300),
        idle_timeout: idle,
        ..limits()
    })
    .await;
    let mut stream = connect(&app).await;
    stream.write_all(HEALTHZ).await.unwrap();
    assert_eq!(response(&mut stream).await.0, 200);
    // Quiet for twice the header timeout: still open, and it serves the next request.
    tokio::time::sleep(Duration::from_millis(600)).await;
    stream.write_all(HEALTHZ).await.unwrap();
    assert_eq!(response(&mut stream).await.0, 200);
    let (after, read) = closed_within(&mut stream, Duration::from_secs(5))
        .await
        .expect("an idle keep-alive connection is closed at the idle timeout");
    assert!(read.is_empty(), "{}", String::from_utf8_lossy(&read));
    assert!(after >= idle - Duration::from_millis(200), "{after:?}");
    app.stop().await;
}

#[tokio::test]
async fn a_body_trickled_slowly_is_answered_408_and_the_connection_closed() {
    let app = app_with(ConnectionLimits {
        body_read_timeout: Duration::from_millis(500),
        ..limits()
    })
    .await;
    let key = app.tenant("acme").await;
    let stream = connect(&app).await;
    let (mut reader, mut writer) = stream.into_split();
    let head = format!(
        "POST /v1/tools HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {key}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n"
    );
    writer.write_all(head.as_bytes()).await.unwrap();
    trickle(writer, vec![b' '; 1000], Duration::from_millis(50));
    let mut read = Vec::new();
    let outcome = tokio::time::timeout(Duration::from_secs(5), reader.read_to_end(&mut read)).await;
    assert!(outcome.is_ok(), "no answer and no close within 5 s");
    let text = String::from_utf8_lossy(&read);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("{text}"));
    assert!(head.starts_with("HTTP/1.1 408"), "{head}");
    let body: Value = serde_json::from_str(body).unwrap_or_else(|_| panic!("{body}"));
    assert_eq!(body["error"]["code"], "request_timeout", "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--body-read-timeout-ms"),
        "{body}"
    );
    app.stop().await;
}

#[tokio::test]
async fn a_client_that_stops_reading_is_cut_at_the_send_timeout() {
    let app = app_with(ConnectionLimits {
        send_timeout: Duration::from_millis(300),
        ..limits()
    })
    .await;
    let key = app.tenant("acme").await;
    // A list of tools larger than the socket buffers between client and server hold.
    for i in 0..8 {
        let mut tool = crate::support::save_meal();
        tool["name"] = json!(format!("tool_{i}"));
        tool["description"] = json!("x".repeat(700 * 1024));
        assert_eq!(
            app.post("/v1/tools", &key, tool).await.0,
            StatusCode::CREATED
        );
    }
    let whole = app.get("/v1/tools", &key).await.1.to_string().len();
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut stream = socket
        .connect(app.base.trim_start_matches("http://").parse().unwrap())
        .await
        .unwrap();
    let request =
        format!("GET /v1/tools HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {key}\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    // The answer has begun; the client takes nothing of it for three send timeouts.
    tokio::time::timeout(Duration::from_secs(10), stream.peek(&mut [0u8; 1]))
        .await
        .expect("the answer begins")
        .unwrap();
    tokio::time::sleep(Duration::from_millis(900)).await;
    let (_, read) = closed_within(&mut stream, Duration::from_secs(10))
        .await
        .expect("a client that took nothing for the send timeout is cut");
    assert!(
        read.len() < whole,
        "the whole answer ({whole} bytes) arrived: the connection was not cut"
    );
    app.stop().await;
}

#[tokio::test]
async fn at_the_cap_the_quietest_connection_makes_room_and_when_all_are_busy_a_new_one_gets_503() {
    let app = app_with(ConnectionLimits {
        max_connections: 3,
        ..limits()
    })
    .await;
    let key = app.tenant("acme").await;
    // Three connections that send nothing fill the listener.
    let mut quiet = Vec::new();
    for _ in 0..3 {
        quiet.push(connect(&app).await);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // A working client still gets in: the oldest quiet one makes room.
    let mut working = connect(&app).await;
    working.write_all(HEALTHZ).await.unwrap();
    assert_eq!(response(&mut working).await.0, 200);
    assert!(
        closed_within(&mut quiet[0], Duration::from_secs(2))
            .await
            .is_some(),
        "the oldest quiet connection was not closed to make room"
    );
    drop(working);
    // Three requests in flight (their bodies not all sent) take every place.
    let post = format!(
        "POST /v1/tools HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {key}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{{"
    );
    let mut busy = Vec::new();
    for _ in 0..3 {
        let mut stream = connect(&app).await;
        stream.write_all(post.as_bytes()).await.unwrap();
        busy.push(stream);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut refused = connect(&app).await;
    refused.write_all(HEALTHZ).await.unwrap();
    let (status, head, body) = response(&mut refused).await;
    assert_eq!(status, 503, "{head}");
    assert!(
        head.to_ascii_lowercase().contains("retry-after: 1"),
        "{head}"
    );
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body["error"]["code"], "unavailable", "{body}");
    assert_eq!(body["error"]["details"]["limit"], json!(3), "{body}");
    assert!(
        closed_within(&mut refused, Duration::from_secs(2))
            .await
            .is_some()
    );
    // A request in flight was not cut to make room: it finishes.
    let first = &mut busy[0];
    first.write_all(&[b' '; 98]).await.unwrap();
    first.write_all(b"}").await.unwrap();
    let (status, _, body) = response(first).await;
    assert!(body.contains("invalid_tool"), "{status} {body}");
    // Clients that go away make room at once.
    busy.clear();
    let started = Instant::now();
    loop {
        let mut stream = connect(&app).await;
        stream.write_all(HEALTHZ).await.unwrap();
        if response(&mut stream).await.0 == 200 {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "the node did not recover"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    app.stop().await;
}

#[tokio::test]
async fn a_slow_request_in_flight_outlives_every_connection_timeout() {
    let app = app_with(ConnectionLimits {
        header_read_timeout: Duration::from_millis(200),
        idle_timeout: Duration::from_millis(200),
        send_timeout: Duration::from_millis(200),
        ..limits()
    })
    .await;
    let upstream = wiremock::MockServer::start().await;
    wiremock::Mock::given(wiremock::matchers::method("GET"))
        .respond_with(
            wiremock::ResponseTemplate::new(200)
                .set_body_json(json!({"found": true}))
                .set_delay(Duration::from_millis(1200)),
        )
        .mount(&upstream)
        .await;
    let key = app.tenant("acme").await;
    let tool = json!({
        "name": "slow_lookup",
        "description": "Look something up in a slow system",
        "parameters": [],
        "actions": [{"type": "api_call", "method": "GET", "url": format!("{}/slow", upstream.uri()),
                     "retry_count": 0, "response_path": "result.found"}],
        "on_success": [{"type": "respond", "message": "Found it."}]
    });
    assert_eq!(
        app.post("/v1/tools", &key, tool).await.0,
        StatusCode::CREATED
    );
    let agent =
        json!({"instructions": "Help.", "default": true, "tools": [{"tool": "slow_lookup"}]});
    assert_eq!(
        app.put("/v1/agents/front", &key, agent).await.0,
        StatusCode::OK
    );
    assert!(
        app.post("/v1/calls", &key, json!({"call_id": "c1"}))
            .await
            .0
            .is_success()
    );
    let answer = crate::support::invoke(&app, &key, "c1", "f1", "slow_lookup", json!({})).await;
    assert_eq!(answer["ok"], true, "{answer}");
    app.stop().await;
}

#[tokio::test]
async fn shutdown_finishes_the_requests_in_flight_and_is_not_held_up_by_slow_clients() {
    let mut app = app_with(limits()).await;
    let upstream = wiremock::MockServer::start().await;
    wiremock::Mock::given(wiremock::matchers::method("GET"))
        .respond_with(
            wiremock::ResponseTemplate::new(200)
                .set_body_json(json!({"found": true}))
                .set_delay(Duration::from_millis(1000)),
        )
        .mount(&upstream)
        .await;
    let key = app.tenant("acme").await;
    let tool = json!({
        "name": "slow_lookup",
        "description": "Look something up in a slow system",
        "parameters": [],
        "actions": [{"type": "api_call", "method": "GET", "url": format!("{}/slow", upstream.uri()),
                     "retry_count": 0}],
        "on_success": [{"type": "respond", "message": "Found it."}]
    });
    assert_eq!(
        app.post("/v1/tools", &key, tool).await.0,
        StatusCode::CREATED
    );
    let agent =
        json!({"instructions": "Help.", "default": true, "tools": [{"tool": "slow_lookup"}]});
    assert_eq!(
        app.put("/v1/agents/front", &key, agent).await.0,
        StatusCode::OK
    );
    assert!(
        app.post("/v1/calls", &key, json!({"call_id": "c1"}))
            .await
            .0
            .is_success()
    );
    // A client that sent half a request head, and one that sent nothing.
    let mut slow = connect(&app).await;
    slow.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        .await
        .unwrap();
    let mut quiet = connect(&app).await;
    let in_flight = tokio::spawn({
        let (client, url, key) = (
            app.client.clone(),
            format!("{}/v1/calls/c1/invocations", app.base),
            key.clone(),
        );
        async move {
            let body = json!({"function_call_id": "f1", "name": "slow_lookup", "arguments": {}});
            let answer = client
                .post(url)
                .bearer_auth(key)
                .json(&body)
                .send()
                .await
                .unwrap();
            (answer.status(), answer.json::<Value>().await.unwrap())
        }
    });
    while upstream
        .received_requests()
        .await
        .unwrap_or_default()
        .is_empty()
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::timeout(Duration::from_secs(10), app.stop_server())
        .await
        .expect("shutdown is not held up by clients that send nothing");
    let (status, answer) = in_flight.await.unwrap();
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["result"]["ok"], true, "{answer}");
    for stream in [&mut slow, &mut quiet] {
        assert!(
            closed_within(stream, Duration::from_secs(1))
                .await
                .is_some()
        );
    }
    app.stop().await;
}
