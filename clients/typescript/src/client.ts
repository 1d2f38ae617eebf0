/** The HTTP client: calls, invocations, cancellation, toolsets and records, over `fetch`. */

import { ApiError, NotFound, SwitchboardError, TransportError, errorForStatus } from "./errors.js";
import type { paths } from "./generated/openapi.js";
import { traceHeaders } from "./trace.js";
import {
  type CallRecord,
  type FunctionDef,
  type InvocationResult,
  type Toolset,
  functionsOf,
  parseCallRecord,
  parseInvocation,
} from "./types.js";

/** The JSON body an operation takes, from the OpenAPI document. */
type JsonBody<P extends keyof paths, M extends keyof paths[P]> = paths[P][M] extends {
  requestBody?: { content: { "application/json": infer B } };
}
  ? B
  : never;

export type StartCallBody = JsonBody<"/v1/calls", "post">;
export type InvocationBody = JsonBody<"/v1/calls/{call_id}/invocations", "post">;
export type Format = "openai-realtime" | "openai-chat" | "openai-responses" | "anthropic" | "mcp";

/** Statuses worth another try for a request that is safe to repeat. */
const RETRY_STATUSES = new Set([408, 425, 429, 500, 502, 503, 504]);
/** Error bodies are read up to this size; the rest is not needed to name the error. */
const MAX_ERROR_BODY = 64 * 1024;

/** One path segment, escaped (ids are the caller's own and may hold anything). */
const seg = (value: string): string => encodeURIComponent(value);

export interface SwitchboardOptions {
  /** Per-request timeout in ms (10 s). */
  timeoutMs?: number;
  /** Timeout of an invocation in ms (60 s): it waits for its tool (20 s deadline by default). */
  invokeTimeoutMs?: number;
  /** More tries of a request that is safe to repeat (2, at most 10). */
  retries?: number;
  /** First backoff in ms (200), doubled each try, with jitter. */
  backoffMs?: number;
  /** The `fetch` to use (the global one by default). */
  fetch?: typeof fetch;
}

interface RequestOptions {
  body?: unknown;
  query?: Record<string, string>;
  idempotent: boolean;
  timeoutMs?: number;
  headers?: Record<string, string>;
}

/**
 * A client for one Switchboard tenant (its API key). Requests that are safe to repeat (reads,
 * invocations — the server answers a repeated `function_call_id` with its first answer —,
 * cancels and ends) are retried on network errors, timeouts and 408/425/429/5xx, with backoff.
 */
export class Switchboard {
  readonly baseUrl: string;
  readonly #key: string;
  readonly timeoutMs: number;
  readonly invokeTimeoutMs: number;
  readonly retries: number;
  readonly backoffMs: number;
  readonly #fetch: typeof fetch;

  constructor(baseUrl: string, apiKey: string, options: SwitchboardOptions = {}) {
    if (!/^https?:\/\//.test(baseUrl)) {
      throw new TypeError(
        `Switchboard baseUrl ${JSON.stringify(baseUrl)} must start with http:// or https://, e.g. http://127.0.0.1:8080`,
      );
    }
    if (!apiKey) throw new TypeError("Switchboard apiKey is empty: pass a tenant key (sb_<tenant>_...)");
    this.baseUrl = baseUrl.replace(/\/+$/, "");
    this.#key = apiKey;
    this.timeoutMs = options.timeoutMs ?? 10_000;
    this.invokeTimeoutMs = options.invokeTimeoutMs ?? 60_000;
    this.retries = Math.max(0, Math.min(options.retries ?? 2, 10));
    this.backoffMs = options.backoffMs ?? 200;
    this.#fetch = options.fetch ?? globalThis.fetch;
  }

  /** Never the key. */
  toString(): string {
    return `Switchboard(${this.baseUrl})`;
  }

  /** The `Authorization` header value (for an MCP client of a call; never log it). */
  authorization(): string {
    return `Bearer ${this.#key}`;
  }

  /** One API request; the parsed JSON answer, or a typed error. */
  async request(method: string, path: string, opts: RequestOptions): Promise<unknown> {
    let url = `${this.baseUrl}${path}`;
    if (opts.query) url += `?${new URLSearchParams(opts.query).toString()}`;
    const headers: Record<string, string> = { ...opts.headers, authorization: this.authorization() };
    let body: string | undefined;
    if (opts.body !== undefined) {
      headers["content-type"] = "application/json";
      body = JSON.stringify(opts.body);
    }
    const attempts = 1 + this.retries;
    let last: unknown;
    let tried = 0;
    for (let attempt = 0; attempt < attempts; attempt++) {
      if (attempt > 0) {
        const ms = this.backoffMs * 2 ** (attempt - 1) * (0.5 + Math.random());
        await new Promise((r) => setTimeout(r, ms));
      }
      tried++;
      let resp: Response;
      try {
        resp = await this.#fetch(url, {
          method,
          headers,
          body,
          signal: AbortSignal.timeout(opts.timeoutMs ?? this.timeoutMs),
        });
      } catch (e) {
        last = e;
        // A connection never made sent nothing: safe to try again whatever the request.
        if (opts.idempotent || isConnectError(e)) continue;
        break;
      }
      if (resp.status < 400) {
        const text = await resp.text();
        if (!text) return null;
        try {
          return JSON.parse(text) as unknown;
        } catch {
          throw new SwitchboardError(
            `${method} ${path}: ${this.baseUrl} answered ${resp.status} with a body that is not JSON; is baseUrl a Switchboard server (not a proxy's page)?`,
          );
        }
      }
      const err = await errorOf(resp, method, path);
      if (opts.idempotent && RETRY_STATUSES.has(resp.status) && attempt + 1 < attempts) {
        last = err;
        continue;
      }
      throw err;
    }
    if (last instanceof ApiError) throw last;
    const why = last instanceof Error ? `${last.name}: ${last.message}` : String(last);
    throw new TransportError(
      `${method} ${path}: no answer from Switchboard at ${this.baseUrl} after ${tried} attempt(s) (${why}); check that the server runs and the URL is right`,
      { cause: last },
    );
  }

  /** An agent's toolset (`{tools, tool_choice}`) in one provider's format. */
  async toolset(agent: string, format: Format = "openai-realtime", strict = false): Promise<Toolset> {
    const query: Record<string, string> = { format };
    if (strict) query["strict"] = "true";
    const ts = await this.request("GET", `/v1/agents/${seg(agent)}/toolset`, { query, idempotent: true });
    return (ts ?? {}) as Toolset;
  }

  /** An agent's functions (name, description, JSON Schema parameters). */
  async functions(agent: string, strict = false): Promise<FunctionDef[]> {
    return functionsOf(await this.toolset(agent, "openai-realtime", strict));
  }

  /** An agent's definition (`instructions`, `tools`, `handoffs`, ...). */
  async agent(name: string): Promise<Record<string, unknown>> {
    const a = await this.request("GET", `/v1/agents/${seg(name)}`, { idempotent: true });
    return (a ?? {}) as Record<string, unknown>;
  }

  /** A tool's definition (`GET /v1/tools/{name}`), or null when the tenant has no such tool. */
  async tool(name: string): Promise<Record<string, unknown> | null> {
    try {
      return (await this.request("GET", `/v1/tools/${seg(name)}`, { idempotent: true })) as Record<string, unknown>;
    } catch (e) {
      if (e instanceof NotFound) return null;
      throw e;
    }
  }

  /** Starts a call (with the tenant's default agent when `agent` is not given). */
  async startCall(body: StartCallBody = {}): Promise<Call> {
    // Not retried past a connection error: a second start of the same id would be a 409.
    const started = (await this.request("POST", "/v1/calls", { body, idempotent: false })) as Record<string, unknown>;
    const toolset = started["toolset"];
    return new Call(
      this,
      String(started["call_id"]),
      String(started["agent"]),
      typeof toolset === "object" && toolset !== null ? (toolset as Toolset) : {},
    );
  }

  /** A handle on a call started elsewhere (e.g. by another process). */
  call(callId: string, agent = ""): Call {
    return new Call(this, callId, agent, {});
  }

  /**
   * Starts a call, runs `body` with it, and ends the call whether `body` returned or threw (the
   * body's own error is the one thrown; an end's failure then rides along as its `cause`
   * chain's `suppressed`).
   */
  async withCall<T>(start: StartCallBody, body: (call: Call) => Promise<T>): Promise<T> {
    const call = await this.startCall(start);
    let result: T;
    try {
      result = await body(call);
    } catch (e) {
      try {
        await call.end();
      } catch (endError) {
        if (e instanceof Error) (e as Error & { suppressed?: unknown }).suppressed = endError;
      }
      throw e;
    }
    await call.end();
    return result;
  }
}

function isConnectError(e: unknown): boolean {
  const cause = e instanceof Error ? (e.cause as { code?: unknown } | undefined) : undefined;
  return cause?.code === "ECONNREFUSED" || cause?.code === "ENOTFOUND";
}

async function errorOf(resp: Response, method: string, path: string): Promise<ApiError> {
  let code = "http_error";
  let message = resp.statusText;
  let details: unknown = null;
  try {
    const text = (await resp.text()).slice(0, MAX_ERROR_BODY);
    const envelope = JSON.parse(text) as unknown;
    const err = (envelope as { error?: unknown } | null)?.error;
    if (typeof err === "object" && err !== null) {
      const e = err as Record<string, unknown>;
      if (e["code"]) code = String(e["code"]);
      if (e["message"]) message = String(e["message"]);
      details = e["details"] ?? null;
    }
  } catch {
    // not the envelope: the status names the error
  }
  return errorForStatus(resp.status, code, message, details, method, path);
}

/**
 * One live call: invoke its tools, cancel an interrupted response's tools, end it.
 * `await using call = await sb.startCall(...)` ends it when the scope is left, also on error.
 */
export class Call implements AsyncDisposable {
  constructor(
    readonly client: Switchboard,
    readonly id: string,
    /** The active agent, as the last answer left it (a handoff changes it). */
    public agent: string,
    /** The active agent's toolset in OpenAI Realtime format. */
    public toolset: Toolset,
  ) {}

  toString(): string {
    return `Call(${this.id}, agent=${this.agent})`;
  }

  /** The active agent's functions. */
  get functions(): FunctionDef[] {
    return functionsOf(this.toolset);
  }

  /** The call-scoped MCP endpoint (`/v1/calls/{id}/mcp`), for stacks that prefer MCP. */
  get mcpUrl(): string {
    return `${this.client.baseUrl}/v1/calls/${seg(this.id)}/mcp`;
  }

  /**
   * Runs one function call and waits for its answer (`output` goes to the model). `args` is the
   * model's arguments text as it produced it (or an object); `responseId` names the model
   * response it belongs to, for `cancelResponse`. The active span's trace context goes along.
   */
  async invoke(
    functionCallId: string,
    name: string,
    args?: string | Record<string, unknown> | null,
    responseId?: string,
  ): Promise<InvocationResult> {
    const body: Record<string, unknown> = { function_call_id: functionCallId, name };
    if (typeof args === "string") {
      if (args.trim()) body["arguments_json"] = args;
    } else if (args) {
      body["arguments"] = args;
    }
    if (responseId !== undefined) body["response_id"] = responseId;
    const raw = await this.client.request("POST", `/v1/calls/${seg(this.id)}/invocations`, {
      body: body satisfies Partial<Record<keyof InvocationBody, unknown>>,
      idempotent: true,
      timeoutMs: this.client.invokeTimeoutMs,
      headers: await traceHeaders(),
    });
    const result = parseInvocation(raw);
    if (result.handoff !== null) {
      this.agent = result.handoff.agent;
      this.toolset = result.handoff.toolset;
    }
    return result;
  }

  /** The caller interrupted `responseId`: reads are cancelled, writes finish, actions are dropped. */
  async cancelResponse(responseId: string): Promise<void> {
    await this.client.request("POST", `/v1/calls/${seg(this.id)}/responses/${seg(responseId)}/cancel`, {
      idempotent: true,
    });
  }

  async #activeAgent(): Promise<string> {
    if (!this.agent) this.agent = (await this.record()).agent;
    return this.agent;
  }

  /** The active agent's toolset as the server has it now, in one provider's format. */
  async toolsetAs(format: Format, strict = false): Promise<Toolset> {
    return this.client.toolset(await this.#activeAgent(), format, strict);
  }

  /** The active agent's functions as the server has them now (`strict`: OpenAI strict schemas). */
  async functionsNow(strict = false): Promise<FunctionDef[]> {
    return this.client.functions(await this.#activeAgent(), strict);
  }

  /** The active agent's instructions. */
  async instructions(): Promise<string> {
    const a = await this.client.agent(await this.#activeAgent());
    return typeof a["instructions"] === "string" ? a["instructions"] : "";
  }

  /** The call's status, context and invocation records. */
  async record(): Promise<CallRecord> {
    return parseCallRecord(await this.client.request("GET", `/v1/calls/${seg(this.id)}`, { idempotent: true }));
  }

  /** Ends the call (what still runs is cancelled) and returns its final record. */
  async end(): Promise<CallRecord> {
    return parseCallRecord(await this.client.request("DELETE", `/v1/calls/${seg(this.id)}`, { idempotent: true }));
  }

  /** `await using`: ends the call (ending an ended call answers its record, so it is harmless). */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.end();
  }
}
