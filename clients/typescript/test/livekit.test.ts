import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { initializeLogger, llm, voice } from "@livekit/agents";
import { Switchboard } from "../src/index.js";
import { SwitchboardLiveKitTools } from "../src/livekit.js";
import type { Hangup, Transfer } from "../src/types.js";
import { type TestServer, startServer } from "./support/server.js";

let server: TestServer;
before(async () => {
  initializeLogger({ pretty: false, level: "warn" });
  server = await startServer();
});
after(async () => {
  await server?.stop();
});

/** Runs a tool the way LiveKit's tool executor does: parsed args, and options with a RunContext. */
async function run(t: llm.FunctionTool<any, unknown, unknown>, callId: string, args: string, abort = new AbortController()) {
  const speech = voice.SpeechHandle.create();
  const fc = new llm.FunctionCall({ callId, name: t.name, args });
  // The adapter reads the speech and the function call; a session is not needed by the tools.
  const ctx = new voice.RunContext<unknown>({} as voice.AgentSession<unknown>, speech, fc);
  const result = await t.execute(JSON.parse(args), { ctx, toolCallId: callId, abortSignal: abort.signal });
  return { result, speech };
}

/** The tools by name. */
const byName = (tools: llm.FunctionTool<any, unknown, unknown>[]) => Object.fromEntries(tools.map((t) => [t.name, t]));

test("llm.tool definitions carry the server's exact JSON schemas", async () => {
  const sb = new Switchboard(server.base, server.key);
  await using call = await sb.startCall({ agent: "assistant" });
  const tools = byName(new SwitchboardLiveKitTools(call).tools());
  assert.deepEqual(Object.keys(tools), ["hang_up", "lookup_order", "save_meal", "to_billing", "transfer_to_sales"]);
  for (const f of call.functions) {
    const t = tools[f.name]!;
    assert.ok(llm.isFunctionTool(t));
    assert.equal(t.name, f.name);
    assert.equal(t.description, f.description);
    assert.deepEqual(t.parameters, f.parameters);
  }
  assert.deepEqual((tools["save_meal"]!.parameters as any).required, ["meal_type", "dishes"]);
  // A voice.Agent takes them as they are.
  const agent = await new SwitchboardLiveKitTools(call).agent();
  assert.deepEqual(Object.keys(agent.toolCtx.functionTools ?? {}).sort(), Object.keys(tools).sort());
});

test("results, the speech id as response id, transfers and hang-ups", async () => {
  const sb = new Switchboard(server.base, server.key);
  await using call = await sb.startCall({});
  const transfers: Transfer[] = [];
  const hangups: Hangup[] = [];
  const tools = byName(new SwitchboardLiveKitTools(call, {
    onTransfer: (_ctx, t) => void transfers.push(t),
    onHangup: (_ctx, h) => void hangups.push(h),
  }).tools());
  const { result, speech } = await run(tools["save_meal"]!, "lk_1", '{"meal_type":"dinner","dishes":["pasta"]}');
  assert.equal(JSON.parse(String(result)).message, "I've logged your dinner!");
  const inv = (await call.record()).invocations[0];
  assert.equal(inv?.["function_call_id"], "lk_1");
  assert.equal(inv?.["response_id"], speech.id);
  assert.equal(JSON.parse(String((await run(tools["transfer_to_sales"]!, "lk_2", "{}")).result)).message, "Transferring you to sales.");
  assert.deepEqual(transfers, [{ type: "transfer", targetUri: "sip:sales@example.com" }]);
  await run(tools["hang_up"]!, "lk_3", "{}");
  assert.deepEqual(hangups, [{ type: "hangup", message: "Goodbye!" }]);
  // A hang-up ended that call; a fresh one for a tools without handlers.
  await using other = await sb.startCall({});
  const bare = byName(new SwitchboardLiveKitTools(other).tools());
  const out = JSON.parse(String((await run(bare["transfer_to_sales"]!, "lk_4", "{}")).result));
  assert.equal(out.error, "call_transfer_failed");
  assert.match(out.message, /no transfer handler/);
});

test("a handoff is LiveKit's own handoff to a voice.Agent with the new agent's tools", async () => {
  const sb = new Switchboard(server.base, server.key);
  await using call = await sb.startCall({});
  const tools = byName(new SwitchboardLiveKitTools(call).tools());
  const { result } = await run(tools["to_billing"]!, "lk_h", "{}");
  const h = result as llm.AgentHandoff;
  assert.ok(h.agent instanceof voice.Agent);
  assert.equal(h.agent.instructions, "You are billing. Take payments.");
  assert.deepEqual(Object.keys(h.agent.toolCtx.functionTools ?? {}), ["pay_bill"]);
  // What the model reads names the agent that now handles the call.
  const said = JSON.parse(String(h.returns));
  assert.match(said.message, /Transferred to agent 'billing'\.$/);
  assert.equal(said.handoff.agent, "billing");
  assert.equal(call.agent, "billing");
});

test("an interrupted speech cancels its running read; the tool still answers, cancelled", async () => {
  const sb = new Switchboard(server.base, server.key);
  await using call = await sb.startCall({});
  const tools = byName(new SwitchboardLiveKitTools(call).tools());
  const abort = new AbortController();
  const pending = run(tools["lookup_order"]!, "lk_slow", '{"order_id":"A1"}', abort);
  setTimeout(() => abort.abort(), 300);
  const out = JSON.parse(String((await pending).result));
  assert.equal(out.ok, false);
  assert.equal(out.error, "cancelled");
});
