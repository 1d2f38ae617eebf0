//! The `api_call` effect against real wiremock servers on loopback.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use switchboard_core::effect::{EffectOutcome, HttpRequest, HttpResponse};
use switchboard_core::error::{ErrorCode, ToolError};
use switchboard_runtime::http::{BreakerState, HttpConfig, HttpEffects};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use wiremock::matchers::{header, method, path, query_param};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

const TENANT: &str = "tenant-a";
const SECRET: &str = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD";

fn effects(allow_private_networks: bool) -> HttpEffects {
    HttpEffects::new(HttpConfig {
        allow_private_networks,
        breaker_failure_threshold: 3,
        breaker_cooldown: Duration::from_millis(200),
        ..HttpConfig::default()
    })
    .unwrap()
}

fn request(url: String) -> HttpRequest {
    HttpRequest {
        method: "POST".into(),
        url,
        query: vec![],
        headers: vec![],
        body: Some(json!({"meal": "lunch"})),
        timeout_ms: 2_000,
        retry_count: 2,
        retry_delay_ms: 10,
        idempotency_key: "call1-fc1-2".into(),
        sign: false,
        max_body_bytes: 64 * 1024,
        max_json_depth: 64,
    }
}

fn response(outcome: EffectOutcome) -> HttpResponse {
    match outcome {
        EffectOutcome::Http(resp) => resp,
        other => panic!("expected a response, got {other:?}"),
    }
}

fn failure(outcome: EffectOutcome) -> ToolError {
    match outcome {
        EffectOutcome::Failed(error) => error,
        other => panic!("expected a failure, got {other:?}"),
    }
}

async fn requests_to(server: &MockServer) -> Vec<Request> {
    server.received_requests().await.unwrap()
}

/// Answers with the given templates in turn (the last one repeats) and records when each
/// request arrived.
#[derive(Clone)]
struct Sequence {
    templates: Vec<ResponseTemplate>,
    arrivals: Arc<Mutex<Vec<Instant>>>,
}

impl Respond for Sequence {
    fn respond(&self, _: &Request) -> ResponseTemplate {
        let mut arrivals = self.arrivals.lock().unwrap();
        arrivals.push(Instant::now());
        let i = (arrivals.len() - 1).min(self.templates.len() - 1);
        self.templates[i].clone()
    }
}

async fn sequence_server(
    templates: Vec<ResponseTemplate>,
) -> (MockServer, Arc<Mutex<Vec<Instant>>>) {
    let server = MockServer::start().await;
    let arrivals = Arc::new(Mutex::new(Vec::new()));
    Mock::given(method("POST"))
        .respond_with(Sequence {
            templates,
            arrivals: arrivals.clone(),
        })
        .mount(&server)
        .await;
    (server, arrivals)
}

#[tokio::test]
async fn a_503_then_200_succeeds_on_the_second_try() {
    let (server, arrivals) = sequence_server(vec![
        ResponseTemplate::new(503),
        ResponseTemplate::new(200).set_body_json(json!({"id": 7})),
    ])
    .await;
    let resp = response(
        effects(true)
            .perform(TENANT, None, &request(server.uri()))
            .await,
    );
    assert_eq!(resp.status, 200);
    assert_eq!(resp.body, json!({"id": 7}));
    assert_eq!(arrivals.lock().unwrap().len(), 2);
}

#[tokio::test]
async fn retry_after_replaces_the_backoff() {
    let (server, arrivals) = sequence_server(vec![
        ResponseTemplate::new(429).insert_header("Retry-After", "1"),
        ResponseTemplate::new(200),
    ])
    .await;
    let resp = response(
        effects(true)
            .perform(TENANT, None, &request(server.uri()))
            .await,
    );
    assert_eq!(resp.status, 200);
    let arrivals = arrivals.lock().unwrap();
    assert_eq!(arrivals.len(), 2);
    let gap = arrivals[1] - arrivals[0];
    assert!(gap >= Duration::from_millis(950), "retried after {gap:?}");
    assert!(gap < Duration::from_millis(1_500), "retried after {gap:?}");
}

#[tokio::test]
async fn retry_after_is_capped() {
    let (server, arrivals) = sequence_server(vec![
        ResponseTemplate::new(503).insert_header("Retry-After", "3600"),
        ResponseTemplate::new(200),
    ])
    .await;
    let effects = HttpEffects::new(HttpConfig {
        allow_private_networks: true,
        max_retry_after: Duration::from_millis(100),
        ..HttpConfig::default()
    })
    .unwrap();
    let resp = response(effects.perform(TENANT, None, &request(server.uri())).await);
    assert_eq!(resp.status, 200);
    let arrivals = arrivals.lock().unwrap();
    assert!(arrivals[1] - arrivals[0] < Duration::from_millis(600));
}

#[tokio::test]
async fn a_400_is_not_retried() {
    let (server, _) = sequence_server(vec![
        ResponseTemplate::new(400).set_body_json(json!({"error": "bad meal"})),
    ])
    .await;
    let resp = response(
        effects(true)
            .perform(TENANT, None, &request(server.uri()))
            .await,
    );
    assert_eq!(resp.status, 400);
    assert_eq!(resp.body, json!({"error": "bad meal"}));
    assert_eq!(requests_to(&server).await.len(), 1);
}

#[tokio::test]
async fn the_last_retryable_status_is_the_response() {
    let (server, _) = sequence_server(vec![
        ResponseTemplate::new(502).set_body_string("bad gateway"),
    ])
    .await;
    let resp = response(
        effects(true)
            .perform(TENANT, None, &request(server.uri()))
            .await,
    );
    assert_eq!(resp.status, 502);
    assert_eq!(resp.body, json!("bad gateway"));
    assert_eq!(requests_to(&server).await.len(), 3);
}

#[tokio::test]
async fn a_slow_server_times_out_after_the_retries() {
    let (server, _) = sequence_server(vec![
        ResponseTemplate::new(200).set_delay(Duration::from_millis(500)),
    ])
    .await;
    let mut req = request(server.uri());
    req.timeout_ms = 100;
    req.retry_count = 1;
    let started = Instant::now();
    let error = failure(effects(true).perform(TENANT, None, &req).await);
    assert_eq!(error.code, ErrorCode::Timeout);
    assert_eq!(error.message, "127.0.0.1 did not answer within 0.1 s");
    assert!(
        started.elapsed() < Duration::from_millis(450),
        "took {:?}",
        started.elapsed()
    );
    assert_eq!(requests_to(&server).await.len(), 2);
}

#[tokio::test]
async fn a_refused_connection_is_api_call_failed() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let mut req = request(format!("http://127.0.0.1:{port}/orders?token=secret"));
    req.retry_count = 1;
    let error = failure(effects(true).perform(TENANT, None, &req).await);
    assert_eq!(error.code, ErrorCode::ApiCallFailed);
    assert_eq!(error.message, "could not connect to 127.0.0.1");
    assert!(!error.message.contains("secret") && !error.message.contains("orders"));
}

#[tokio::test]
async fn an_oversized_body_is_refused() {
    let (server, _) = sequence_server(vec![
        ResponseTemplate::new(200).set_body_string("x".repeat(2_000)),
    ])
    .await;
    let mut req = request(server.uri());
    req.max_body_bytes = 100;
    let error = failure(effects(true).perform(TENANT, None, &req).await);
    assert_eq!(error.code, ErrorCode::ApiCallFailed);
    assert!(
        error.message.ends_with("larger than 100 bytes"),
        "{}",
        error.message
    );
}

/// A JSON body nested past `max_json_depth` is refused (it could not be stored and read back);
/// one at the limit is parsed.
#[tokio::test]
async fn a_body_nested_too_deep_is_refused() {
    let nested = |d: usize| format!("{}1{}", "[".repeat(d), "]".repeat(d));
    let (server, _) = sequence_server(vec![
        ResponseTemplate::new(200).set_body_raw(nested(100), "application/json"),
        ResponseTemplate::new(200).set_body_raw(nested(64), "application/json"),
    ])
    .await;
    let req = request(server.uri());
    let error = failure(effects(true).perform(TENANT, None, &req).await);
    assert_eq!(error.code, ErrorCode::ApiCallFailed);
    assert!(
        error
            .message
            .ends_with("nests JSON 100 levels deep, over the limit of 64 (max_json_depth)"),
        "{}",
        error.message
    );
    let ok = response(effects(true).perform(TENANT, None, &req).await);
    assert_eq!(ok.body.to_string(), nested(64));
}

/// A server that streams a chunked body without a length and never ends it: the limit must
/// trip while streaming, long before the per-try timeout.
#[tokio::test]
async fn an_endless_chunked_body_is_refused_while_streaming() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        let mut buf = [0u8; 4096];
        let _ = socket.read(&mut buf).await;
        let head =
            "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ntransfer-encoding: chunked\r\n\r\n";
        socket.write_all(head.as_bytes()).await.unwrap();
        let chunk = format!("40\r\n{}\r\n", "y".repeat(64));
        while socket.write_all(chunk.as_bytes()).await.is_ok() {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    });
    let mut req = request(format!("http://127.0.0.1:{port}/"));
    req.max_body_bytes = 1_000;
    req.timeout_ms = 5_000;
    let started = Instant::now();
    let error = failure(effects(true).perform(TENANT, None, &req).await);
    assert_eq!(error.code, ErrorCode::ApiCallFailed);
    assert!(
        error.message.ends_with("larger than 1000 bytes"),
        "{}",
        error.message
    );
    assert!(started.elapsed() < Duration::from_secs(2));
}

#[tokio::test]
async fn the_idempotency_key_is_the_same_on_every_try() {
    let (server, _) = sequence_server(vec![ResponseTemplate::new(500)]).await;
    let resp = response(
        effects(true)
            .perform(TENANT, None, &request(server.uri()))
            .await,
    );
    assert_eq!(resp.status, 500);
    let received = requests_to(&server).await;
    assert_eq!(received.len(), 3);
    for r in &received {
        assert_eq!(r.headers.get("idempotency-key").unwrap(), "call1-fc1-2");
    }
}

#[tokio::test]
async fn json_and_text_bodies_are_parsed_by_content_type() {
    let server = MockServer::start().await;
    Mock::given(path("/json"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(r#"{"ok":true}"#, "application/json"))
        .mount(&server)
        .await;
    Mock::given(path("/text"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(r#"{"ok":true}"#, "text/plain"))
        .mount(&server)
        .await;
    Mock::given(path("/untyped"))
        .respond_with(ResponseTemplate::new(200).set_body_bytes(b"[1,2]".to_vec()))
        .mount(&server)
        .await;
    Mock::given(path("/empty"))
        .respond_with(ResponseTemplate::new(204))
        .mount(&server)
        .await;
    let effects = effects(true);
    let body = |p: &'static str| {
        let req = request(format!("{}{p}", server.uri()));
        let effects = &effects;
        async move { response(effects.perform(TENANT, None, &req).await) }
    };
    let json = body("/json").await;
    assert_eq!(json.body, json!({"ok": true}));
    assert_eq!(json.headers["content-type"], json!("application/json"));
    assert_eq!(body("/text").await.body, json!(r#"{"ok":true}"#));
    assert_eq!(body("/untyped").await.body, json!([1, 2]));
    let empty = body("/empty").await;
    assert_eq!((empty.status, empty.body), (204, Value::Null));
}

#[tokio::test]
async fn method_query_headers_and_body_arrive() {
    let server = MockServer::start().await;
    Mock::given(method("PUT"))
        .and(path("/meals"))
        .and(query_param("user", "u 1"))
        .and(query_param("day", "mon"))
        .and(query_param("fixed", "yes"))
        .and(header("x-api-key", "k-123"))
        .and(header("content-type", "application/json"))
        .respond_with(ResponseTemplate::new(201).insert_header("X-Request-Id", "r-9"))
        .mount(&server)
        .await;
    let mut req = request(format!("{}/meals?fixed=yes", server.uri()));
    req.method = "PUT".into();
    req.query = vec![("user".into(), "u 1".into()), ("day".into(), "mon".into())];
    req.headers = vec![("X-Api-Key".into(), "k-123".into())];
    let resp = response(effects(true).perform(TENANT, None, &req).await);
    assert_eq!(resp.status, 201, "the mock did not match");
    assert_eq!(resp.headers["x-request-id"], json!("r-9"));
    let received = requests_to(&server).await;
    assert_eq!(
        received[0].body_json::<Value>().unwrap(),
        json!({"meal": "lunch"})
    );
    assert!(
        received[0]
            .headers
            .get("user-agent")
            .unwrap()
            .to_str()
            .unwrap()
            .starts_with("switchboard/")
    );
}

#[tokio::test]
async fn the_breaker_opens_fails_fast_then_closes_after_a_good_trial() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(500))
        .mount(&server)
        .await;
    let effects = effects(true);
    let host = format!("127.0.0.1:{}", server.address().port());
    let mut req = request(server.uri());
    req.retry_count = 0;
    for _ in 0..3 {
        assert_eq!(
            response(effects.perform(TENANT, None, &req).await).status,
            500
        );
    }
    assert!(matches!(
        effects.breaker_state(TENANT, &host),
        BreakerState::Open { .. }
    ));
    for _ in 0..2 {
        let error = failure(effects.perform(TENANT, None, &req).await);
        assert_eq!(error.code, ErrorCode::UpstreamUnavailable);
        assert!(
            error.message.starts_with("127.0.0.1 is failing;"),
            "{}",
            error.message
        );
    }
    assert_eq!(
        requests_to(&server).await.len(),
        3,
        "an open breaker must not call the host"
    );

    tokio::time::sleep(Duration::from_millis(250)).await;
    assert_eq!(effects.breaker_state(TENANT, &host), BreakerState::HalfOpen);
    server.reset().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200))
        .mount(&server)
        .await;
    assert_eq!(
        response(effects.perform(TENANT, None, &req).await).status,
        200
    );
    assert_eq!(effects.breaker_state(TENANT, &host), BreakerState::Closed);
    assert_eq!(
        response(effects.perform(TENANT, None, &req).await).status,
        200
    );
}

#[tokio::test]
async fn a_failed_trial_reopens_the_breaker() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(503))
        .mount(&server)
        .await;
    let effects = effects(true);
    let host = format!("127.0.0.1:{}", server.address().port());
    let mut req = request(server.uri());
    req.retry_count = 0;
    for _ in 0..3 {
        effects.perform(TENANT, None, &req).await;
    }
    tokio::time::sleep(Duration::from_millis(250)).await;
    assert_eq!(
        response(effects.perform(TENANT, None, &req).await).status,
        503
    );
    assert!(matches!(
        effects.breaker_state(TENANT, &host),
        BreakerState::Open { .. }
    ));
    assert_eq!(
        failure(effects.perform(TENANT, None, &req).await).code,
        ErrorCode::UpstreamUnavailable
    );
    assert_eq!(requests_to(&server).await.len(), 4);
}

#[tokio::test]
async fn another_tenant_is_unaffected_by_an_open_breaker() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(500))
        .mount(&server)
        .await;
    let effects = effects(true);
    let host = format!("127.0.0.1:{}", server.address().port());
    let mut req = request(server.uri());
    req.retry_count = 0;
    for _ in 0..3 {
        effects.perform(TENANT, None, &req).await;
    }
    assert_eq!(
        failure(effects.perform(TENANT, None, &req).await).code,
        ErrorCode::UpstreamUnavailable
    );
    assert_eq!(
        response(effects.perform("tenant-b", None, &req).await).status,
        500
    );
    assert_eq!(
        effects.breaker_state("tenant-b", &host),
        BreakerState::Closed
    );
    assert_eq!(requests_to(&server).await.len(), 4);
}

#[tokio::test]
async fn transport_failures_count_toward_the_breaker() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let effects = effects(true);
    let mut req = request(format!("http://127.0.0.1:{port}/"));
    req.retry_count = 0;
    for _ in 0..3 {
        assert_eq!(
            failure(effects.perform(TENANT, None, &req).await).code,
            ErrorCode::ApiCallFailed
        );
    }
    assert_eq!(
        failure(effects.perform(TENANT, None, &req).await).code,
        ErrorCode::UpstreamUnavailable
    );
}

async fn assert_guarded(url: String, server: &MockServer) {
    let error = failure(
        effects(false)
            .perform(TENANT, None, &request(url.clone()))
            .await,
    );
    assert_eq!(error.code, ErrorCode::ApiCallFailed, "{url}");
    assert!(
        error.message.ends_with(
            "resolves to a private or metadata address, which this server does not call"
        ),
        "{url}: {}",
        error.message
    );
    assert!(
        requests_to(server).await.is_empty(),
        "{url} reached the server"
    );
}

#[tokio::test]
async fn the_guard_refuses_loopback_metadata_and_names_that_resolve_to_them() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200))
        .mount(&server)
        .await;
    let port = server.address().port();
    assert_guarded(format!("http://127.0.0.1:{port}/"), &server).await;
    assert_guarded("http://169.254.169.254/latest/meta-data".into(), &server).await;
    assert_guarded("http://[::1]/".into(), &server).await;
    assert_guarded(format!("http://[::ffff:127.0.0.1]:{port}/"), &server).await;
    // Names go through the guarded resolver.
    assert_guarded(format!("http://localhost:{port}/"), &server).await;
}

#[tokio::test]
async fn the_guard_is_not_retried_and_not_a_breaker_failure() {
    let effects = effects(false);
    let mut req = request("http://localhost:9/".into());
    req.retry_count = 3;
    req.retry_delay_ms = 1_000;
    let started = Instant::now();
    for _ in 0..4 {
        assert_eq!(
            failure(effects.perform(TENANT, None, &req).await).code,
            ErrorCode::ApiCallFailed
        );
    }
    assert!(
        started.elapsed() < Duration::from_millis(900),
        "a refused request was retried"
    );
    assert_eq!(
        effects.breaker_state(TENANT, "localhost:9"),
        BreakerState::Closed
    );
}

#[tokio::test]
async fn only_http_and_https_are_called() {
    let error = failure(
        effects(true)
            .perform(TENANT, None, &request("file:///etc/passwd".into()))
            .await,
    );
    assert_eq!(error.code, ErrorCode::ApiCallFailed);
    assert!(
        error.message.contains("only http and https"),
        "{}",
        error.message
    );
}

#[tokio::test]
async fn redirects_are_followed_within_the_hop_limit() {
    let server = MockServer::start().await;
    Mock::given(path("/old"))
        .respond_with(ResponseTemplate::new(307).insert_header("Location", "/new"))
        .mount(&server)
        .await;
    Mock::given(path("/new"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!("moved")))
        .mount(&server)
        .await;
    Mock::given(path("/loop"))
        .respond_with(ResponseTemplate::new(302).insert_header("Location", "/loop"))
        .mount(&server)
        .await;
    let effects = effects(true);
    let resp = response(
        effects
            .perform(TENANT, None, &request(format!("{}/old", server.uri())))
            .await,
    );
    assert_eq!(resp.body, json!("moved"));
    let error = failure(
        effects
            .perform(TENANT, None, &request(format!("{}/loop", server.uri())))
            .await,
    );
    assert_eq!(error.code, ErrorCode::ApiCallFailed);
    assert!(
        error.message.contains("more than 5 redirects"),
        "{}",
        error.message
    );
}

#[tokio::test]
async fn a_signed_request_verifies_on_the_receiving_side() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200))
        .mount(&server)
        .await;
    let mut req = request(server.uri());
    req.sign = true;
    assert_eq!(
        response(effects(true).perform(TENANT, Some(SECRET), &req).await).status,
        200
    );
    let received = requests_to(&server).await;
    let r = &received[0];
    standardwebhooks::Webhook::new(SECRET)
        .unwrap()
        .verify(&r.body, &r.headers)
        .unwrap();
    assert_eq!(r.headers.get("webhook-id").unwrap(), "call1-fc1-2");
    assert!(
        r.headers
            .get("webhook-signature")
            .unwrap()
            .to_str()
            .unwrap()
            .starts_with("v1,")
    );
    // A different secret must not verify.
    let other = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    assert!(
        standardwebhooks::Webhook::new(other)
            .unwrap()
            .verify(&r.body, &r.headers)
            .is_err()
    );
}

#[tokio::test]
async fn sign_without_a_secret_is_refused() {
    let server = MockServer::start().await;
    let mut req = request(server.uri());
    req.sign = true;
    let error = failure(effects(true).perform(TENANT, None, &req).await);
    assert_eq!(error.code, ErrorCode::ToolExecutionFailed);
    assert_eq!(
        error.message,
        "the tenant has no signing secret; set one or remove sign"
    );
    assert!(requests_to(&server).await.is_empty());
}

/// Voice calls abort read tools on barge-in: a dropped trial must not leave the breaker
/// waiting forever for a result.
#[tokio::test]
async fn a_cancelled_trial_frees_the_half_open_slot() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(500))
        .mount(&server)
        .await;
    let effects = effects(true);
    let mut req = request(server.uri());
    req.retry_count = 0;
    for _ in 0..3 {
        effects.perform(TENANT, None, &req).await;
    }
    tokio::time::sleep(Duration::from_millis(250)).await;
    server.reset().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_delay(Duration::from_millis(300)))
        .mount(&server)
        .await;
    let cancelled = tokio::time::timeout(
        Duration::from_millis(50),
        effects.perform(TENANT, None, &req),
    )
    .await;
    assert!(cancelled.is_err(), "the trial should still be running");
    assert_eq!(
        response(effects.perform(TENANT, None, &req).await).status,
        200
    );
    let host = format!("127.0.0.1:{}", server.address().port());
    assert_eq!(effects.breaker_state(TENANT, &host), BreakerState::Closed);
}
