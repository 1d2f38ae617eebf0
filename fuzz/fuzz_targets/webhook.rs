//! A webhook delivery from anyone on the internet: header lines (`name: value`) up to an empty
//! line, then the body. Verification refuses or accepts, never panics; the event and its SIP
//! headers are read the same way whatever they hold.
#![no_main]

use http::{HeaderMap, HeaderName, HeaderValue};
use libfuzzer_sys::fuzz_target;

// The realtime crate's own source file, compiled here without the rest of that crate.
#[path = "../../crates/realtime/src/webhook.rs"]
#[allow(dead_code)]
mod webhook;

use webhook::{IncomingCall, WebhookEvent, sip_user, verify};

const SECRET: &str = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD";

fuzz_target!(|data: &[u8]| {
    let split = data.windows(2).position(|w| w == b"\n\n");
    let (head, body) = match split {
        Some(at) => (&data[..at], &data[at + 2..]),
        None => (data, &[][..]),
    };
    let mut headers = HeaderMap::new();
    for line in head.split(|&b| b == b'\n') {
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            continue;
        };
        let value = line[colon + 1..].trim_ascii();
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(&line[..colon]),
            HeaderValue::from_bytes(value),
        ) {
            headers.append(name, value);
        }
    }
    let _ = verify(SECRET, &headers, body);
    // A raw (non-base64) secret takes the other path through the key setup.
    let _ = verify("not base64 at all", &headers, body);
    if let Ok(event) = serde_json::from_slice::<WebhookEvent>(body) {
        // The Realtime event's data, and GPT-Live's (both event names).
        let calls = [
            IncomingCall::parse(&event.data),
            IncomingCall::parse_live(&event.kind, &event.data),
        ];
        for call in calls.into_iter().flatten() {
            for header in &call.sip_headers {
                let _ = sip_user(&header.value);
            }
        }
    }
    if let Ok(text) = std::str::from_utf8(body) {
        let _ = sip_user(text);
    }
});
