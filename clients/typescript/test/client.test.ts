import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { BadRequest, Conflict, NotFound, RateLimited, Switchboard, TransportError, Unauthorized } from "../src/index.js";
import { type TestServer, newId, startServer } from "./support/server.js";

let server: TestServer;
before(async () => {
  server = await startServer();
});
after(async () => {
  await server?.stop();
});

const sb = (opts = {}) => new Switchboard(server.base, server.key, opts);

test("a call starts with its agent's toolset, runs a tool, and ends with its record", async () => {
  const call = await sb().startCall({ agent: "assistant", call_id: newId("ts-call") });
  assert.equal(call.agent, "assistant");
  assert.deepEqual(
    call.functions.map((f) => f.name),
    ["hang_up", "lookup_order", "save_meal", "to_billing", "transfer_to_sales"],
  );
  const r = await call.invoke("fc_1", "save_meal", '{"meal_type": "lunch", "dishes": ["soup"]}');
  assert.equal(r.ok, true);
  assert.equal(JSON.parse(r.output).message, "I've logged your lunch!");
  assert.equal(r.functionCallId, "fc_1");
  // The same function call again answers its first answer, not a second meal.
  const again = await call.invoke("fc_1", "save_meal", '{"meal_type": "lunch", "dishes": ["soup"]}');
  assert.equal(again.replayed, true);
  assert.equal(again.output, r.output);
  const record = await call.end();
  assert.equal(record.status, "ended");
  assert.deepEqual((record.context["workflow"] as any).logged_meals, [{ meal_type: "lunch", dishes: ["soup"], note: null }]);
  assert.equal(record.invocationsTotal, 1);
});

test("bad arguments answer the model (ok false), not an exception", async () => {
  await using call = await sb().startCall({ agent: "assistant" });
  const r = await call.invoke("fc_bad", "save_meal", '{"meal_type": "brunch", "dishes": ["soup"]}');
  assert.equal(r.ok, false);
  assert.equal(r.error, "invalid_arguments");
  assert.equal(JSON.parse(r.output).ok, false);
  assert.match(r.output, /meal_type/);
});

test("errors are typed: unknown call, ended call, bad key, refused body", async () => {
  const client = sb({ retries: 0 });
  await assert.rejects(client.call("no-such-call").record(), (e: unknown) => e instanceof NotFound && e.status === 404);
  const call = await client.startCall({});
  await call.end();
  await assert.rejects(call.invoke("fc_late", "save_meal", "{}"), Conflict);
  await assert.rejects(new Switchboard(server.base, "sb_nobody_x", { retries: 0 }).startCall({}), Unauthorized);
  await assert.rejects(client.startCall({ agent: "no-such-agent" }), (e: unknown) => e instanceof NotFound || e instanceof BadRequest);
  assert.throws(() => new Switchboard("127.0.0.1:1", "k"), /must start with http/);
  assert.throws(() => new Switchboard(server.base, ""), /apiKey is empty/);
  // The key never shows in the client's text.
  assert.equal(String(client), `Switchboard(${server.base})`);
});

test("await using ends the call when the scope is left by an error; withCall too", async () => {
  let id = "";
  await assert.rejects(
    (async () => {
      await using call = await sb().startCall({});
      id = call.id;
      throw new Error("the agent crashed");
    })(),
    /the agent crashed/,
  );
  assert.equal((await sb().call(id).record()).status, "ended");
  await assert.rejects(
    sb().withCall({}, async (call) => {
      id = call.id;
      throw new Error("crashed again");
    }),
    /crashed again/,
  );
  assert.equal((await sb().call(id).record()).status, "ended");
  const out = await sb().withCall({}, async (call) => (id = call.id));
  assert.equal((await sb().call(out).record()).status, "ended");
});

/** A fetch that answers `status` the first `times` times, then passes through; it counts. */
function flaky(status: number, times: number) {
  const seen: string[] = [];
  const f: typeof fetch = async (input, init) => {
    seen.push(`${init?.method} ${String(input)}`);
    if (seen.length <= times) {
      return new Response(JSON.stringify({ error: { code: "busy", message: "try later", details: { retry_after_s: 1 } } }), { status });
    }
    return fetch(input, init);
  };
  return { f, seen };
}

test("safe requests are retried on 503 and 429; a call start is not", async () => {
  const { f, seen } = flaky(503, 2);
  const client = sb({ fetch: f, backoffMs: 1 });
  const call = await client.startCall({}).catch((e: unknown) => e);
  assert.ok(call instanceof Error && call.name === "ServerError", String(call));
  assert.equal(seen.length, 1);
  const started = await sb().startCall({});
  const r = await new Switchboard(server.base, server.key, { fetch: flaky(429, 2).f, backoffMs: 1 })
    .call(started.id)
    .invoke("fc_r", "save_meal", { meal_type: "dinner", dishes: ["rice"] });
  assert.equal(JSON.parse(r.output).message, "I've logged your dinner!");
  const { f: always } = flaky(429, 99);
  const err = await new Switchboard(server.base, server.key, { fetch: always, backoffMs: 1, retries: 1 })
    .call(started.id)
    .record()
    .catch((e: unknown) => e);
  assert.ok(err instanceof RateLimited);
  assert.deepEqual(err.details, { retry_after_s: 1 });
  assert.equal(err.code, "busy");
  await started.end();
});

test("no server: a TransportError naming the URL after the retries", async () => {
  const client = new Switchboard("http://127.0.0.1:9", "sb_x_y", { retries: 1, backoffMs: 1 });
  await assert.rejects(client.call("c").record(), (e: unknown) => e instanceof TransportError && /127\.0\.0\.1:9 after 2 attempt/.test(e.message));
});

test("the server's functions for an agent, strict ones with additionalProperties false", async () => {
  const loose = await sb().functions("assistant");
  const strict = await sb().functions("assistant", true);
  const meal = strict.find((f) => f.name === "save_meal");
  assert.equal(meal?.parameters["additionalProperties"], false);
  assert.deepEqual(meal?.parameters["required"], ["meal_type", "dishes", "note"]);
  assert.notDeepEqual(loose, strict);
});
