// The console's Alerts page in headless Chromium, driven by Playwright (playwright-core, with
// Debian's Chromium). Run by crates/server/tests/api/console_browser.rs against a real server;
// every step asserts what the page shows. Exits non-zero naming the failed step.
//
// Environment: SB_BASE (the server), SB_KEY (a tenant's key), SB_CHROMIUM (the browser).
"use strict";

const { chromium } = require("playwright-core");

function env(name) {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: console_browser.rs sets it before running this script`);
  return v;
}

const base = env("SB_BASE");
const key = env("SB_KEY");

let step = "start";

function check(cond, what) {
  if (!cond) throw new Error(what);
}

async function main(page) {
  step = "sign in; the nav leads to the Alerts page";
  await page.goto(base + "/console/signin");
  await page.fill('input[name="key"]', key);
  await page.click('button[type="submit"]');
  await page.waitForURL("**/console/tools");
  await page.click('header nav a[href="/console/alerts"]');
  await page.waitForURL("**/console/alerts");
  check((await page.textContent("#rules")).includes("No rules yet"), "a new tenant has no rules");

  step = "a bad rule is answered with its problems at their pointers";
  await page.fill("#rule-definition", JSON.stringify({ id: "slow", kind: "tool_latency_p95", tool: "crm" }));
  await page.click('#new-rule-form button[type="submit"]');
  await page.locator("#new-rule-result .error").waitFor();
  const problems = await page.textContent("#new-rule-result");
  check(problems.includes("/above_ms") && problems.includes("/webhook_url"), `the problems name their pointers: ${problems}`);

  step = "a good rule is made, its webhook secret shown once";
  await page.fill(
    "#rule-definition",
    JSON.stringify({ id: "slow", kind: "tool_latency_p95", tool: "crm", above_ms: 900, webhook_url: "https://alerts.example.com/in" }),
  );
  await page.click('#new-rule-form button[type="submit"]');
  await page.locator("#rule-secret").waitFor();
  check((await page.textContent("#rule-secret")).startsWith("whsec_"), "the secret is shown");

  step = "the list shows it, ok";
  await page.goto(base + "/console/alerts");
  const row = page.locator("tr.rule", { hasText: "slow" });
  await row.waitFor();
  check((await row.textContent()).includes("p95 latency over 900 ms"), "the row says when it fires");
  check((await row.locator(".state").textContent()).trim() === "ok", "the rule is ok");
  check(!(await page.textContent("body")).includes("whsec_"), "the secret is not shown again");

  step = "delete it (confirmed); the page reloads without it";
  page.once("dialog", (d) => d.accept());
  await row.locator("button.delete").click();
  await page.locator("tr.rule").waitFor({ state: "detached" });
  check((await page.textContent("#rules")).includes("No rules yet"), "the rule is gone");
}

(async () => {
  const browser = await chromium.launch({
    executablePath: env("SB_CHROMIUM"),
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
  const page = await (await browser.newContext({ viewport: { width: 1200, height: 800 } })).newPage();
  page.setDefaultTimeout(20000);
  const faults = [];
  page.on("pageerror", (e) => faults.push(`script error: ${e.message}`));
  page.on("console", (m) => {
    if (m.type() === "error" && /Content Security Policy|Refused to/.test(m.text())) faults.push(m.text());
  });
  let failed = null;
  try {
    await main(page);
    check(faults.length === 0, `the page ran without script errors or policy violations: ${faults.join("; ")}`);
  } catch (e) {
    let shown = "";
    try {
      shown = `${page.url()}\n${(await page.textContent("body")).replace(/\s+/g, " ").slice(0, 2000)}`;
    } catch (_) {
      shown = "(the page could not be read)";
    }
    failed = `alerts in the browser: step "${step}" failed: ${e.message}\npage: ${shown}`;
  } finally {
    await browser.close();
  }
  if (failed) {
    console.error(failed);
    process.exit(1);
  }
  console.log("alerts in the browser: every step passed");
})().catch((e) => {
  console.error(`alerts in the browser: step "${step}" failed: ${e.stack || e}`);
  process.exit(1);
});
