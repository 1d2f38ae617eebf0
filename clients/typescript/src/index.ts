/**
 * Switchboard's TypeScript client. Layout: `client` (the HTTP client, `Call`), `errors` (typed
 * errors), `types` (answers parsed once), `trace` (W3C trace context from `@opentelemetry/api`),
 * `generated/openapi` (types generated from the server's `/openapi.json`); adapters in their own
 * entry points: `@switchboard/client/openai-agents`, `@switchboard/client/livekit`.
 */
export { Call, Switchboard, type Format, type InvocationBody, type StartCallBody, type SwitchboardOptions } from "./client.js";
export * from "./errors.js";
export { traceHeaders } from "./trace.js";
export * from "./types.js";
export type { components, paths } from "./generated/openapi.js";
