/** What the server answers, as typed values (parsed once at the boundary). */

/** One function as a model sees it: name, description and JSON Schema parameters. */
export interface FunctionDef {
  readonly name: string;
  readonly description: string;
  readonly parameters: Record<string, unknown>;
}

/** A toolset as `GET /v1/agents/{name}/toolset` answers it (`{tools, tool_choice}`). */
export type Toolset = Record<string, unknown> & { tools?: unknown[] };

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** The functions of a toolset in OpenAI Realtime format (`{"tools": [...], ...}`). */
export function functionsOf(toolset: unknown): FunctionDef[] {
  if (!isObject(toolset) || !Array.isArray(toolset["tools"])) return [];
  return toolset["tools"].filter(isObject).flatMap((t) =>
    (t["type"] ?? "function") === "function"
      ? [
          {
            name: String(t["name"] ?? ""),
            description: typeof t["description"] === "string" ? t["description"] : "",
            parameters: isObject(t["parameters"])
              ? t["parameters"]
              : { type: "object", properties: {} },
          },
        ]
      : [],
  );
}

/** Transfer the call (SIP REFER) to `targetUri`: the voice stack carries it out. */
export interface Transfer {
  readonly type: "transfer";
  readonly targetUri: string;
}

/** Say `message` (if any), then end the call: the voice stack carries it out. */
export interface Hangup {
  readonly type: "hangup";
  readonly message: string | null;
}

export type CallAction = Transfer | Hangup;

/** The call moved to another agent: give the model its functions and instructions. */
export interface Handoff {
  readonly agent: string;
  readonly reason: string | null;
  readonly message: string | null;
  readonly toolset: Toolset;
}

/** The answer to one function call. `output` is the text to give the model, always. */
export interface InvocationResult {
  readonly functionCallId: string;
  readonly ok: boolean;
  readonly error: string | null;
  readonly output: string;
  readonly result: unknown;
  readonly actions: readonly CallAction[];
  readonly handoff: Handoff | null;
  readonly duplicateOf: string | null;
  readonly interrupted: boolean;
  readonly replayed: boolean;
}

function str(v: unknown): string | null {
  return typeof v === "string" ? v : null;
}

function action(raw: unknown): CallAction | null {
  if (!isObject(raw)) return null;
  if (raw["type"] === "transfer" && typeof raw["target_uri"] === "string") {
    return { type: "transfer", targetUri: raw["target_uri"] };
  }
  if (raw["type"] === "hangup") return { type: "hangup", message: str(raw["message"]) };
  return null;
}

export function parseInvocation(body: unknown): InvocationResult {
  const b = isObject(body) ? body : {};
  const h = b["handoff"];
  const actions = Array.isArray(b["actions"]) ? b["actions"] : [];
  return {
    functionCallId: String(b["function_call_id"] ?? ""),
    ok: b["ok"] === true,
    error: str(b["error"]),
    output: String(b["output"] ?? ""),
    result: b["result"],
    actions: actions.map(action).filter((a): a is CallAction => a !== null),
    handoff: isObject(h)
      ? {
          agent: String(h["agent"] ?? ""),
          reason: str(h["reason"]),
          message: str(h["message"]),
          toolset: isObject(h["toolset"]) ? h["toolset"] : {},
        }
      : null,
    duplicateOf: str(b["duplicate_of"]),
    interrupted: b["interrupted"] === true,
    replayed: b["replayed"] === true,
  };
}

/** The transfer among an answer's actions, if any. */
export function transferOf(r: InvocationResult): Transfer | null {
  return r.actions.find((a): a is Transfer => a.type === "transfer") ?? null;
}

/** The hang-up among an answer's actions, if any. */
export function hangupOf(r: InvocationResult): Hangup | null {
  return r.actions.find((a): a is Hangup => a.type === "hangup") ?? null;
}

/** A call as `GET /v1/calls/{id}` shows it: status, context and invocation records. */
export interface CallRecord {
  readonly callId: string;
  readonly agent: string;
  readonly status: string;
  readonly context: Record<string, unknown>;
  readonly invocations: readonly Record<string, unknown>[];
  readonly invocationsTotal: number;
}

export function parseCallRecord(body: unknown): CallRecord {
  const b = isObject(body) ? body : {};
  return {
    callId: String(b["call_id"] ?? ""),
    agent: String(b["agent"] ?? ""),
    status: String(b["status"] ?? ""),
    context: isObject(b["context"]) ? b["context"] : {},
    invocations: Array.isArray(b["invocations"]) ? b["invocations"].filter(isObject) : [],
    invocationsTotal: typeof b["invocations_total"] === "number" ? b["invocations_total"] : 0,
  };
}

/**
 * A handoff answer's `output` as the model is to read it: it says which agent now handles the
 * call (`"Transferred to agent 'billing'."`, after the answer's own `message` if it has one)
 * and names it in `handoff` (`agent`, `reason`).
 */
export function handedOff(output: string, handoff: Handoff): string {
  const note = `Transferred to agent '${handoff.agent}'.`;
  let value: unknown;
  try {
    value = JSON.parse(output);
  } catch {
    value = null;
  }
  if (!isObject(value)) return output.trim() !== "" ? `${output} ${note}` : note;
  const said = value["message"];
  return JSON.stringify({
    ...value,
    message: typeof said === "string" && said.trim() !== "" ? `${said} ${note}` : note,
    handoff: { agent: handoff.agent, reason: handoff.reason },
  });
}
