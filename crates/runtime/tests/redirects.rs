//! `api_call` redirects between two loopback servers on different ports, standing in for two
//! hosts: what the tool attached stays with the origin it named.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::{Value, json};
use switchboard_core::effect::{EffectOutcome, HttpRequest, HttpResponse};
use switchboard_core::error::{ErrorCode, ToolError};
use switchboard_runtime::http::{HttpConfig, HttpEffects};
use wiremock::matchers::path;
use wiremock::{Mock, MockServer, Request, ResponseTemplate};

const TENANT: &str = "tenant-a";
const SECRET: &str = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD";

/// The tool's own headers: every one of them is a credential for its origin.
const TOOL_HEADERS: [(&str, &str); 4] = [
    ("Authorization", "Bearer tool-token"),
    ("X-Api-Key", "k-123"),
    ("Cookie", "session=s-1"),
    ("X-Tenant-Signature", "sig-9"),
];

fn effects() -> HttpEffects {
    // Both servers are on loopback, so the guard is off; its own tests are in http.rs.
    HttpEffects::new(HttpConfig {
        allow_private_networks: true,
        ..HttpConfig::default()
    })
    .unwrap()
}

fn request(method: &str, url: String, body: Option<Value>) -> HttpRequest {
    HttpRequest {
        method: method.into(),
        url,
        query: vec![],
        headers: TOOL_HEADERS
            .iter()
            .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
            .collect(),
        body,
        timeout_ms: 2_000,
        retry_count: 0,
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

/// A server that redirects `/start` to `location` with `status`.
async fn redirecting(status: u16, location: &str) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(path("/start"))
        .respond_with(ResponseTemplate::new(status).insert_header("Location", location))
        .mount(&server)
        .await;
    server
}

/// A server that answers `/land` with 200 "landed".
async fn landing() -> MockServer {
    let server = MockServer::start().await;
    Mock::given(path("/land"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!("landed")))
        .mount(&server)
        .await;
    server
}

async fn received(server: &MockServer) -> Vec<Request> {
    server.received_requests().await.unwrap()
}

/// Which of the tool's headers (and the signature and idempotency headers the runtime adds)
/// `request` carried.
fn credentials_in(request: &Request) -> Vec<String> {
    let mut names: Vec<&str> = TOOL_HEADERS.iter().map(|(n, _)| *n).collect();
    names.extend([
        "idempotency-key",
        "webhook-id",
        "webhook-timestamp",
        "webhook-signature",
    ]);
    names
        .into_iter()
        .filter(|n| request.headers.contains_key(*n))
        .map(str::to_owned)
        .collect()
}

#[tokio::test]
async fn a_redirect_to_another_origin_carries_none_of_the_tools_headers() {
    let to = landing().await;
    for status in [301, 302, 303, 307, 308] {
        let from = redirecting(status, &format!("{}/land", to.uri())).await;
        let mut req = request("GET", format!("{}/start", from.uri()), None);
        req.sign = true;
        let resp = response(effects().perform(TENANT, Some(SECRET), &req).await);
        assert_eq!(resp.body, json!("landed"), "{status}");
        // The first hop carried them all.
        let first = &received(&from).await[0];
        assert_eq!(credentials_in(first).len(), 8, "{status}");
    }
    let landed = received(&to).await;
    assert_eq!(landed.len(), 5);
    for request in &landed {
        assert_eq!(credentials_in(request), Vec::<String>::new());
    }
}

#[tokio::test]
async fn a_307_or_308_of_a_body_to_another_origin_is_refused_naming_the_origin() {
    let to = landing().await;
    for status in [307, 308] {
        let from = redirecting(status, &format!("{}/land?token=t-1", to.uri())).await;
        let req = request(
            "POST",
            format!("{}/start", from.uri()),
            Some(json!({"card": "4111"})),
        );
        let error = failure(effects().perform(TENANT, None, &req).await);
        assert_eq!(error.code, ErrorCode::ApiCallFailed);
        let origin = format!("http://127.0.0.1:{}", to.address().port());
        assert!(
            error
                .message
                .contains(&format!("a {status} redirect to {origin}, another origin")),
            "{}",
            error.message
        );
        assert!(!error.message.contains("token"), "{}", error.message);
    }
    assert!(
        received(&to).await.is_empty(),
        "the body reached the other origin"
    );
}

#[tokio::test]
async fn a_303_after_a_post_reaches_the_other_origin_as_a_get_without_body() {
    let to = landing().await;
    let from = redirecting(303, &format!("{}/land", to.uri())).await;
    let req = request(
        "POST",
        format!("{}/start", from.uri()),
        Some(json!({"card": "4111"})),
    );
    let resp = response(effects().perform(TENANT, None, &req).await);
    assert_eq!(resp.body, json!("landed"));
    let landed = &received(&to).await[0];
    assert_eq!(landed.method.as_str(), "GET");
    assert!(landed.body.is_empty());
    assert!(!landed.headers.contains_key("content-type"));
    assert_eq!(credentials_in(landed), Vec::<String>::new());
}

#[tokio::test]
async fn a_same_origin_307_resends_the_body_and_headers() {
    let server = redirecting(307, "/land").await;
    Mock::given(path("/land"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!("landed")))
        .mount(&server)
        .await;
    let req = request(
        "POST",
        format!("{}/start", server.uri()),
        Some(json!({"meal": "lunch"})),
    );
    let resp = response(effects().perform(TENANT, None, &req).await);
    assert_eq!(resp.body, json!("landed"));
    let requests = received(&server).await;
    let second = &requests[1];
    assert_eq!(second.url.path(), "/land");
    assert_eq!(second.method.as_str(), "POST");
    assert_eq!(
        second.body_json::<Value>().unwrap(),
        json!({"meal": "lunch"})
    );
    assert_eq!(credentials_in(second).len(), 5);
}

#[tokio::test]
async fn headers_come_back_when_a_redirect_returns_to_the_tools_origin() {
    let home = MockServer::start().await;
    let away = redirecting(302, &format!("{}/land", home.uri())).await;
    Mock::given(path("/start"))
        .respond_with(
            ResponseTemplate::new(302).insert_header("Location", format!("{}/start", away.uri())),
        )
        .mount(&home)
        .await;
    Mock::given(path("/land"))
        .respond_with(ResponseTemplate::new(200))
        .mount(&home)
        .await;
    let req = request("GET", format!("{}/start", home.uri()), None);
    assert_eq!(
        response(effects().perform(TENANT, None, &req).await).status,
        200
    );
    assert_eq!(
        credentials_in(&received(&away).await[0]),
        Vec::<String>::new()
    );
    let back = &received(&home).await[1];
    assert_eq!(back.url.path(), "/land");
    assert_eq!(credentials_in(back).len(), 5);
}

#[tokio::test]
async fn a_redirect_loop_between_two_origins_ends_with_a_clear_error() {
    let a = MockServer::start().await;
    let b = redirecting(302, &format!("{}/start", a.uri())).await;
    Mock::given(path("/start"))
        .respond_with(
            ResponseTemplate::new(302).insert_header("Location", format!("{}/start", b.uri())),
        )
        .mount(&a)
        .await;
    let mut req = request("GET", format!("{}/start", a.uri()), None);
    req.timeout_ms = 5_000;
    let error = failure(effects().perform(TENANT, None, &req).await);
    assert_eq!(error.code, ErrorCode::ApiCallFailed);
    assert_eq!(
        error.message,
        "127.0.0.1 answered with more than 5 redirects; call the final URL directly"
    );
    let hops = received(&a).await.len() + received(&b).await.len();
    assert_eq!(hops, 6, "the first request and five redirects");
}
