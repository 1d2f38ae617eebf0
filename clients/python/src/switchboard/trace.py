"""W3C trace context for invocation requests: when `opentelemetry` is importable and a span is
active, its `traceparent` / `tracestate` go with the request, so the server's spans join the
agent's trace. Without the package (an optional dependency) nothing is sent."""

from __future__ import annotations

try:
    from opentelemetry import propagate, trace
except ImportError:  # pragma: no cover (the package is optional)
    propagate = None  # type: ignore[assignment]
    trace = None  # type: ignore[assignment]


def trace_headers() -> dict[str, str]:
    """The active span's `traceparent` (and `tracestate`); empty when there is none."""
    if trace is None or propagate is None:
        return {}
    span_context = trace.get_current_span().get_span_context()
    if not span_context.is_valid:
        return {}
    carrier: dict[str, str] = {}
    # The configured propagator (W3C trace context by default); by hand when it writes no W3C.
    propagate.inject(carrier)
    if "traceparent" not in carrier:
        carrier["traceparent"] = (
            f"00-{span_context.trace_id:032x}-{span_context.span_id:016x}-{int(span_context.trace_flags):02x}"
        )
        state = span_context.trace_state.to_header() if span_context.trace_state else ""
        if state:
            carrier["tracestate"] = state
    return {k: carrier[k] for k in ("traceparent", "tracestate") if carrier.get(k)}
