/**
 * `@openai/agents-realtime` adapter: a Switchboard call's active agent as a `RealtimeAgent`
 * whose tools are the agent's functions, made with the SDK's own `tool()` (strict JSON schemas,
 * as the server's strict toolset has them: every property required, `additionalProperties:
 * false`).
 *
 * Each tool forwards the SDK's call id as our `function_call_id` (and `response_id`) and the
 * model's arguments text as it came; the answer's `output` goes back to the model. A handoff
 * answer is Switchboard's: the call's active agent changed on the server, so `attach`ed sessions
 * get the new agent (`session.updateAgent`) and `handoff` listeners hear of it. Transfer and
 * hang-up answers go to the `transfer` / `hangup` listeners (the SDK has no telephony of its own:
 * e.g. OpenAI's SIP `refer` and `hangup` endpoints carry them out); a failing or missing
 * listener makes the model hear that it failed.
 */

import { EventEmitter } from "node:events";
import {
  type FunctionTool,
  RealtimeAgent,
  type RealtimeContextData,
  type RealtimeSession,
  tool,
} from "@openai/agents-realtime";
import type { Call } from "./client.js";
import { SwitchboardError } from "./errors.js";
import { failed } from "./failed.js";
import { type FunctionDef, type Hangup, type Handoff, type InvocationResult, type Transfer, handedOff, hangupOf, transferOf } from "./types.js";

/** What a tool answered that the app must carry out, with the function call it came from. */
export interface ActionEvent<A> {
  readonly action: A;
  readonly name: string;
  readonly functionCallId: string;
}

/** Listener of a transfer or hang-up; its rejection tells the model the action failed. */
export type ActionHandler<A> = (event: ActionEvent<A>) => void | Promise<void>;

export interface RealtimeToolsOptions {
  onTransfer?: ActionHandler<Transfer>;
  onHangup?: ActionHandler<Hangup>;
  /** Called after a handoff with the new agent's `RealtimeAgent` (also on `attach`ed sessions). */
  onHandoff?: (handoff: Handoff, agent: RealtimeAgent) => void | Promise<void>;
}


/** The tools of a Switchboard call's active agent, for `@openai/agents-realtime`. */
export class SwitchboardRealtimeTools extends EventEmitter {
  readonly #pending = new Set<string>();
  #session: RealtimeSession | null = null;

  constructor(
    readonly call: Call,
    readonly options: RealtimeToolsOptions = {},
  ) {
    super();
  }

  /** The active agent as a `RealtimeAgent`: its name, instructions and (strict) tools. */
  async agent(): Promise<RealtimeAgent> {
    const [instructions, functions] = await Promise.all([this.call.instructions(), this.call.functionsNow(true)]);
    return new RealtimeAgent({ name: this.call.agent, instructions, tools: this.tools(functions) });
  }

  /** One SDK function tool per function (strict schemas: fetch them with `functionsNow(true)`). */
  tools(functions: readonly FunctionDef[]): FunctionTool<RealtimeContextData<unknown>, any, string>[] {
    return functions.map((f) => this.#tool(f));
  }

  #tool(f: FunctionDef): FunctionTool<RealtimeContextData<unknown>, any, string> {
    return tool({
      name: f.name,
      description: f.description,
      // The server's strict toolset has the shape the SDK's strict type names.
      parameters: f.parameters as { type: "object"; properties: Record<string, any>; required: string[]; additionalProperties: false },
      strict: true,
      execute: async (_input: unknown, _ctx, details) => {
        const fc = details?.toolCall;
        return this.#invoke(f.name, fc?.callId ?? `sb-${crypto.randomUUID()}`, fc?.arguments ?? "{}");
      },
    });
  }

  async #invoke(name: string, fc: string, args: string): Promise<string> {
    this.#pending.add(fc);
    let result: InvocationResult;
    try {
      result = await this.call.invoke(fc, name, args, fc);
    } catch (e) {
      if (e instanceof SwitchboardError) return failed(name, "tool_execution_failed", `Switchboard did not answer: ${e.message}`);
      throw e;
    } finally {
      this.#pending.delete(fc);
    }
    return this.#carryOut(name, fc, result);
  }

  async #carryOut(name: string, fc: string, result: InvocationResult): Promise<string> {
    let output = result.output;
    if (result.handoff !== null) {
      output = handedOff(output, result.handoff);
      const next = new RealtimeAgent({
        name: result.handoff.agent,
        instructions: await this.call.instructions(),
        tools: this.tools(await this.call.functionsNow(true)),
      });
      this.emit("handoff", result.handoff, next);
      await this.options.onHandoff?.(result.handoff, next);
      if (this.#session !== null) await this.#session.updateAgent(next);
    }
    const transfer = transferOf(result);
    if (transfer !== null) {
      const err = await this.#dispatch("transfer", this.options.onTransfer, { action: transfer, name, functionCallId: fc });
      if (err !== null) output = failed(name, "call_transfer_failed", `The transfer to ${transfer.targetUri} failed (${err}); go on without transferring.`);
    }
    const hangup = hangupOf(result);
    if (hangup !== null) {
      const err = await this.#dispatch("hangup", this.options.onHangup, { action: hangup, name, functionCallId: fc });
      if (err !== null) output = failed(name, "tool_execution_failed", `The hang-up failed (${err}); go on with the call.`);
    }
    return output;
  }

  /** Emits the event and runs the handler; the failure to report, or null. */
  async #dispatch<A>(what: string, handler: ActionHandler<A> | undefined, event: ActionEvent<A>): Promise<string | null> {
    const listened = this.emit(what, event);
    if (handler === undefined) {
      return listened ? null : `no ${what} handler is configured (on${what[0]?.toUpperCase()}${what.slice(1)} or a "${what}" listener)`;
    }
    try {
      await handler(event);
      return null;
    } catch (e) {
      return e instanceof Error ? e.message : String(e);
    }
  }

  /**
   * Ties these tools to a `RealtimeSession`: the caller barging in (`audio_interrupted`) cancels
   * the running function calls in Switchboard, and a handoff updates the session's agent.
   */
  attach(session: RealtimeSession): void {
    this.#session = session;
    session.on("audio_interrupted", () => {
      // In the background: the caller's audio must not wait on HTTP; a failed cancel lets the
      // calls run to their end and the model hears their real answers.
      this.cancelPending().catch(() => undefined);
    });
  }

  /** The caller interrupted: the function calls still running are cancelled by Switchboard's policy. */
  async cancelPending(): Promise<void> {
    await Promise.all([...this.#pending].map((fc) => this.call.cancelResponse(fc)));
  }
}
