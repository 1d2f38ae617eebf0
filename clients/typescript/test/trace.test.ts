import assert from "node:assert/strict";
import { AsyncLocalStorage } from "node:async_hooks";
import { after, before, test } from "node:test";
import { type Context, type ContextManager, ROOT_CONTEXT, TraceFlags, context, createTraceState, trace } from "@opentelemetry/api";
import { Switchboard } from "../src/index.js";
import { type TestServer, startServer } from "./support/server.js";

/** The smallest context manager (the SDK's is AsyncLocalStorage-based too). */
class Als implements ContextManager {
  readonly #als = new AsyncLocalStorage<Context>();
  active(): Context {
    return this.#als.getStore() ?? ROOT_CONTEXT;
  }
  with<A extends unknown[], F extends (...args: A) => ReturnType<F>>(ctx: Context, fn: F, thisArg?: ThisParameterType<F>, ...args: A): ReturnType<F> {
    return this.#als.run(ctx, () => fn.call(thisArg, ...args));
  }
  bind<T>(_ctx: Context, target: T): T {
    return target;
  }
  enable(): this {
    return this;
  }
  disable(): this {
    return this;
  }
}

let server: TestServer;
before(async () => {
  server = await startServer();
  context.setGlobalContextManager(new Als());
});
after(async () => {
  await server?.stop();
});

test("an invocation carries the active span's traceparent and tracestate; none without a span", async () => {
  const sent: Record<string, string | null>[] = [];
  const recording: typeof fetch = async (input, init) => {
    const h = new Headers(init?.headers);
    sent.push({ url: String(input), traceparent: h.get("traceparent"), tracestate: h.get("tracestate") });
    return fetch(input, init);
  };
  const sb = new Switchboard(server.base, server.key, { fetch: recording });
  const call = await sb.startCall({});
  const span = trace.wrapSpanContext({
    traceId: "4bf92f3577b34da6a3ce929d0e0e4736",
    spanId: "00f067aa0ba902b7",
    traceFlags: TraceFlags.SAMPLED,
    traceState: createTraceState("vendor=abc"),
  });
  const r = await context.with(trace.setSpan(context.active(), span), () =>
    call.invoke("fc_t", "save_meal", { meal_type: "lunch", dishes: ["soup"] }),
  );
  assert.equal(r.ok, true);
  const inv = sent.find((s) => s["url"]?.endsWith("/invocations"));
  assert.equal(inv?.["traceparent"], "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
  assert.equal(inv?.["tracestate"], "vendor=abc");
  await call.invoke("fc_u", "save_meal", { meal_type: "dinner", dishes: ["rice"] });
  assert.equal(sent.at(-1)?.["traceparent"], null);
  await call.end();
});
