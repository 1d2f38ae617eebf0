import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { after, before, test } from "node:test";
import { type TestServer, startServer } from "./support/server.js";

let server: TestServer;
before(async () => {
  server = await startServer();
});
after(async () => {
  await server?.stop();
});

test("src/generated/openapi.ts is what the server's /openapi.json generates (npm run generate)", async () => {
  const gen = (await import(pathToFileURL(resolve("scripts/generate-api-types.mjs")).href)) as {
    render(doc: unknown): Promise<string>;
    OUTPUT: string;
  };
  const doc = await (await fetch(`${server.base}/openapi.json`)).json();
  const fresh = await gen.render(doc);
  assert.ok(
    fresh === readFileSync(gen.OUTPUT, "utf8"),
    `src/generated/openapi.ts is stale: run \`npm run generate -- <server url>\` in clients/typescript against this build's server`,
  );
});
