//! The `realtime.call.incoming` webhook: Standard Webhooks verification and the event itself.

use http::HeaderMap;
use serde::Deserialize;
use standardwebhooks::{Webhook, WebhookError};

/// Why a delivery was refused. Each says what was wrong so an operator can fix the sender.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    #[error(
        "the `{0}` header is missing or unreadable; OpenAI sends webhook-id, webhook-timestamp and webhook-signature"
    )]
    MissingHeader(&'static str),
    #[error(
        "webhook-timestamp is more than 300 s from this server's clock; check the clocks, or this is a replay"
    )]
    Stale,
    #[error(
        "no webhook-signature entry matches; check that the tenant's `openai_webhook_secret` is the project's webhook secret"
    )]
    BadSignature,
    #[error("the body is not UTF-8 text")]
    BadPayload,
}

/// Verifies a delivery: `secret` is the webhook secret (`whsec_<base64>`, or raw bytes when it is
/// not base64), the signature covers `{webhook-id}.{webhook-timestamp}.{body}`, timestamps more
/// than 300 s away either way are refused, and signatures are compared in constant time.
pub fn verify(secret: &str, headers: &HeaderMap, body: &[u8]) -> Result<(), VerifyError> {
    let key = Webhook::new(secret).or_else(|_| Webhook::from_bytes(secret.as_bytes().to_vec()));
    let key = key.map_err(|_| VerifyError::BadSignature)?;
    key.verify(body, headers).map_err(|e| match e {
        WebhookError::MissingHeader(h) | WebhookError::InvalidHeader(h) => {
            VerifyError::MissingHeader(match h {
                "id" => "webhook-id",
                "timestamp" => "webhook-timestamp",
                _ => "webhook-signature",
            })
        }
        WebhookError::InvalidTimestamp => VerifyError::MissingHeader("webhook-timestamp"),
        WebhookError::TimestampTooOldError | WebhookError::FutureTimestampError => {
            VerifyError::Stale
        }
        WebhookError::InvalidPayload => VerifyError::BadPayload,
        _ => VerifyError::BadSignature,
    })
}

/// The event envelope; only `realtime.call.incoming` is acted on.
#[derive(Debug, Clone, Deserialize)]
pub struct WebhookEvent {
    #[serde(default)]
    pub id: String,
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub data: serde_json::Value,
}

/// One SIP header as OpenAI forwards it; order and repeats are kept.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct SipHeader {
    pub name: String,
    pub value: String,
}

/// An incoming call: its id and what its SIP headers say about who calls whom.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IncomingCall {
    pub call_id: String,
    pub sip_headers: Vec<SipHeader>,
    /// The caller, as a number (`+14155550100`) or SIP user when one can be read.
    pub from: Option<String>,
    /// The number called: what routes the call to an agent.
    pub to: Option<String>,
}

#[derive(Deserialize)]
struct IncomingData {
    call_id: String,
    #[serde(default)]
    sip_headers: Vec<SipHeader>,
}

impl IncomingCall {
    /// Reads the `data` of a `realtime.call.incoming` event; unknown fields are ignored.
    pub fn parse(data: &serde_json::Value) -> Result<IncomingCall, String> {
        let d = IncomingData::deserialize(data)
            .map_err(|e| format!("`data` of realtime.call.incoming: {e}"))?;
        if d.call_id.is_empty() || d.call_id.len() > 256 {
            return Err("`data.call_id` is empty or too long".into());
        }
        let header = |name: &str| {
            d.sip_headers
                .iter()
                .find(|h| h.name.eq_ignore_ascii_case(name))
                .and_then(|h| sip_user(&h.value))
        };
        Ok(IncomingCall {
            from: header("From"),
            to: header("To"),
            call_id: d.call_id,
            sip_headers: d.sip_headers,
        })
    }
}

/// The user part of a SIP `From`/`To` value: `"Ann" <sip:+14155550100@host>;tag=x` →
/// `+14155550100`; `tel:+1415…` → `+1415…`. Header values are untrusted: anything odd gives
/// `None` rather than a guess.
pub fn sip_user(value: &str) -> Option<String> {
    let v = value.trim();
    // Inside angle brackets when there is a display name or parameters.
    let uri = match (v.find('<'), v.rfind('>')) {
        (Some(a), Some(b)) if a < b => &v[a + 1..b],
        _ => v.split(';').next().unwrap_or(v),
    };
    let rest = uri
        .strip_prefix("sips:")
        .or_else(|| uri.strip_prefix("sip:"))
        .or_else(|| uri.strip_prefix("tel:"))?;
    let user = rest.split(['@', ';', '?']).next()?.trim();
    let ok = !user.is_empty()
        && user.len() <= 64
        && user
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.' | '_' | '*' | '#'));
    ok.then(|| user.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_user_part_of_sip_values() {
        let cases = [
            ("sip:+142555512112@sip.example.com", Some("+142555512112")),
            (
                "\"Ann\" <sip:+14155550100@host;user=phone>;tag=abc",
                Some("+14155550100"),
            ),
            ("<sips:alice@example.com>", Some("alice")),
            ("tel:+18005551212", Some("+18005551212")),
            ("sip:+1800;x=1", Some("+1800")),
            ("http://evil", None),
            ("sip:@host", None),
            ("sip:a b@host", None),
            ("", None),
        ];
        for (input, want) in cases {
            assert_eq!(sip_user(input).as_deref(), want, "{input}");
        }
    }

    #[test]
    fn parses_the_reference_event_and_ignores_unknown_fields() {
        let data = serde_json::json!({"call_id": "rtc_1", "sip_media_security": "srtp",
            "sip_headers": [{"name": "From", "value": "sip:+142555512112@sip.example.com"},
                            {"name": "To", "value": "sip:+18005551212@sip.example.com"},
                            {"name": "Call-ID", "value": "x"}]});
        let c = IncomingCall::parse(&data).unwrap();
        assert_eq!(c.call_id, "rtc_1");
        assert_eq!(c.from.as_deref(), Some("+142555512112"));
        assert_eq!(c.to.as_deref(), Some("+18005551212"));
        assert_eq!(c.sip_headers.len(), 3);
        assert!(IncomingCall::parse(&serde_json::json!({"sip_headers": []})).is_err());
    }
}
