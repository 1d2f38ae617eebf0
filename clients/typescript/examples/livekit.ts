import { type JobContext, WorkerOptions, cli, defineAgent, voice } from "@livekit/agents";
import { Switchboard } from "@switchboard/client";
import { SwitchboardLiveKitTools } from "@switchboard/client/livekit";
import { fileURLToPath } from "node:url";

export default defineAgent({
  entry: async (ctx: JobContext) => {
    const sb = new Switchboard(process.env["SWITCHBOARD_URL"]!, process.env["SWITCHBOARD_KEY"]!);
    const call = await sb.startCall({ agent: "assistant", call_id: ctx.room.name! });
    ctx.addShutdownCallback(async () => void (await call.end()));
    const tools = new SwitchboardLiveKitTools(call, {
      onTransfer: async (_run, t) => console.log("REFER the SIP participant to", t.targetUri),
    });
    const session = new voice.AgentSession({ stt: "deepgram/nova-3", llm: "openai/gpt-4.1-mini", tts: "cartesia/sonic-2" });
    await session.start({ agent: await tools.agent(), room: ctx.room });
  },
});

cli.runApp(new WorkerOptions({ agent: fileURLToPath(import.meta.url) }));
