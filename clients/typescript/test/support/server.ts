/**
 * A real `switchboard serve` on loopback (temporary SQLite database) with a test tenant, its
 * tools and agents, and a slow upstream HTTP server its tools call: one per test file.
 *
 * The binary is `$SWITCHBOARD_BIN` (the Rust test that runs this suite sets it), else the
 * workspace's `target/debug/switchboard`.
 */

import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, openSync, readFileSync, rmSync } from "node:fs";
import { type Server as HttpServer, createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

export interface TestServer {
  base: string;
  key: string;
  /** What reached the upstream, as `METHOD path`. */
  hits: string[];
  stop(): Promise<void>;
}

export function newId(prefix: string): string {
  return `${prefix}-${randomBytes(6).toString("hex")}`;
}

async function api(base: string, key: string, method: string, path: string, body?: unknown): Promise<any> {
  const resp = await fetch(`${base}${path}`, {
    method,
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await resp.text();
  if (!resp.ok) throw new Error(`${method} ${path}: ${resp.status} ${text}`);
  return text ? JSON.parse(text) : null;
}

function upstream(hits: string[]): Promise<HttpServer> {
  const server = createServer((req, res) => {
    const ms = Number(/ms=(\d+)/.exec(req.url ?? "")?.[1] ?? 0);
    req.resume();
    req.on("end", () => {
      setTimeout(() => {
        hits.push(`${req.method} ${req.url}`);
        const body = JSON.stringify({ status: "done", path: req.url });
        res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(body) });
        res.end(body);
      }, ms);
    });
  });
  return new Promise((ok) => server.listen(0, "127.0.0.1", () => ok(server)));
}

export function tools(up: string): unknown[] {
  return [
    {
      name: "save_meal",
      description: "Log a meal the user consumed",
      side_effect: "write",
      parameters: [
        { name: "meal_type", type: "string", enum: ["breakfast", "lunch", "dinner"], required: true },
        { name: "dishes", type: "array", items: { type: "string" }, required: true },
        { name: "note", type: "string", description: "Anything else the user said" },
      ],
      actions: [{ type: "context.set", data: { "logged_meals[+]": "{{params}}" } }],
      on_success: [{ type: "respond", message: "I've logged your {{params.meal_type}}!" }],
    },
    {
      name: "lookup_order",
      description: "Look an order up (slow)",
      side_effect: "read",
      parameters: [{ name: "order_id", type: "string", required: true }],
      actions: [
        { type: "api_call", method: "GET", url: `${up}/slow?ms=1500&lookup={{params.order_id}}`, retry_count: 0, response_path: "result.order" },
      ],
    },
    {
      name: "transfer_to_sales",
      description: "Transfer the caller to sales",
      parameters: [],
      actions: [{ type: "transfer", target_uri: "sip:sales@example.com" }],
      on_success: [{ type: "respond", message: "Transferring you to sales." }],
    },
    {
      name: "hang_up",
      description: "End the call",
      parameters: [],
      actions: [{ type: "end_call", message: "Goodbye!" }],
    },
    {
      name: "to_billing",
      description: "Hand the caller to billing",
      parameters: [],
      actions: [{ type: "handoff", agent: "billing", reason: "billing question" }],
    },
    {
      name: "pay_bill",
      description: "Pay the open bill",
      side_effect: "write",
      parameters: [{ name: "amount", type: "number", required: true }],
      actions: [{ type: "context.set", data: { paid: "{{params.amount}}" } }],
      on_success: [{ type: "respond", message: "Paid." }],
    },
  ];
}

async function waitReady(proc: ChildProcess, base: string, log: string): Promise<void> {
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline && proc.exitCode === null) {
    try {
      if ((await fetch(`${base}/readyz`, { signal: AbortSignal.timeout(2000) })).status === 200) return;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`\`switchboard serve\` did not become ready at ${base}; its log:\n${readFileSync(log, "utf8")}`);
}

async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((ok) => s.listen(0, "127.0.0.1", () => ok()));
  const port = (s.address() as AddressInfo).port;
  await new Promise((ok) => s.close(ok));
  return port;
}

export async function startServer(): Promise<TestServer> {
  const binary = process.env["SWITCHBOARD_BIN"] ?? resolve("../../target/debug/switchboard");
  if (!existsSync(binary)) {
    throw new Error(`no switchboard binary at ${binary}: run \`cargo build -p switchboard-cli\` or set SWITCHBOARD_BIN`);
  }
  const hits: string[] = [];
  const up = await upstream(hits);
  const upUrl = `http://127.0.0.1:${(up.address() as AddressInfo).port}`;
  const tmp = mkdtempSync(join(tmpdir(), "sb-ts-"));
  const log = join(tmp, "serve.log");
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const env: Record<string, string | undefined> = { ...process.env, SWITCHBOARD_LOG: "info", NO_COLOR: "1" };
  for (const k of ["DATABASE_URL", "SWITCHBOARD_MASTER_KEY", "SWITCHBOARD_KEY_FILE", "SWITCHBOARD_LISTEN"]) delete env[k];
  const proc = spawn(
    binary,
    ["serve", "--database", `sqlite://${join(tmp, "sb.db")}`, "--listen", `127.0.0.1:${port}`, "--key-file", join(tmp, "master.key"),
      "--log-format", "text", "--allow-private-network"],
    { stdio: ["ignore", "ignore", openSync(log, "w")], env },
  );
  const stop = async (): Promise<void> => {
    proc.kill("SIGKILL");
    up.closeAllConnections();
    await new Promise((ok) => up.close(ok));
    rmSync(tmp, { recursive: true, force: true });
  };
  try {
    await waitReady(proc, base, log);
    const line = readFileSync(log, "utf8").split("\n").find((l) => l.includes("created the admin key"));
    const admin = line?.split("created the admin key")[1]?.split(": ").pop()?.trim();
    if (!admin) throw new Error(`no admin key in the server's log:\n${readFileSync(log, "utf8")}`);
    await api(base, admin, "POST", "/v1/tenants", { id: "tstest" });
    const key: string = (await api(base, admin, "POST", "/v1/tenants/tstest/api-keys", {})).key;
    for (const t of tools(upUrl)) await api(base, key, "POST", "/v1/tools", t);
    await api(base, key, "PUT", "/v1/agents/billing", { instructions: "You are billing. Take payments.", tools: [{ tool: "pay_bill" }] });
    await api(base, key, "PUT", "/v1/agents/assistant", {
      instructions: "You are the front desk.",
      default: true,
      handoffs: ["billing"],
      tools: ["save_meal", "lookup_order", "transfer_to_sales", "hang_up", "to_billing"].map((tool) => ({ tool })),
    });
    return { base, key, hits, stop };
  } catch (e) {
    await stop();
    throw e;
  }
}
