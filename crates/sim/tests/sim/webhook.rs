//! The incoming call webhook: signatures checked with the `standardwebhooks` crate, and a real
//! delivery to a verifying receiver.

use axum::Router;
use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use serde_json::{Value, json};
use standardwebhooks::Webhook;
use switchboard_sim::Simulator;
use tokio::sync::mpsc;

use crate::{accept_body, post as post_rest};

const SECRET: &str = "whsec_c2VjcmV0LWZvci10ZXN0cw==";

fn headers(webhook_id: &str, timestamp: i64, signature: &str) -> reqwest::header::HeaderMap {
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert("webhook-id", webhook_id.parse().unwrap());
    headers.insert("webhook-timestamp", timestamp.to_string().parse().unwrap());
    headers.insert("webhook-signature", signature.parse().unwrap());
    headers
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

#[test]
fn a_signature_verifies_with_standardwebhooks_and_a_tampered_delivery_does_not() {
    let body = Simulator::incoming_call_event("rtc_1", "+14155550100", "+18005551212").to_string();
    let timestamp = now();
    let signature = Simulator::sign(SECRET, "wh_1", timestamp, &body);
    assert!(signature.starts_with("v1,"));
    let webhook = Webhook::new(SECRET).unwrap();
    webhook
        .verify(body.as_bytes(), &headers("wh_1", timestamp, &signature))
        .unwrap();

    let tampered = body.replace("rtc_1", "rtc_2");
    assert!(
        webhook
            .verify(tampered.as_bytes(), &headers("wh_1", timestamp, &signature))
            .is_err()
    );
    assert!(
        webhook
            .verify(body.as_bytes(), &headers("wh_2", timestamp, &signature))
            .is_err()
    );
    let other_secret = Simulator::sign("whsec_b3RoZXI=", "wh_1", timestamp, &body);
    assert!(
        webhook
            .verify(body.as_bytes(), &headers("wh_1", timestamp, &other_secret))
            .is_err()
    );
}

#[test]
fn the_incoming_call_event_has_the_reference_shape() {
    let event = Simulator::incoming_call_event("rtc_1", "+14155550100", "+18005551212");
    assert_eq!(event["object"], "event");
    assert_eq!(event["type"], "realtime.call.incoming");
    assert!(event["id"].as_str().unwrap().starts_with("evt_"));
    assert!(event["created_at"].is_i64());
    assert_eq!(event["data"]["call_id"], "rtc_1");
    let headers = event["data"]["sip_headers"].as_array().unwrap();
    let names: Vec<&str> = headers
        .iter()
        .map(|h| h["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["From", "To", "Call-ID"]);
    assert_eq!(headers[0]["value"], "sip:+14155550100@sip.example.com");
    assert_eq!(headers[1]["value"], "sip:+18005551212@sip.example.com");
    let other = Simulator::incoming_call_event("rtc_1", "+14155550100", "+18005551212");
    assert_ne!(event["id"], other["id"]);
}

/// A receiver that verifies like a real tenant endpoint and hands over what it accepted.
async fn receiver() -> (String, mpsc::UnboundedReceiver<Value>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let app = Router::new().route(
        "/hook",
        post(move |headers: HeaderMap, body: Bytes| {
            let tx = tx.clone();
            async move {
                match Webhook::new(SECRET).unwrap().verify(&body, &headers) {
                    Ok(()) => {
                        tx.send(serde_json::from_slice(&body).unwrap()).unwrap();
                        StatusCode::NO_CONTENT
                    }
                    Err(_) => StatusCode::UNAUTHORIZED,
                }
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, rx)
}

#[tokio::test]
async fn send_incoming_call_delivers_a_verifiable_event_and_registers_the_call() {
    let sim = Simulator::start().await.unwrap();
    let (url, mut received) = receiver().await;
    let status = sim
        .send_incoming_call(&url, SECRET, "rtc_1", "+14155550100", "+18005551212")
        .await
        .unwrap();
    assert_eq!(status, 204);
    let event = received.recv().await.unwrap();
    assert_eq!(event["data"]["call_id"], "rtc_1");
    assert_eq!(
        post_rest(&sim, "rtc_1", "accept", Some(&accept_body()))
            .await
            .0,
        200
    );

    // Stale and forged deliveries, sent as a test would to check a receiver refuses them.
    let body = json!({"object": "event"}).to_string();
    let stale = Simulator::post_webhook(&url, SECRET, "wh_old", now() - 600, &body)
        .await
        .unwrap();
    assert_eq!(stale, 401);
    let forged = Simulator::post_webhook(&url, "whsec_b3RoZXI=", "wh_x", now(), &body)
        .await
        .unwrap();
    assert_eq!(forged, 401);
    assert!(
        Simulator::post_webhook("http://127.0.0.1:9/none", SECRET, "wh_y", now(), &body)
            .await
            .is_err()
    );
}
