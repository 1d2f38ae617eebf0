import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

// The README's TypeScript examples are the files in examples/, which `tsc --strict` checks.
test("the README's TypeScript examples are examples/*.ts, word for word", () => {
  const readme = readFileSync("../../README.md", "utf8");
  const section = readme.split("## TypeScript")[1]?.split("\n## ")[0] ?? "";
  const blocks = [...section.matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => m[1]);
  assert.deepEqual(blocks, [
    readFileSync("examples/openai-realtime.ts", "utf8"),
    readFileSync("examples/livekit.ts", "utf8"),
  ]);
});
