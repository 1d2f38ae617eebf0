/**
 * W3C trace context for invocation requests: when `@opentelemetry/api` is installed (an optional
 * peer dependency) and a span is active, its `traceparent` / `tracestate` go with the request, so
 * the server's spans join the agent's trace.
 */

type OtelApi = typeof import("@opentelemetry/api");

let loaded: Promise<OtelApi | null> | undefined;

function otel(): Promise<OtelApi | null> {
  loaded ??= import("@opentelemetry/api").then(
    (m) => m,
    () => null, // not installed: no trace context to pass
  );
  return loaded;
}

/** The active span's `traceparent` (and `tracestate`), or nothing when there is none. */
export async function traceHeaders(): Promise<Record<string, string>> {
  const api = await otel();
  if (api === null) return {};
  const span = api.trace.getActiveSpan();
  if (span === undefined || !api.isSpanContextValid(span.spanContext())) return {};
  const carrier: Record<string, string> = {};
  // The registered propagator, when the app set one up; else W3C by hand, the format we accept.
  api.propagation.inject(api.context.active(), carrier);
  if (carrier["traceparent"] === undefined) {
    const sc = span.spanContext();
    const flags = (sc.traceFlags & 0xff).toString(16).padStart(2, "0");
    carrier["traceparent"] = `00-${sc.traceId}-${sc.spanId}-${flags}`;
    const state = sc.traceState?.serialize();
    if (state) carrier["tracestate"] = state;
  }
  const out: Record<string, string> = { traceparent: carrier["traceparent"] };
  if (carrier["tracestate"]) out["tracestate"] = carrier["tracestate"];
  return out;
}
