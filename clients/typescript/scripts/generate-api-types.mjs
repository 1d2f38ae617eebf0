#!/usr/bin/env node
// Regenerates src/generated/openapi.ts from a running server's OpenAPI document:
//   node scripts/generate-api-types.mjs http://127.0.0.1:8080
// (or SWITCHBOARD_URL). The test suite checks that the committed file matches the document of
// the server it runs against; `render` is the one function both use.
import { writeFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import openapiTS, { astToString } from "openapi-typescript";

const HEADER =
  "// Generated from Switchboard's /openapi.json by scripts/generate-api-types.mjs (openapi-typescript).\n" +
  "// Do not edit: run `npm run generate -- <server url>` after an API change.\n\n";

/** The TypeScript text of an OpenAPI document (an object, as `/openapi.json` answers it). */
export async function render(doc) {
  const ast = await openapiTS(doc, { alphabetize: true, emptyObjectsUnknown: true });
  return HEADER + astToString(ast);
}

export const OUTPUT = fileURLToPath(new URL("../src/generated/openapi.ts", import.meta.url));

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const base = (process.argv[2] ?? process.env.SWITCHBOARD_URL ?? "").replace(/\/+$/, "");
  if (!/^https?:\/\//.test(base)) {
    console.error("usage: node scripts/generate-api-types.mjs <server url, e.g. http://127.0.0.1:8080> (or set SWITCHBOARD_URL)");
    process.exit(2);
  }
  const resp = await fetch(`${base}/openapi.json`);
  if (!resp.ok) {
    console.error(`GET ${base}/openapi.json answered ${resp.status}: is ${base} a Switchboard server?`);
    process.exit(1);
  }
  await writeFile(OUTPUT, await render(await resp.json()));
  console.log(`wrote ${OUTPUT}`);
}
