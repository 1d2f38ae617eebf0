//! The W3C Trace Context a door receives (`traceparent`, `tracestate`), read strictly, and
//! the headers a request to an upstream carries.
//!
//! A header that is not exactly what the W3C recommendation allows is ignored, never an
//! error: the call goes on, its spans start a trace of their own.

use opentelemetry::trace::{SpanContext, SpanId, TraceFlags, TraceId, TraceState};

/// Longest `tracestate` kept (the W3C recommendation asks receivers to pass on at least 512
/// bytes); a longer one is dropped, the `traceparent` kept.
pub const MAX_TRACESTATE_BYTES: usize = 512;

/// A remote caller's span, read from its `traceparent` (and `tracestate`): the parent of the
/// spans Switchboard makes for its request.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceParent(SpanContext);

impl TraceParent {
    /// The caller's span, or `None` when `traceparent` is not a valid header: wrong length,
    /// version `ff`, upper-case or non-hex digits, an all-zero trace or parent id. A
    /// `tracestate` that is too long or malformed is dropped alone.
    pub fn parse(traceparent: &str, tracestate: Option<&str>) -> Option<TraceParent> {
        let (trace_id, span_id, flags) = read_traceparent(traceparent)?;
        let state = tracestate
            .map(|s| s.trim_matches([' ', '\t']))
            .filter(|s| !s.is_empty() && s.len() <= MAX_TRACESTATE_BYTES)
            .filter(|s| s.bytes().all(|b| (0x20..0x7f).contains(&b)))
            .and_then(|s| s.parse::<TraceState>().ok())
            .unwrap_or_default();
        Some(TraceParent(SpanContext::new(
            trace_id, span_id, flags, true, state,
        )))
    }

    /// The caller's span as OpenTelemetry knows it (remote).
    pub fn span_context(&self) -> &SpanContext {
        &self.0
    }
}

/// `(trace id, parent id, flags)` of a `traceparent`, or `None` when it is not valid.
fn read_traceparent(header: &str) -> Option<(TraceId, SpanId, TraceFlags)> {
    let h = header.trim_matches([' ', '\t']);
    let b = h.as_bytes();
    if b.len() < 55 || b[2] != b'-' || b[35] != b'-' || b[52] != b'-' {
        return None;
    }
    let version = lower_hex(&h[0..2])?;
    match version {
        "ff" => return None,
        // Version 00 has exactly four fields; a later version may append more after a dash.
        "00" if b.len() != 55 => return None,
        _ if b.len() > 55 && b[55] != b'-' => return None,
        _ => {}
    }
    let trace_id = TraceId::from_hex(lower_hex(&h[3..35])?).ok()?;
    let span_id = SpanId::from_hex(lower_hex(&h[36..52])?).ok()?;
    let flags = u8::from_str_radix(lower_hex(&h[53..55])?, 16).ok()?;
    if trace_id == TraceId::INVALID || span_id == SpanId::INVALID {
        return None;
    }
    // Only the sampled bit has a meaning we act on.
    Some((
        trace_id,
        span_id,
        TraceFlags::new(flags & TraceFlags::SAMPLED.to_u8()),
    ))
}

/// `s` when every byte is a lower-case hex digit (as the recommendation requires).
fn lower_hex(s: &str) -> Option<&str> {
    s.bytes()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        .then_some(s)
}

/// The `traceparent` and `tracestate` (when not empty) that carry `cx` to an upstream.
pub fn headers_of(cx: &SpanContext) -> Option<(String, Option<String>)> {
    if !cx.is_valid() {
        return None;
    }
    let traceparent = format!(
        "00-{}-{}-{:02x}",
        cx.trace_id(),
        cx.span_id(),
        cx.trace_flags().to_u8()
    );
    let state = cx.trace_state().header();
    Some((traceparent, (!state.is_empty()).then_some(state)))
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn reads_a_valid_header_and_its_state() {
        let p = TraceParent::parse(GOOD, Some("congo=t61rcWkgMzE, rojo=00f067aa0ba902b7")).unwrap();
        let cx = p.span_context();
        assert_eq!(
            cx.trace_id().to_string(),
            "4bf92f3577b34da6a3ce929d0e0e4736"
        );
        assert_eq!(cx.span_id().to_string(), "00f067aa0ba902b7");
        assert!(cx.is_sampled() && cx.is_remote());
        assert_eq!(cx.trace_state().get("rojo"), Some("00f067aa0ba902b7"));
        let (tp, ts) = headers_of(cx).unwrap();
        assert_eq!(tp, GOOD);
        assert_eq!(
            ts.as_deref(),
            Some("congo=t61rcWkgMzE,rojo=00f067aa0ba902b7")
        );
    }

    #[test]
    fn ignores_every_malformed_header() {
        for bad in [
            "",
            "garbage",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902bz-01",
            "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "0x-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g",
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-é1",
        ] {
            assert_eq!(TraceParent::parse(bad, None), None, "{bad:?}");
        }
    }

    #[test]
    fn a_later_version_may_carry_more_fields() {
        let later = "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00-what-comes";
        let p = TraceParent::parse(later, None).unwrap();
        assert!(!p.span_context().is_sampled());
    }

    #[test]
    fn a_bad_tracestate_is_dropped_alone() {
        let long = format!("k={}", "v".repeat(MAX_TRACESTATE_BYTES));
        for state in ["no equals sign", "UPPER=1", long.as_str(), "k=v\u{7}"] {
            let p = TraceParent::parse(GOOD, Some(state)).unwrap();
            assert_eq!(p.span_context().trace_state().header(), "", "{state:?}");
        }
    }
}
