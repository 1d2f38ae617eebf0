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
        "webhook-timestamp must be the send time in whole seconds since 1970 (a positive integer, at most 19 digits)"
    )]
    BadTimestamp,
    #[error(
        "no webhook-signature entry matches for this webhook URL; check the tenant id in the URL and that the tenant's `openai_webhook_secret` is the project's webhook secret"
    )]
    BadSignature,
    #[error("the body is not UTF-8 text")]
    BadPayload,
}

/// Verifies a delivery: `secret` is the webhook secret (`whsec_<base64>`, or raw bytes when it is
/// not base64), the signature covers `{webhook-id}.{webhook-timestamp}.{body}`, timestamps more
/// than 300 s away either way are refused, and signatures are compared in constant time.
pub fn verify(secret: &str, headers: &HeaderMap, body: &[u8]) -> Result<(), VerifyError> {
    precheck(headers, unix_now())?;
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

/// How far a delivery's timestamp may be from this server's clock, either way, in seconds.
pub const TOLERANCE_S: i64 = 300;

/// The longest `webhook-timestamp` read: 19 digits hold every positive `i64`.
const MAX_TIMESTAMP_DIGITS: usize = 19;

/// This server's clock, in whole seconds since 1970 (0 before it, which refuses everything).
pub fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .ok()
        .and_then(|d| i64::try_from(d.as_secs()).ok())
        .unwrap_or(0)
}

/// What can be checked before any secret is known: the three headers are there, and the
/// timestamp is a positive integer within [`TOLERANCE_S`] of `now` (checked arithmetic, so no
/// value can wrap around into the window). The signature library is only handed timestamps
/// that pass.
pub fn precheck(headers: &HeaderMap, now: i64) -> Result<(), VerifyError> {
    let header = |name: &'static str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .filter(|v| !v.is_empty())
            .ok_or(VerifyError::MissingHeader(name))
    };
    header("webhook-id")?;
    header("webhook-signature")?;
    let ts = header("webhook-timestamp")?;
    if ts.len() > MAX_TIMESTAMP_DIGITS || !ts.bytes().all(|b| b.is_ascii_digit()) {
        return Err(VerifyError::BadTimestamp);
    }
    let ts: i64 = ts.parse().map_err(|_| VerifyError::BadTimestamp)?;
    if ts <= 0 {
        return Err(VerifyError::BadTimestamp);
    }
    match now.checked_sub(ts).and_then(i64::checked_abs) {
        Some(skew) if skew <= TOLERANCE_S => Ok(()),
        _ => Err(VerifyError::Stale),
    }
}

/// The event envelope; `realtime.call.incoming`, `live.transport.incoming` and
/// `live.call.incoming` are acted on.
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
struct LiveData {
    session_id: String,
    #[serde(default)]
    sip_headers: Vec<SipHeader>,
    /// `sip` for a phone call; absent in the deprecated `live.call.incoming`.
    #[serde(default, rename = "type")]
    kind: Option<String>,
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
        Ok(IncomingCall::from_headers(d.call_id, d.sip_headers))
    }

    /// Reads the `data` of a GPT-Live `live.transport.incoming` (or the deprecated
    /// `live.call.incoming`, which has no `type`) event: the session id is the call's id for
    /// every control request and the sideband. A transport other than `sip` is refused.
    pub fn parse_live(kind: &str, data: &serde_json::Value) -> Result<IncomingCall, String> {
        let d = LiveData::deserialize(data).map_err(|e| format!("`data` of {kind}: {e}"))?;
        if d.session_id.is_empty() || d.session_id.len() > 256 {
            return Err(format!("`data.session_id` of {kind} is empty or too long"));
        }
        if let Some(t) = d.kind.as_deref().filter(|t| *t != "sip") {
            return Err(format!(
                "`data.type` of {kind} is `{t}`; only `sip` calls are answered here"
            ));
        }
        Ok(IncomingCall::from_headers(d.session_id, d.sip_headers))
    }

    fn from_headers(call_id: String, sip_headers: Vec<SipHeader>) -> IncomingCall {
        let header = |name: &str| {
            sip_headers
                .iter()
                .find(|h| h.name.eq_ignore_ascii_case(name))
                .and_then(|h| sip_user(&h.value))
        };
        IncomingCall {
            from: header("From"),
            to: header("To"),
            call_id,
            sip_headers,
        }
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
    fn timestamps_outside_a_sane_range_are_refused_before_the_signature() {
        let now = 1_800_000_000;
        let headers = |ts: &str| {
            let mut h = HeaderMap::new();
            h.insert("webhook-id", "wh_1".parse().unwrap());
            h.insert("webhook-signature", "v1,abc".parse().unwrap());
            h.insert("webhook-timestamp", ts.parse().unwrap());
            h
        };
        for ts in [
            "-9223372036854775808",
            "-1",
            "0",
            "+1800000000",
            " 1800000000",
            "1800000000.5",
            "1e9",
            "99999999999999999999",
            "",
        ] {
            let err = precheck(&headers(ts), now).unwrap_err();
            assert!(
                matches!(
                    err,
                    VerifyError::BadTimestamp | VerifyError::MissingHeader(_)
                ),
                "{ts:?}: {err:?}"
            );
        }
        for ts in ["9223372036854775807", "1", "1799999699", "1800000301"] {
            assert_eq!(precheck(&headers(ts), now), Err(VerifyError::Stale), "{ts}");
        }
        for ts in ["1799999700", "1800000000", "1800000300"] {
            assert_eq!(precheck(&headers(ts), now), Ok(()), "{ts}");
        }
        assert_eq!(
            precheck(&headers("1"), i64::MIN),
            Err(VerifyError::Stale),
            "no overflow on a broken clock either"
        );
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

    #[test]
    fn parses_both_live_events_and_refuses_other_transports() {
        let headers =
            serde_json::json!([{"name": "To", "value": "sip:+18005551212@sip.example.com"}]);
        let data =
            serde_json::json!({"session_id": "live_1", "type": "sip", "sip_headers": headers});
        let c = IncomingCall::parse_live("live.transport.incoming", &data).unwrap();
        assert_eq!(
            (c.call_id.as_str(), c.to.as_deref()),
            ("live_1", Some("+18005551212"))
        );
        let old = serde_json::json!({"session_id": "live_2", "sip_headers": headers});
        assert_eq!(
            IncomingCall::parse_live("live.call.incoming", &old)
                .unwrap()
                .call_id,
            "live_2"
        );
        let webrtc =
            serde_json::json!({"session_id": "live_3", "type": "webrtc", "sip_headers": []});
        let e = IncomingCall::parse_live("live.transport.incoming", &webrtc).unwrap_err();
        assert!(e.contains("only `sip`"), "{e}");
        assert!(
            IncomingCall::parse_live(
                "live.transport.incoming",
                &serde_json::json!({"session_id": ""})
            )
            .is_err()
        );
    }
}
