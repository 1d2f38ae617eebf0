//! Properties of what the door reads from the internet, for machines where the fuzz targets
//! (`fuzz/`, nightly) cannot run: no webhook delivery and no server event panics the reader.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use http::{HeaderMap, HeaderName, HeaderValue};
use proptest::prelude::*;
use switchboard_realtime::events::ServerEvent;
use switchboard_realtime::webhook::{IncomingCall, WebhookEvent, sip_user, verify};

const SECRET: &str = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD";

fn header_name() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        "webhook-id",
        "webhook-timestamp",
        "webhook-signature",
        "content-type",
        "svix-id",
    ])
}

fn header_value() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..64),
        "v1,[A-Za-z0-9+/=]{0,60}( v1,[A-Za-z0-9+/=]{0,8})?".prop_map(String::into_bytes),
        "-?[0-9]{0,20}".prop_map(String::into_bytes),
    ]
}

fn body() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..256),
        r#"\{"type":"realtime.call.incoming","data":\{"call_id":"[a-z]{0,4}","sip_headers":\[\{"name":"(To|From)","value":"[<>"a-z:+0-9@;=. ]{0,40}"\}\]\}\}"#
            .prop_map(String::into_bytes),
    ]
}

proptest! {
    #[test]
    fn a_delivery_is_verified_or_refused_never_a_panic(
        headers in prop::collection::vec((header_name(), header_value()), 0..6),
        body in body(),
    ) {
        let mut map = HeaderMap::new();
        for (name, value) in headers {
            if let Ok(value) = HeaderValue::from_bytes(&value) {
                map.append(HeaderName::from_static(name), value);
            }
        }
        let _ = verify(SECRET, &map, &body);
        let _ = verify("a raw secret", &map, &body);
        if let Ok(event) = serde_json::from_slice::<WebhookEvent>(&body)
            && let Ok(call) = IncomingCall::parse(&event.data)
        {
            for header in &call.sip_headers {
                let _ = sip_user(&header.value);
            }
        }
    }

    #[test]
    fn sip_values_are_read_or_refused(value in r#"[<>"a-zA-Z:+0-9@;=. \u{e9}\u{1F600}]{0,48}"#) {
        if let Some(user) = sip_user(&value) {
            prop_assert!(!user.is_empty() && user.len() <= 64);
        }
    }

    #[test]
    fn server_events_are_read_or_refused(
        text in prop_oneof![
            any::<String>(),
            r#"\{"type":"[a-z._]{0,30}"(,"(response|item|error)":(null|1|"x"|\{"id":"r","status":\[\],"output":\{\}\}))?\}"#,
        ]
    ) {
        let _ = ServerEvent::parse(&text);
    }
}
