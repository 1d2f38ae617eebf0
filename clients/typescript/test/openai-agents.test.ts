import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { RunContext, invokeFunctionTool } from "@openai/agents-core";
import { type FunctionTool, RealtimeAgent } from "@openai/agents-realtime";
import { Switchboard } from "../src/index.js";
import { type ActionEvent, SwitchboardRealtimeTools } from "../src/openai-agents.js";
import type { Handoff, Hangup, Transfer } from "../src/types.js";
import { type TestServer, startServer } from "./support/server.js";

let server: TestServer;
before(async () => {
  server = await startServer();
});
after(async () => {
  await server?.stop();
});

/** Runs a tool the way a RealtimeSession does: `invokeFunctionTool` with the model's call item. */
async function run(t: FunctionTool<any, any, any>, callId: string, args: string): Promise<unknown> {
  return invokeFunctionTool({
    tool: t,
    runContext: new RunContext({ history: [] }),
    input: args,
    details: { toolCall: { type: "function_call", callId, name: t.name, arguments: args } },
  });
}

function byName(agent: RealtimeAgent, name: string): FunctionTool<any, any, any> {
  const t = agent.tools.find((x) => x.type === "function" && x.name === name);
  assert.ok(t && t.type === "function", `no tool ${name}`);
  return t as FunctionTool<any, any, any>;
}

test("the RealtimeAgent has the agent's name, instructions and exact strict schemas", async () => {
  const sb = new Switchboard(server.base, server.key);
  await using call = await sb.startCall({ agent: "assistant" });
  const agent = await new SwitchboardRealtimeTools(call).agent();
  assert.ok(agent instanceof RealtimeAgent);
  assert.equal(agent.name, "assistant");
  assert.equal(agent.instructions, "You are the front desk.");
  assert.deepEqual(
    agent.tools.map((t) => t.name),
    ["hang_up", "lookup_order", "save_meal", "to_billing", "transfer_to_sales"],
  );
  const meal = byName(agent, "save_meal");
  assert.equal(meal.strict, true);
  assert.deepEqual(meal.parameters, {
    type: "object",
    properties: {
      meal_type: { type: "string", enum: ["breakfast", "lunch", "dinner"] },
      dishes: { type: "array", items: { type: "string" } },
      note: { type: ["string", "null"], description: "Anything else the user said" },
    },
    required: ["meal_type", "dishes", "note"],
    additionalProperties: false,
  });
  assert.deepEqual(byName(agent, "hang_up").parameters, { type: "object", properties: {}, required: [], additionalProperties: false });
  // The server's strict toolset, tool for tool.
  const fromServer = await call.functionsNow(true);
  for (const f of fromServer) assert.deepEqual(byName(agent, f.name).parameters, f.parameters);
});

test("a tool's result goes back to the model; the SDK's call id is Switchboard's", async () => {
  const sb = new Switchboard(server.base, server.key);
  await using call = await sb.startCall({});
  const agent = await new SwitchboardRealtimeTools(call).agent();
  const out = await run(byName(agent, "save_meal"), "call_abc", '{"meal_type":"breakfast","dishes":["eggs"],"note":null}');
  assert.equal(JSON.parse(String(out)).message, "I've logged your breakfast!");
  const rec = await call.record();
  assert.equal(rec.invocations[0]?.["function_call_id"], "call_abc");
});

test("transfer and hang-up reach the app's handlers and listeners; without one the model hears it failed", async () => {
  const sb = new Switchboard(server.base, server.key);
  await using call = await sb.startCall({});
  const transfers: ActionEvent<Transfer>[] = [];
  const hangups: ActionEvent<Hangup>[] = [];
  const tools = new SwitchboardRealtimeTools(call, { onTransfer: (e) => void transfers.push(e) });
  tools.on("hangup", (e: ActionEvent<Hangup>) => hangups.push(e));
  const agent = await tools.agent();
  assert.equal(JSON.parse(String(await run(byName(agent, "transfer_to_sales"), "call_t", "{}"))).message, "Transferring you to sales.");
  assert.deepEqual(transfers, [{ action: { type: "transfer", targetUri: "sip:sales@example.com" }, name: "transfer_to_sales", functionCallId: "call_t" }]);
  await run(byName(agent, "hang_up"), "call_h", "{}");
  assert.deepEqual(hangups.map((h) => h.action), [{ type: "hangup", message: "Goodbye!" }]);

  await using other = await sb.startCall({});
  const failing = new SwitchboardRealtimeTools(other, { onTransfer: () => Promise.reject(new Error("line busy")) });
  const out = JSON.parse(String(await run(byName(await failing.agent(), "transfer_to_sales"), "call_f", "{}")));
  assert.equal(out.ok, false);
  assert.equal(out.error, "call_transfer_failed");
  assert.match(out.message, /line busy/);
  const none = JSON.parse(String(await run(byName(await failing.agent(), "hang_up"), "call_n", "{}")));
  assert.equal(none.error, "tool_execution_failed");
  assert.match(none.message, /no hangup handler/);
});

test("a handoff gives the app the new agent's RealtimeAgent, with its tools", async () => {
  const sb = new Switchboard(server.base, server.key);
  await using call = await sb.startCall({});
  const handoffs: [Handoff, RealtimeAgent][] = [];
  const tools = new SwitchboardRealtimeTools(call, { onHandoff: (h, a) => void handoffs.push([h, a]) });
  const said = JSON.parse(String(await run(byName(await tools.agent(), "to_billing"), "call_ho", "{}")));
  // The model reads which agent now handles the call.
  assert.match(said.message, /Transferred to agent 'billing'\.$/);
  assert.deepEqual(said.handoff, { agent: "billing", reason: "billing question" });
  assert.equal(call.agent, "billing");
  assert.equal(handoffs.length, 1);
  const [h, next] = handoffs[0]!;
  assert.equal(h.agent, "billing");
  assert.equal(h.reason, "billing question");
  assert.equal(next.name, "billing");
  assert.equal(next.instructions, "You are billing. Take payments.");
  assert.deepEqual(next.tools.map((t) => t.name), ["pay_bill"]);
  assert.equal(JSON.parse(String(await run(byName(next, "pay_bill"), "call_pay", '{"amount": 12.5}'))).message, "Paid.");
});

test("a server that is away makes the model hear that, not the run fail", async () => {
  const sb = new Switchboard(server.base, server.key);
  await using call = await sb.startCall({});
  const away = new Switchboard("http://127.0.0.1:9", "sb_x_y", { retries: 0 }).call(call.id, "assistant");
  const tools = new SwitchboardRealtimeTools(away).tools(await call.functionsNow(true));
  const meal = tools.find((t) => t.name === "save_meal");
  assert.ok(meal);
  const out = JSON.parse(String(await run(meal, "call_x", '{"meal_type":"lunch","dishes":[],"note":null}')));
  assert.equal(out.ok, false);
  assert.equal(out.error, "tool_execution_failed");
  assert.match(out.message, /Switchboard did not answer/);
});

test("the caller barging in cancels a running read: the tool still answers, cancelled", async () => {
  const sb = new Switchboard(server.base, server.key);
  await using call = await sb.startCall({});
  const tools = new SwitchboardRealtimeTools(call);
  const agent = await tools.agent();
  const pending = run(byName(agent, "lookup_order"), "call_slow", '{"order_id":"A1"}');
  await new Promise((r) => setTimeout(r, 300));
  await tools.cancelPending();
  const out = JSON.parse(String(await pending));
  assert.equal(out.ok, false);
  assert.equal(out.error, "cancelled");
});
