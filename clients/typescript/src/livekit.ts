/**
 * `@livekit/agents` (Node) adapter: a Switchboard call's active agent's functions as `llm.tool`
 * definitions (raw JSON Schemas, exactly as the server gives them).
 *
 * Each tool forwards LiveKit's tool call id as our `function_call_id` and its speech id as our
 * `response_id`; when the speech is interrupted (the tool's abort signal), the response's tools
 * are cancelled by Switchboard's policy (reads aborted, writes finish and answer for real). A
 * handoff answer becomes LiveKit's own handoff (`llm.handoff`) to a `voice.Agent` with the new
 * agent's instructions and tools. Transfer and hang-up answers go to `onTransfer` / `onHangup`
 * (e.g. the LiveKit server API's SIP transfer and room deletion); a failing or missing handler
 * makes the model hear that it failed.
 */

import { llm, voice } from "@livekit/agents";
import type { Call } from "./client.js";
import { SwitchboardError } from "./errors.js";
import { failed } from "./failed.js";
import { type FunctionDef, type Hangup, type InvocationResult, type Transfer, handedOff, hangupOf, transferOf } from "./types.js";

export type LiveKitActionHandler<A> = (ctx: voice.RunContext<unknown>, action: A) => void | Promise<void>;

export interface LiveKitToolsOptions {
  onTransfer?: LiveKitActionHandler<Transfer>;
  onHangup?: LiveKitActionHandler<Hangup>;
}

type Tool = llm.FunctionTool<any, unknown, unknown>;

/** The tools of a Switchboard call's active agent, for a LiveKit `voice.Agent`. */
export class SwitchboardLiveKitTools {
  constructor(
    readonly call: Call,
    readonly options: LiveKitToolsOptions = {},
  ) {}

  /** One `llm.tool` per function of the call's active agent (`new voice.Agent({ tools })`). */
  tools(functions: readonly FunctionDef[] = this.call.functions): Tool[] {
    return functions.map((f) => this.#tool(f));
  }

  /** The active agent as a `voice.Agent`: its instructions and tools. */
  async agent(): Promise<voice.Agent<unknown>> {
    return new voice.Agent({ instructions: await this.call.instructions(), tools: this.tools(await this.call.functionsNow()) });
  }

  #tool(f: FunctionDef): Tool {
    return llm.tool({
      name: f.name,
      description: f.description,
      parameters: f.parameters,
      execute: async (args: Record<string, unknown>, opts: llm.ToolOptions<unknown>) => this.#invoke(f.name, args, opts),
    });
  }

  async #invoke(name: string, args: Record<string, unknown>, opts: llm.ToolOptions<unknown>): Promise<unknown> {
    const { ctx, toolCallId, abortSignal } = opts;
    const responseId = ctx.speechHandle.id;
    const rawArgs = ctx.functionCall.args || JSON.stringify(args);
    const onAbort = (): void => {
      // Our policy decides: reads are cancelled, writes finish and answer for real.
      this.call.cancelResponse(responseId).catch(() => undefined);
    };
    abortSignal.addEventListener("abort", onAbort, { once: true });
    let result: InvocationResult;
    try {
      result = await this.call.invoke(toolCallId, name, rawArgs, responseId);
    } catch (e) {
      if (e instanceof SwitchboardError) return failed(name, "tool_execution_failed", `Switchboard did not answer: ${e.message}`);
      throw e;
    } finally {
      abortSignal.removeEventListener("abort", onAbort);
    }
    return this.#carryOut(name, result, ctx);
  }

  async #carryOut(name: string, result: InvocationResult, ctx: voice.RunContext<unknown>): Promise<unknown> {
    let output = result.output;
    const transfer = transferOf(result);
    if (transfer !== null) {
      const err = await run(this.options.onTransfer, ctx, transfer, "transfer");
      if (err !== null) output = failed(name, "call_transfer_failed", `The transfer to ${transfer.targetUri} failed (${err}); go on without transferring.`);
    }
    const hangup = hangupOf(result);
    if (hangup !== null) {
      const err = await run(this.options.onHangup, ctx, hangup, "hangup");
      if (err !== null) output = failed(name, "tool_execution_failed", `The hang-up failed (${err}); go on with the call.`);
    }
    if (result.handoff !== null) {
      const next = new voice.Agent({
        instructions: await this.call.instructions(),
        tools: this.tools(await this.call.functionsNow()),
      });
      return llm.handoff({ agent: next, returns: handedOff(output, result.handoff) });
    }
    return output;
  }
}

async function run<A>(
  handler: LiveKitActionHandler<A> | undefined,
  ctx: voice.RunContext<unknown>,
  action: A,
  what: string,
): Promise<string | null> {
  if (handler === undefined) return `no ${what} handler is configured (on${what[0]?.toUpperCase()}${what.slice(1)})`;
  try {
    await handler(ctx, action);
    return null;
  } catch (e) {
    return e instanceof Error ? e.message : String(e);
  }
}
