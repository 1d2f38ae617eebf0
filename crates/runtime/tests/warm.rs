//! Warm upstreams: a call's start opens a connection to the origins its agent's tools name, so
//! the first tool call reuses it. The upstream is a loopback HTTP/1.1 server that counts its
//! connections and charges each new one a set-up delay (standing in for DNS, TCP and TLS).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;
use switchboard_core::{CallInfo, Context, Limits, Tool};
use switchboard_runtime::effects::TransferLedger;
use switchboard_runtime::executor::{CallConfig, OpenGate};
use switchboard_runtime::http::{HttpConfig, HttpEffects};
use switchboard_runtime::{Effects, Executor, Invocation, ToolEntry};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;

/// Each new connection's first answer waits this long.
const SETUP: Duration = Duration::from_millis(150);

#[derive(Default)]
struct Seen {
    connections: usize,
    /// (connection number, request line)
    requests: Vec<(usize, String)>,
}

async fn upstream() -> (String, Arc<Mutex<Seen>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Seen::default()));
    let s = Arc::clone(&seen);
    tokio::spawn(async move {
        loop {
            let Ok((sock, _)) = listener.accept().await else {
                return;
            };
            let n = count(&s);
            tokio::spawn(serve(sock, n, Arc::clone(&s), SETUP));
        }
    });
    (format!("http://{addr}"), seen)
}

fn count(seen: &Mutex<Seen>) -> usize {
    let mut g = seen.lock().unwrap();
    g.connections += 1;
    g.connections
}

/// Answers HTTP/1.1 requests (no bodies) on one connection, the first after `setup`.
async fn serve<S: AsyncRead + AsyncWrite + Unpin>(
    mut sock: S,
    n: usize,
    seen: Arc<Mutex<Seen>>,
    setup: Duration,
) {
    let mut first = true;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
            match sock.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(k) => {
                    buf.extend_from_slice(&chunk[..k]);
                    continue;
                }
            }
        };
        let head = String::from_utf8_lossy(&buf[..end]).to_string();
        buf.drain(..end + 4);
        let line = head.lines().next().unwrap_or_default().to_owned();
        seen.lock().unwrap().requests.push((n, line.clone()));
        if first {
            tokio::time::sleep(setup).await;
            first = false;
        }
        let body = r#"{"status":"shipped"}"#;
        let mut reply = format!(
            "HTTP/1.1 200 OK\r\ncontent-length: {}\r\ncontent-type: application/json\r\n\r\n",
            body.len()
        );
        if !line.starts_with("HEAD") {
            reply.push_str(body);
        }
        if sock.write_all(reply.as_bytes()).await.is_err() {
            return;
        }
    }
}

fn config(base: &str) -> CallConfig {
    let def = json!({
        "name": "order_status", "description": "Looks an order up.",
        "parameters": [{"name": "order", "type": "string", "required": true}],
        "actions": [{"type": "api_call", "method": "GET",
                     "url": format!("{base}/orders/{{{{params.order}}}}"), "retry_count": 0}],
        "on_success": [{"type": "respond", "message": "It is {{response.body.status}}."}]
    });
    let tool = Arc::new(Tool::parse(&def, &Limits::default()).unwrap_or_else(|e| panic!("{e}")));
    assert_eq!(tool.upstream_origins(), [base.to_owned()]);
    let tools = HashMap::from([("order_status".to_owned(), ToolEntry::new(tool))]);
    CallConfig {
        tenant_id: "acme".into(),
        agents: HashMap::from([("main".to_owned(), tools)]),
        ..CallConfig::default()
    }
}

fn executor() -> Executor {
    executor_trusting(Vec::new())
}

fn executor_trusting(roots: Vec<reqwest::Certificate>) -> Executor {
    let http = HttpEffects::new(HttpConfig {
        allow_private_networks: true,
        extra_root_certificates: roots,
        ..HttpConfig::default()
    })
    .unwrap();
    Executor::new(Arc::new(Effects::http_only(Arc::new(http))))
}

async fn first_call(exec: &Executor, config: &CallConfig) -> Duration {
    let call = CallInfo {
        id: "call_1".into(),
        tenant_id: "acme".into(),
        agent: "main".into(),
        from: None,
        to: None,
        started_at: "2026-11-29T10:00:00Z".into(),
    };
    let inv = Invocation {
        call_id: "call_1".into(),
        function_call_id: "fc_1".into(),
        name: "order_status".into(),
        arguments_json: json!({"order": "A1"}).to_string(),
        response_id: None,
        item_id: None,
    };
    let t0 = Instant::now();
    let e = exec
        .execute(
            config,
            &Context::new(&call, json!({})),
            &inv,
            &OpenGate,
            &TransferLedger::default(),
        )
        .await;
    assert!(e.outcome.ok(), "{:?}", e.outcome.output());
    t0.elapsed()
}

#[tokio::test]
async fn the_first_tool_call_reuses_the_connection_opened_at_the_calls_start() {
    let (base, seen) = upstream().await;
    let (exec, config) = (executor(), config(&base));
    exec.warm_upstreams(&config, "main");
    // The call's start returns at once; the warming request arrives in the background.
    let t0 = Instant::now();
    while seen.lock().unwrap().requests.is_empty() {
        assert!(t0.elapsed() < Duration::from_secs(5), "no warming request");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // Past the set-up delay: the connection is in the pool.
    tokio::time::sleep(SETUP + Duration::from_millis(100)).await;
    let took = first_call(&exec, &config).await;
    let g = seen.lock().unwrap();
    assert_eq!(g.connections, 1, "{:?}", g.requests);
    assert_eq!(
        g.requests,
        [
            (1, "HEAD / HTTP/1.1".to_owned()),
            (1, "GET /orders/A1 HTTP/1.1".to_owned())
        ]
    );
    drop(g);
    println!("first tool call after warming: {took:?} (a new connection costs {SETUP:?} more)");
}

#[tokio::test]
async fn without_warming_the_first_call_pays_the_set_up() {
    let (base, seen) = upstream().await;
    let (exec, config) = (executor(), config(&base));
    let took = first_call(&exec, &config).await;
    assert!(took >= SETUP, "{took:?}");
    assert_eq!(seen.lock().unwrap().connections, 1);
}

#[tokio::test]
async fn an_origin_is_warmed_once_however_many_calls_start() {
    let (base, seen) = upstream().await;
    let (exec, config) = (executor(), config(&base));
    for _ in 0..5 {
        exec.warm_upstreams(&config, "main");
    }
    tokio::time::sleep(SETUP + Duration::from_millis(200)).await;
    assert_eq!(seen.lock().unwrap().requests.len(), 1);
}

#[tokio::test]
async fn private_origins_are_not_warmed_unless_allowed() {
    let (base, seen) = upstream().await;
    let http = HttpEffects::new(HttpConfig::default()).unwrap();
    let exec = Executor::new(Arc::new(Effects::http_only(Arc::new(http))));
    exec.warm_upstreams(&config(&base), "main");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(seen.lock().unwrap().connections, 0);
}

/// One-way delay of the link between the runtime and the TLS upstream (50 ms round trip).
const ONE_WAY: Duration = Duration::from_millis(25);

/// A TLS upstream on loopback (a certificate for 127.0.0.1 made now) behind a proxy that
/// delivers every byte, each way, [`ONE_WAY`] late. Returns its origin, the CA to trust, and
/// what it saw.
async fn tls_upstream_far_away() -> (String, reqwest::Certificate, Arc<Mutex<Seen>>) {
    use tokio_rustls::rustls;
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let server = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![cert.der().clone()],
            rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
        )
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(server));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let upstream = listener.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Seen::default()));
    let s = Arc::clone(&seen);
    tokio::spawn(async move {
        loop {
            let Ok((sock, _)) = listener.accept().await else {
                return;
            };
            let (acceptor, s) = (acceptor.clone(), Arc::clone(&s));
            tokio::spawn(async move {
                let n = count(&s);
                if let Ok(tls) = acceptor.accept(sock).await {
                    serve(tls, n, s, Duration::ZERO).await;
                }
            });
        }
    });
    let proxy = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = proxy.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((client, _)) = proxy.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let Ok(server) = tokio::net::TcpStream::connect(upstream).await else {
                    return;
                };
                let (cr, cw) = client.into_split();
                let (sr, sw) = server.into_split();
                tokio::spawn(delayed_pipe(cr, sw));
                tokio::spawn(delayed_pipe(sr, cw));
            });
        }
    });
    let ca = reqwest::Certificate::from_der(cert.der()).unwrap();
    (format!("https://{addr}"), ca, seen)
}

/// Copies `from` to `to`, each chunk [`ONE_WAY`] after it was read, in order.
async fn delayed_pipe(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
) {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(tokio::time::Instant, Vec<u8>)>();
    tokio::spawn(async move {
        let mut chunk = vec![0u8; 16 * 1024];
        loop {
            match from.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(k) => {
                    let due = tokio::time::Instant::now() + ONE_WAY;
                    if tx.send((due, chunk[..k].to_vec())).is_err() {
                        return;
                    }
                }
            }
        }
    });
    while let Some((due, bytes)) = rx.recv().await {
        tokio::time::sleep_until(due).await;
        if to.write_all(&bytes).await.is_err() {
            return;
        }
    }
}

/// The first tool call of a call to a TLS upstream 50 ms away, cold and warmed: the warmed
/// one makes no new connection (no TLS handshake) and takes one round trip.
#[tokio::test]
async fn a_warmed_tls_upstream_costs_the_first_call_no_handshake() {
    let (base, ca, seen) = tls_upstream_far_away().await;
    let (exec, call) = (executor_trusting(vec![ca]), config(&base));
    let cold = first_call(&exec, &call).await;
    assert_eq!(seen.lock().unwrap().connections, 1);

    let (base, ca, seen) = tls_upstream_far_away().await;
    let (exec, config) = (executor_trusting(vec![ca]), config(&base));
    exec.warm_upstreams(&config, "main");
    let t0 = Instant::now();
    while seen.lock().unwrap().requests.is_empty() {
        assert!(t0.elapsed() < Duration::from_secs(5), "no warming request");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // The HEAD's answer is one more one-way trip away.
    tokio::time::sleep(ONE_WAY * 4).await;
    let warm = first_call(&exec, &config).await;
    let g = seen.lock().unwrap();
    assert_eq!(g.connections, 1, "{:?}", g.requests);
    assert_eq!(g.requests[1], (1, "GET /orders/A1 HTTP/1.1".to_owned()));
    // A cold call pays the TLS handshake's round trip on top of the request's.
    assert!(cold >= ONE_WAY * 4, "{cold:?}");
    println!("first tool call to a TLS upstream 50 ms away: cold {cold:?}, warmed {warm:?}");
}
