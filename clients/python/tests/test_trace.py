"""Trace context: an invocation made under an active OpenTelemetry span carries its W3C
`traceparent` / `tracestate`; one made without a span carries none."""

from __future__ import annotations

import httpx
from conftest import Server
from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, TraceState

from switchboard import Switchboard


async def test_invocations_carry_the_active_spans_trace_context(server: Server) -> None:
    sent: list[httpx.Request] = []

    async def record(request: httpx.Request) -> None:
        sent.append(request)

    async with httpx.AsyncClient(event_hooks={"request": [record]}) as http:
        sb = Switchboard(server.base, server.key, http=http)
        async with await sb.start_call() as call:
            span = NonRecordingSpan(
                SpanContext(
                    trace_id=0x4BF92F3577B34DA6A3CE929D0E0E4736,
                    span_id=0x00F067AA0BA902B7,
                    is_remote=False,
                    trace_flags=TraceFlags(TraceFlags.SAMPLED),
                    trace_state=TraceState([("vendor", "abc")]),
                )
            )
            with trace.use_span(span):
                r = await call.invoke("fc_trace", "save_meal", {"meal_type": "lunch", "dishes": ["soup"]})
            assert r.ok
            traced = sent[-1]
            assert traced.url.path.endswith("/invocations")
            assert traced.headers["traceparent"] == "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
            assert traced.headers["tracestate"] == "vendor=abc"
            # Only invocations carry it, and only under a span.
            await call.invoke("fc_plain", "save_meal", {"meal_type": "dinner", "dishes": ["rice"]})
            assert "traceparent" not in sent[-1].headers
            await call.record()
            assert "traceparent" not in sent[-1].headers
