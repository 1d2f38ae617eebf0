import { RealtimeSession } from "@openai/agents-realtime";
import { Switchboard } from "@switchboard/client";
import { SwitchboardRealtimeTools } from "@switchboard/client/openai-agents";

const sb = new Switchboard(process.env["SWITCHBOARD_URL"]!, process.env["SWITCHBOARD_KEY"]!);
await using call = await sb.startCall({ agent: "assistant", user: { id: "u_42" } });
const tools = new SwitchboardRealtimeTools(call, {
  onTransfer: ({ action }) => console.log("transfer the caller to", action.targetUri),
  onHangup: ({ action }) => console.log("say", action.message, "then hang up"),
});
const session = new RealtimeSession(await tools.agent(), { transport: "websocket" });
tools.attach(session); // barge-in cancels running tools; a handoff swaps the agent
await session.connect({ apiKey: process.env["OPENAI_API_KEY"]! });
