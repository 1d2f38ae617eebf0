//! The `realtime.call.incoming` webhook: the event, its Standard Webhooks signature, and its
//! delivery.

use std::fmt::Write as _;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};
use standardwebhooks::Webhook;

/// How long a delivery may take; OpenAI expects an answer within a few seconds.
const DELIVERY_TIMEOUT: Duration = Duration::from_secs(10);

/// Seconds since the Unix epoch.
pub(crate) fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| {
            i64::try_from(elapsed.as_secs()).unwrap_or(i64::MAX)
        })
}

/// `bytes` random bytes as lowercase hex, for ids.
pub(crate) fn random_hex(bytes: usize) -> String {
    let mut hex = String::with_capacity(bytes * 2);
    for _ in 0..bytes {
        // Writing to a String cannot fail.
        let _ = write!(hex, "{:02x}", fastrand::u8(..));
    }
    hex
}

/// A party as a SIP URI: E.164 numbers and bare users get OpenAI's example host; URIs stay.
pub(crate) fn sip_uri(party: &str) -> String {
    if party.starts_with("sip:") || party.starts_with("sips:") || party.starts_with("tel:") {
        party.to_owned()
    } else {
        format!("sip:{party}@sip.example.com")
    }
}

/// The `realtime.call.incoming` event for `call_id`, with From, To and Call-ID SIP headers.
pub(crate) fn incoming_call_event(call_id: &str, from: &str, to: &str) -> Value {
    let sip_call_id = format!(
        "{}-{}-{}-{}-{}",
        random_hex(4),
        random_hex(2),
        random_hex(2),
        random_hex(2),
        random_hex(6)
    );
    json!({
        "object": "event",
        "id": format!("evt_{}", random_hex(16)),
        "type": "realtime.call.incoming",
        "created_at": now(),
        "data": {
            "call_id": call_id,
            "sip_headers": [
                {"name": "From", "value": sip_uri(from)},
                {"name": "To", "value": sip_uri(to)},
                {"name": "Call-ID", "value": sip_call_id},
            ],
        },
    })
}

/// A fresh webhook id, like the ones OpenAI sends.
pub(crate) fn webhook_id() -> String {
    format!("wh_{}", random_hex(16))
}

/// The Standard Webhooks signature `v1,<base64>` of `body`; the key is the base64 after
/// `whsec_`, or the secret's own bytes when it has no such prefix (or is not valid base64).
pub(crate) fn sign(secret: &str, webhook_id: &str, timestamp: i64, body: &str) -> String {
    let raw = || Webhook::from_bytes(secret.as_bytes().to_vec());
    let webhook = if secret.starts_with("whsec_") {
        Webhook::new(secret).or_else(|_| raw())
    } else {
        raw()
    };
    webhook
        .and_then(|webhook| webhook.sign(webhook_id, timestamp, body.as_bytes()))
        .unwrap_or_default()
}

/// An HTTP client for deliveries; proxies are ignored because targets are local test servers.
pub(crate) fn client() -> Result<reqwest::Client, String> {
    reqwest::Client::builder()
        .no_proxy()
        .timeout(DELIVERY_TIMEOUT)
        // A burst of deliveries would otherwise leave as many idle connections open at the
        // receiver, which a load test would count as the receiver's memory.
        .pool_max_idle_per_host(8)
        .build()
        .map_err(|err| format!("cannot build an HTTP client: {err}"))
}

/// POSTs `body` to `url` signed with `secret`; returns the HTTP status.
pub(crate) async fn post(
    client: &reqwest::Client,
    url: &str,
    secret: &str,
    webhook_id: &str,
    timestamp: i64,
    body: &str,
) -> Result<u16, String> {
    let response = client
        .post(url)
        .header("content-type", "application/json")
        .header("webhook-id", webhook_id)
        .header("webhook-timestamp", timestamp.to_string())
        .header(
            "webhook-signature",
            sign(secret, webhook_id, timestamp, body),
        )
        .body(body.to_owned())
        .send()
        .await
        .map_err(|err| format!("webhook delivery to {url} failed: {}", with_causes(&err)))?;
    Ok(response.status().as_u16())
}

/// `err` and each error beneath it, so a failed delivery says why (a refused connection, a
/// timeout, too many open files) rather than only that the request could not be sent.
fn with_causes(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut cause = err.source();
    while let Some(inner) = cause {
        text.push_str(": ");
        text.push_str(&inner.to_string());
        cause = inner.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parties_become_sip_uris() {
        assert_eq!(sip_uri("+14155550100"), "sip:+14155550100@sip.example.com");
        assert_eq!(sip_uri("sip:bob@example.com"), "sip:bob@example.com");
    }

    #[test]
    fn raw_and_prefixed_secrets_sign_differently_but_deterministically() {
        let a = sign("whsec_c2VjcmV0", "wh_1", 1, "{}");
        assert_eq!(a, sign("whsec_c2VjcmV0", "wh_1", 1, "{}"));
        // "c2VjcmV0" is base64 for "secret": the prefixed form signs with the decoded key.
        assert_eq!(a, sign("secret", "wh_1", 1, "{}"));
        assert!(a.starts_with("v1,"));
        assert_ne!(a, sign("secret", "wh_2", 1, "{}"));
    }

    #[tokio::test]
    async fn a_failed_delivery_says_why_it_failed() {
        // A port that was just free: nothing listens there, so the connection is refused.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .expect("a free port")
            .port();
        let client = client().expect("a client");
        let url = format!("http://127.0.0.1:{port}/webhook");
        let err = post(&client, &url, "secret", "wh_1", 1, "{}")
            .await
            .expect_err("nothing listens");
        assert!(
            err.starts_with(&format!("webhook delivery to {url} failed: ")),
            "{err}"
        );
        assert!(err.to_lowercase().contains("refused"), "{err}");
    }
}
