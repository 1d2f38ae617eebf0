// The operators' console in headless Chromium, driven by Playwright (playwright-core, with
// Debian's Chromium). Run by crates/server/tests/api/console_browser.rs against a real server it
// has seeded; every step asserts what the page shows, and every page it opens must run without a
// script error, a console error, a failed request or an error status the step did not expect.
// Exits non-zero naming the failed step.
//
// Environment: SB_BASE (the server), SB_KEY (the seeded tenant's key), SB_OTHER_KEY (another
// tenant's key), SB_ADMIN_KEY (the admin key), SB_LIVE_CALL (a live call with no invocations yet), SB_RECORDED (how many
// recorded save_meal invocations the replay should find), SB_WATCH_KEY and SB_WATCH_KEY_ID (a
// second key of the tenant, revoked while its session follows SB_WATCH_CALL, another live call),
// SB_GOOGLE_AGENT (an agent with Google Calendar, not connected yet; once connected, a call to
// it books an event through the HTTP door) and SB_CONSENT_SITE (the
// consent page of the Google simulator, on another site than SB_BASE), SB_CHROMIUM (the
// browser), and
// optionally SWITCHBOARD_CONSOLE_SCREENSHOTS (a directory: a PNG of each page is written there).
"use strict";

const fs = require("node:fs");
const path = require("node:path");
const { chromium } = require("playwright-core");

function env(name) {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: console_browser.rs sets it before running this script`);
  return v;
}

const base = env("SB_BASE");
const key = env("SB_KEY");
const otherKey = env("SB_OTHER_KEY");
const adminKey = env("SB_ADMIN_KEY");
const liveCall = env("SB_LIVE_CALL");
const recorded = Number(env("SB_RECORDED"));
const watchKey = env("SB_WATCH_KEY");
const watchKeyId = env("SB_WATCH_KEY_ID");
const watchCall = env("SB_WATCH_CALL");
const googleAgent = env("SB_GOOGLE_AGENT");
const consentSite = env("SB_CONSENT_SITE");
const shots = process.env.SWITCHBOARD_CONSOLE_SCREENSHOTS || "";

let step = "start";

// Every page the walk opens is watched: a script error, a console error, a failed request or an
// error status fails the walk, unless the step said it expects that status from that URL.
const faults = [];
let expected = [];

function expect(status, urlPart) {
  expected.push({ step, status, urlPart });
}

function isExpected(status, url) {
  return expected.some((e) => e.step === step && e.status === status && url.includes(e.urlPart));
}

function watch(page) {
  page.on("pageerror", (e) => faults.push(`${step}: script error: ${e.message}`));
  page.on("console", (m) => {
    if (m.type() !== "error") return;
    const status = Number((m.text().match(/status of (\d{3})/) || [])[1]);
    if (status && isExpected(status, m.location().url || "")) return;
    faults.push(`${step}: console error: ${m.text()} (${m.location().url || page.url()})`);
  });
  // A request cut short because the page navigated away (an open event stream) is not a failure.
  page.on("requestfailed", (r) => {
    const why = (r.failure() || {}).errorText || "";
    if (!why.includes("ERR_ABORTED")) faults.push(`${step}: request failed: ${r.url()} ${why}`);
  });
  page.on("response", (r) => {
    if (r.status() >= 400 && !isExpected(r.status(), r.url())) faults.push(`${step}: ${r.status()} from ${r.url()}`);
  });
}

function check(cond, what) {
  if (!cond) throw new Error(what);
}

async function shot(page, name) {
  if (!shots) return;
  fs.mkdirSync(shots, { recursive: true });
  await page.screenshot({ path: path.join(shots, `${name}.png`) });
}

// The HTTP door, as a voice agent's runtime calls it while the page is open.
async function api(method, url, body) {
  const r = await fetch(base + url, {
    method,
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await r.text();
  check(r.ok, `${method} ${url} answered ${r.status}: ${text}`);
  return text;
}

async function signIn(page, apiKey) {
  await page.goto(base + "/console");
  await page.waitForURL("**/console/signin");
  await page.fill('input[name="key"]', apiKey);
  await page.click('button[type="submit"]');
  await page.waitForURL("**/console/tools");
}

// ---- the agent editor ----

// The 1-based line of `text` holding `needle`.
function lineOf(text, needle) {
  return text.split("\n").findIndex((l) => l.includes(needle)) + 1;
}

async function agentEditing(page) {
  step = "the agent editor holds the agent's JSON with line numbers, never its sensitive config";
  await page.goto(base + "/console/agents/assistant");
  const editor = page.locator("#agent-definition");
  const original = JSON.parse(await editor.inputValue());
  check(original.tools[0].tool === "save_meal", "the editor holds the agent's tools");
  check(!(await editor.inputValue()).includes("sensitive_config"), "the editor holds no sensitive config");
  const lines = (await editor.inputValue()).split("\n").length;
  const numbers = await page.textContent("#edit-agent .gutter");
  check(numbers.trim().split("\n").length === lines, `the gutter numbers each of the ${lines} lines`);

  step = "edit the agent's instructions, numbers, filler and turn budget, and save";
  await page.fill("#agent-instructions-input", "Help with meals.\nBe brief.");
  await page.fill("#phone-numbers", "+18005550199");
  await editor.fill(JSON.stringify({ ...original, filler: "One moment, please.", turn_budget_ms: 900 }, null, 2));
  await page.click("#agent-save");
  await page.waitForURL("**/console/agents/assistant?saved=1");
  await page.locator("#agent-saved").waitFor();
  check((await page.textContent("#agent-instructions")).includes("Be brief."), "the page shows the new instructions");
  check((await page.textContent("#agent-numbers")).includes("+18005550199"), "the page lists the number routed here");
  const saved = JSON.parse(await api("GET", "/v1/agents/assistant"));
  check(saved.instructions === "Help with meals.\nBe brief." && saved.filler === "One moment, please." && saved.turn_budget_ms === 900,
    `the API shows the saved agent: ${JSON.stringify(saved)}`);
  check(saved.tools[0].sensitive_config_set === true, "the sensitive config left out is kept");
  check(JSON.parse(await api("GET", "/v1/features")).realtime.phone_numbers["+18005550199"] === "assistant", "the number routes to the agent");

  step = "a bad field is shown at its line; its button, reached with the keyboard, selects that line";
  const bad = JSON.stringify({ ...JSON.parse(await editor.inputValue()), turn_budget_ms: 50 }, null, 2);
  await editor.fill(bad);
  await page.click("#agent-save");
  const problem = page.locator("#agent-problems .problem").first();
  await problem.waitFor();
  const at = lineOf(bad, '"turn_budget_ms"');
  check((await problem.getAttribute("data-line")) === String(at), `the problem is placed on line ${at}`);
  check((await problem.textContent()).includes("/turn_budget_ms"), "the problem names its pointer");
  await page.focus("#agent-save");
  await page.keyboard.press("Tab");
  check(await page.evaluate(() => document.activeElement.matches("#agent-problems .problem button.goto")),
    "Tab from Save reaches the problem's button");
  await page.keyboard.press("Enter");
  const selected = await editor.evaluate((t) => t.value.slice(t.selectionStart, t.selectionEnd));
  check(selected.includes('"turn_budget_ms": 50'), `the problem's button selects its line: ${selected}`);
  check(await editor.evaluate((t) => document.activeElement === t), "the caret is in the editor");
  check(JSON.parse(await api("GET", "/v1/agents/assistant")).turn_budget_ms === 900, "nothing was saved");
  await shot(page, "agent-editor-problem");

  step = "a secret typed into the editor is saved and never shown again";
  const withSecret = JSON.parse(bad);
  withSecret.turn_budget_ms = 800;
  withSecret.tools[0].sensitive_config = { api_key: "sk-browser-secret-9" };
  await editor.fill(JSON.stringify(withSecret, null, 2));
  // The page reloads to the address it has already.
  const reloaded = page.waitForNavigation({ url: "**/console/agents/assistant?saved=1" });
  await page.click("#agent-save");
  await reloaded;
  await page.locator("#agent-saved").waitFor();
  check(!(await page.content()).includes("sk-browser-secret-9"), "the saved page holds no secret");
  check(JSON.parse(await api("GET", "/v1/agents/assistant")).turn_budget_ms === 800, "the agent is saved");

  step = "create a new agent from the agents list";
  await page.goto(base + "/console/agents");
  await page.fill('#new-agent input[name="name"]', "concierge");
  await page.click('#new-agent button[type="submit"]');
  await page.waitForURL("**/console/agents/new?name=concierge");
  await page.fill("#agent-instructions-input", "Greet the caller.");
  await editor.fill(JSON.stringify({ tools: [{ tool: "save_meal" }], handoffs: ["assistant"] }, null, 2));
  await page.click("#agent-save");
  await page.waitForURL("**/console/agents/concierge?saved=1");
  check((await page.textContent("main")).includes("Hands off to: assistant"), "the new agent's page shows its handoff");
  const created = JSON.parse(await api("GET", "/v1/agents/concierge"));
  check(created.instructions === "Greet the caller." && created.tools[0].tool === "save_meal", "the API shows the new agent");
}

// ---- pages for people ----

// Whether the page scrolls sideways, and the scroll areas the keyboard cannot reach or that no
// name describes (textareas and inputs are reached and labelled as fields).
async function layoutFaults(page) {
  return page.evaluate(() => {
    const faults = [];
    if (document.documentElement.scrollWidth > 390) faults.push(`the page is ${document.documentElement.scrollWidth} px wide`);
    for (const el of document.querySelectorAll("body *")) {
      const style = getComputedStyle(el);
      const scrolls = (/(auto|scroll)/.test(style.overflowX) && el.scrollWidth > el.clientWidth + 1) ||
        (/(auto|scroll)/.test(style.overflowY) && el.scrollHeight > el.clientHeight + 1);
      if (!scrolls || el.matches("textarea, input, select")) continue;
      const name = el.id ? `#${el.id}` : `${el.tagName.toLowerCase()}.${el.className}`;
      if (!el.hasAttribute("tabindex") || el.tabIndex < 0) faults.push(`${name} scrolls but the keyboard cannot reach it`);
      if (!el.getAttribute("aria-label")) faults.push(`${name} scrolls but has no accessible name`);
    }
    for (const t of document.querySelectorAll("time[datetime]")) {
      const utc = new Date(t.getAttribute("datetime")).toISOString().replace("T", " ").replace(/\.\d+Z$/, " UTC");
      if (t.title !== utc) faults.push(`a time's title is ${JSON.stringify(t.title)}, not ${utc}`);
      if (!/GMT\+5:30|IST/.test(t.textContent)) faults.push(`a time is not in the browser's zone: ${t.textContent}`);
    }
    return faults;
  });
}

async function forPeople(browser) {
  const context = await browser.newContext({ viewport: { width: 390, height: 844 }, timezoneId: "Asia/Kolkata" });
  const page = await context.newPage();
  page.setDefaultTimeout(20000);
  watch(page);
  try {
    step = "at 390 px: the sign-in page fits; sign in";
    await page.goto(base + "/console/signin");
    const signinFaults = await layoutFaults(page);
    check(signinFaults.length === 0, signinFaults.join("; "));
    await signIn(page, key);

    step = "the console's icon is served";
    const icon = await page.getAttribute('link[rel="icon"]', "href");
    const svg = await page.request.get(base + icon);
    check(svg.status() === 200 && svg.headers()["content-type"] === "image/svg+xml", `the page's icon is served (${svg.status()})`);
    const ico = await page.request.get(base + "/favicon.ico");
    check(ico.status() === 200 && ico.headers()["content-type"] === "image/x-icon", `/favicon.ico is served (${ico.status()})`);

    for (const url of ["/console/tools", "/console/tools/save_meal", "/console/agents", "/console/agents/assistant",
      "/console/calls", "/console/calls/c1", "/console/health"]) {
      step = `at 390 px, ${url}: no sideways scroll, every scroll area reachable and named, times in the browser's zone`;
      await page.goto(base + url);
      await page.waitForLoadState("load");
      check(await page.evaluate(() => new Date().getTimezoneOffset() === -330), "the browser is in India's time zone (UTC+5:30)");
      const found = await layoutFaults(page);
      check(found.length === 0, found.join("; "));
      if (url === "/console/calls/c1") {
        check((await page.locator("#timeline time[data-local]").count()) === 3, "each timeline row's time is shown in the browser's zone");
      }
      await shot(page, `narrow${url.replace(/\//g, "-")}`);
    }

    step = "the tool editor's line numbers scroll with it";
    await page.goto(base + "/console/tools/save_meal");
    await page.locator("#diagnostics #valid").waitFor();
    const gutter = page.locator(".editor .gutter");
    // Longer than the box: blank lines after the JSON (this context's draft, kept apart).
    await page.fill("#definition", (await page.inputValue("#definition")) + "\n".repeat(60));
    const text = await page.inputValue("#definition");
    check((await gutter.textContent()).trim().split("\n").length === text.split("\n").length, "the gutter numbers every line");
    const [top, numbersTop] = await page.evaluate(() => {
      const t = document.getElementById("definition");
      t.scrollTop = t.scrollHeight;
      t.dispatchEvent(new Event("scroll"));
      return [t.scrollTop, document.querySelector(".editor .gutter").scrollTop];
    });
    check(top > 0 && Math.abs(top - numbersTop) <= 1, `the gutter scrolls with the text (${top}, ${numbersTop})`);

    step = "a diff of two versions is single-spaced, its unchanged lines folded until opened";
    await page.selectOption('#diff-form select[name="a"]', "1");
    await page.selectOption('#diff-form select[name="b"]', "2");
    await page.click('#diff-form button[type="submit"]');
    await page.locator("#diff .diff .added").first().waitFor();
    const spacing = await page.evaluate(() => {
      const lines = [...document.querySelectorAll("#diff .diff > span")].slice(0, 2).map((s) => s.getBoundingClientRect());
      return { gap: lines[1].top - lines[0].bottom, height: lines[0].height,
        font: parseFloat(getComputedStyle(document.querySelector("#diff .diff")).fontSize) };
    });
    check(Math.abs(spacing.gap) < 1 && spacing.height <= spacing.font * 1.6, `one line per line: ${JSON.stringify(spacing)}`);
    const folded = page.locator("#diff details.unchanged").first();
    check(!(await folded.evaluate((d) => d.open)), "unchanged lines are folded");
    await folded.locator("summary").click();
    check(await folded.evaluate((d) => d.open), "a click opens them");
    const found = await layoutFaults(page);
    check(found.length === 0, found.join("; "));
    await shot(page, "narrow-diff");

    step = "at 390 px, the admin's tenants page";
    await page.click("header button:has-text('Sign out')");
    await page.waitForURL("**/console/signin");
    await page.fill('input[name="key"]', adminKey);
    await page.click('button[type="submit"]');
    await page.waitForURL("**/console/admin/tenants");
    const tenantsFaults = await layoutFaults(page);
    check(tenantsFaults.length === 0, tenantsFaults.join("; "));
  } finally {
    await context.close();
  }
}

async function main(page, browser) {
  step = "a wrong key is refused on the sign-in page";
  expect(401, "/console/signin");
  await page.goto(base + "/console/signin");
  await page.fill('input[name="key"]', "sb_not_a_key");
  await page.click('button[type="submit"]');
  await page.locator("#signin-error").waitFor();
  check((await page.textContent("#signin-error")).includes("not valid"), "the sign-in error names the problem");

  step = "sign in with the tenant key; the tools list shows the tool";
  await signIn(page, key);
  check((await page.textContent("header .tenant")).includes("acme"), "the header names the tenant");
  const toolLink = page.locator('#tools a[href="/console/tools/save_meal"]');
  await toolLink.waitFor();
  check((await page.textContent("#tools")).includes("v1"), "the tools list shows version 1");
  await shot(page, "tools");

  step = "open the tool: the editor holds its definition and the draft validates";
  await toolLink.click();
  await page.waitForURL("**/console/tools/save_meal");
  const editor = page.locator("#definition");
  const original = await editor.inputValue();
  check(JSON.parse(original).name === "save_meal", "the editor holds save_meal's definition");
  await page.locator("#diagnostics #valid").waitFor();

  step = "an error in the editor shows a diagnostic at its place";
  const broken = original.replace('"type": "validate"', '"type": "validat"');
  check(broken !== original, "the definition has a validate action to break");
  await editor.fill(broken);
  const problem = page.locator("#diagnostics .problem").first();
  await problem.waitFor();
  const line = broken.split("\n").findIndex((l) => l.includes('"validat"')) + 1;
  check((await problem.getAttribute("data-line")) === String(line), `the problem is placed on line ${line}`);
  const text = await problem.textContent();
  check(text.includes(`line ${line}, column`), `the problem names line ${line}: ${text}`);
  check(text.includes("/actions/0/type"), `the problem names its pointer: ${text}`);
  check(text.includes("did you mean `validate`"), `the problem suggests the fix: ${text}`);
  await problem.click();
  const selected = await editor.evaluate((t) => t.value.slice(t.selectionStart, t.selectionEnd));
  check(selected.includes('"validat"'), `clicking the problem selects its line in the editor: ${selected}`);
  await shot(page, "editor-diagnostic");

  step = "fix the error with a new message: no problems";
  const fixed = original.replace("I've logged your {{params.meal_type}}!", "Noted your {{params.meal_type}}.");
  check(fixed !== original, "the definition has the message to change");
  await editor.fill(fixed);
  await page.locator("#diagnostics #valid").waitFor();
  check((await page.locator("#diagnostics .problem").count()) === 0, "no problem is left");

  step = "an unsaved draft survives a reload";
  await page.reload();
  await page.locator("#draft-note").waitFor();
  check((await editor.inputValue()) === fixed, "the reloaded editor holds the unsaved draft");
  check((await page.textContent("#draft-note")).includes("Restored your unsaved draft"), "the page says it restored the draft");
  await page.locator("#diagnostics #valid").waitFor();

  step = "replay the recorded calls against the draft and read the diff";
  await page.click("#replay-button");
  const summary = page.locator("#replay-summary");
  await summary.waitFor();
  const said = (await summary.textContent()).replace(/\s+/g, " ");
  check(new RegExp(`${recorded} invocation\\(s\\) from 1 call\\(s\\) replayed \\(the tool's last 50 calls`).test(said),
    `every recorded invocation of the tool's last calls is replayed, and the page says how many calls: ${said}`);
  const changed = Number((said.match(/(\d+) changed/) || [])[1]);
  check(changed >= 1, `the changed message changes some calls: ${said}`);
  check((await page.locator("#replay details.replayed.changed").count()) === changed, "each changed call is shown");
  const added = await page.locator("#replay details.changed .diff .added").first().textContent();
  const removed = await page.locator("#replay details.changed .diff .removed").first().textContent();
  check(added.includes("Noted your"), `the diff adds the new answer: ${added}`);
  check(removed.includes("I've logged your"), `the diff removes the old answer: ${removed}`);
  await page.locator("#replay").scrollIntoViewIfNeeded();
  await shot(page, "replay");

  step = "publish the draft with a change note";
  await page.fill("#note", "a shorter answer");
  await page.click("#publish-button");
  await page.locator("#published-version").waitFor();
  check((await page.textContent("#published-version")).includes("version 2"), "publishing makes version 2");
  await page.goto(base + "/console/tools");
  check((await page.textContent("#tools")).includes("v2"), "the tools list shows version 2");

  step = "a published draft is not restored; the versions list shows the note and the publisher";
  await page.goto(base + "/console/tools/save_meal");
  await page.locator("#diagnostics #valid").waitFor();
  check(await page.locator("#draft-note").isHidden(), "no draft is restored after publishing");
  const v2row = await page.textContent("#version-2");
  check(v2row.includes("a shorter answer") && v2row.includes("console (key "), `version 2 shows its note and publisher: ${v2row}`);

  step = "a draft that newly fails recorded calls asks before publishing, listing them";
  await editor.fill(fixed.replace("length > 0", "length > 99"));
  await page.locator("#diagnostics #valid").waitFor();
  await page.click("#publish-button");
  await page.locator("#confirm-publish").waitFor();
  check((await page.locator('#newly-failing a[href="/console/calls/c1"]').count()) >= 1, "the confirmation links the newly failing call's timeline");
  await shot(page, "confirm-publish");
  await page.click("#publish-cancel");
  await page.locator("#confirm-publish").waitFor({ state: "detached" });
  check(JSON.parse(await api("GET", "/v1/tools/save_meal")).version === 2, "cancelling publishes nothing");

  step = "roll back to version 1 from the versions list";
  await page.goto(base + "/console/tools/save_meal");
  await page.locator("#version-1 button.rollback").click();
  await page.locator("#published-version").waitFor();
  const rolled = await page.textContent("#published-version");
  check(rolled.includes("Rolled back") && rolled.includes("version 3") && rolled.includes("rollback to v1"), `the rollback makes version 3: ${rolled}`);
  const v3 = JSON.parse(await api("GET", "/v1/tools/save_meal"));
  check(v3.version === 3 && v3.note === "rollback to v1", "the API shows the rollback as version 3 with its note");
  await page.goto(base + "/console/tools/save_meal");
  check((await editor.inputValue()).includes("I've logged your"), "the editor holds version 1's definition again");
  check(await page.locator("#draft-note").isHidden(), "no stale draft is restored over the rollback");

  step = "the agent page shows its tools and toolset, not its secrets";
  await page.goto(base + "/console/agents");
  await page.click('a[href="/console/agents/assistant"]');
  await page.waitForURL("**/console/agents/assistant");
  check((await page.textContent("main")).includes("set (write-only)"), "the sensitive config is shown as set only");
  check((await page.textContent("#toolset")).includes("save_meal"), "the toolset preview lists save_meal");
  check(!(await page.content()).includes("sk-"), "no secret on the agent page");
  await shot(page, "agent");

  await agentEditing(page);
  await forPeople(browser);

  step = "the calls list shows the recorded and the live call";
  await page.goto(base + "/console/calls");
  await page.locator(`#calls a[href="/console/calls/${liveCall}"]`).waitFor();
  check((await page.locator("#calls tbody tr").count()) >= 2, "both calls are listed");
  await shot(page, "calls");

  step = "the calls list filters by outcome";
  await page.selectOption('select[name="outcome"]', "failed");
  await page.click('form.filters button[type="submit"]');
  await page.waitForURL("**/console/calls?*outcome=failed*");
  check((await page.locator('#calls a[href="/console/calls/c1"]').count()) === 1, "the call with a failed invocation is listed");
  check((await page.locator(`#calls a[href="/console/calls/${liveCall}"]`).count()) === 0, "the call without failures is not");
  await page.selectOption('select[name="outcome"]', "ok");
  await page.click('form.filters button[type="submit"]');
  await page.waitForURL("**/console/calls?*outcome=ok*");
  check((await page.locator('#calls a[href="/console/calls/c1"]').count()) === 0, "the failed call is not listed as ok");
  await page.locator(`#calls a[href="/console/calls/${liveCall}"]`).waitFor();

  step = "the calls list shows a new call without a reload";
  const listStream = page.waitForResponse((r) => r.url().includes("/console/calls-live"));
  await page.goto(base + "/console/calls");
  check((await listStream).status() === 200, "the list's event stream is open");
  check((await page.locator('#calls a[href="/console/calls/from-browser"]').count()) === 0, "the new call is not there yet");
  await api("POST", "/v1/calls", { call_id: "from-browser", from: "+14155550123", user: { id: "browser-user" } });
  await page.locator('#calls a[href="/console/calls/from-browser"]').waitFor({ timeout: 10000 });
  check((await page.textContent("#calls-rows")).includes("+14155550123"), "its number is shown");
  await api("DELETE", "/v1/calls/from-browser");
  await page.locator('#call-from-browser td.ended').waitFor({ timeout: 10000 });

  step = "the calls list searches by number and by user id";
  await page.fill('input[name="number"]', "+14155550123");
  await page.click('#call-search button[type="submit"]');
  await page.waitForURL("**/console/calls?*number=%2B14155550123*");
  check((await page.locator("#calls tbody tr").count()) === 1, "one call has that number");
  await page.locator('#calls a[href="/console/calls/from-browser"]').waitFor();
  check((await page.inputValue('input[name="number"]')) === "+14155550123", "the form keeps the search");
  await page.goto(base + "/console/calls?user_id=browser-user");
  await page.locator('#calls a[href="/console/calls/from-browser"]').waitFor();
  check((await page.locator("#calls tbody tr").count()) === 1, "one call has that user");

  step = "the calls list pages both ways";
  await page.goto(base + "/console/calls?limit=1");
  const newest = await page.textContent("#calls tbody tr a");
  check((await page.locator("#calls-previous").count()) === 0, "the newest page has no newer one");
  await page.click("#calls-next");
  await page.waitForURL("**/console/calls?*after=*");
  const older = await page.textContent("#calls tbody tr a");
  check(older !== newest, `the next page shows an older call (${older}, after ${newest})`);
  await page.click("#calls-previous");
  await page.waitForURL("**/console/calls?*before=*");
  check((await page.textContent("#calls tbody tr a")) === newest, "the previous page is the newest again");

  step = "a bad Since value says what to write";
  expect(400, "/console/calls");
  await page.goto(base + "/console/calls");
  await page.fill('input[name="since"]', "last tuesday");
  await page.click('#call-search button[type="submit"]');
  await page.locator("#calls-error").waitFor();
  const sinceError = await page.textContent("#calls-error");
  check(sinceError.includes("`since`") && sinceError.includes("RFC 3339"), `the error names the field and the fix: ${sinceError}`);
  check((await page.inputValue('input[name="since"]')) === "last tuesday", "the form keeps what was typed");
  check(!(await page.textContent("main")).includes("No calls match"), "a bad search is not shown as an empty list");
  await shot(page, "calls-search");
  await page.goto(base + "/console/calls");
  await page.locator(`#calls a[href="/console/calls/${liveCall}"]`).waitFor();

  step = "a live call's timeline updates while the HTTP door runs its tools";
  // The page's event stream answers before the first invocation is made.
  const stream = page.waitForResponse((r) => r.url().includes(`/console/calls/${liveCall}/events`));
  await page.click(`#calls a[href="/console/calls/${liveCall}"]`);
  await page.waitForURL(`**/console/calls/${liveCall}`);
  check((await stream).status() === 200, "the timeline's event stream is open");
  check((await page.textContent("#call-status")) === "live", "the call is shown live");
  check((await page.locator("#timeline tbody tr").count()) === 0, "the live call has no invocation yet");
  check((await page.textContent("#call-total")) === "0", "the call counts no invocation yet");
  await api("POST", `/v1/calls/${liveCall}/invocations`, {
    function_call_id: "live-1",
    name: "save_meal",
    arguments: { meal_type: "dinner", dishes: ["rice"] },
  });
  const first = page.locator("#timeline tbody tr#fc-live-1");
  await first.waitFor();
  check((await first.textContent()).includes("save_meal"), "the new row names the tool");
  check((await first.getAttribute("class")) === "ok", "the new row is ok");
  check(
    (await first.locator("td.output").textContent()).includes("logged your dinner"),
    "the new row shows what the model received",
  );
  // The tool wrote the context: the Context box follows without a reload.
  await page.waitForFunction(() => document.getElementById("call-context").textContent.includes("rice"));
  await api("POST", `/v1/calls/${liveCall}/invocations`, {
    function_call_id: "live-2",
    name: "save_meal",
    arguments: { meal_type: "breakfast", dishes: [] },
  });
  await page.locator("#timeline tbody tr#fc-live-2").waitFor();
  check((await page.locator("#timeline tbody tr").count()) === 2, "each invocation is one row, in order");
  check(
    (await page.locator("#timeline tbody tr").nth(1).getAttribute("id")) === "fc-live-2",
    "the second invocation is the second row",
  );
  check((await page.textContent("#call-total")) === "2", "the call's count follows its invocations");
  await shot(page, "call-timeline");
  await api("DELETE", `/v1/calls/${liveCall}`);
  await page.waitForFunction(() => document.getElementById("call-status").textContent === "ended");

  step = "a long call's timeline loads its earlier invocations, a page at a time, to the first";
  {
    const long = "long-call";
    const n = 450;
    await api("POST", "/v1/calls", { call_id: long });
    for (let i = 0; i < n; i++) {
      await api("POST", `/v1/calls/${long}/invocations`, {
        function_call_id: `l${i}`,
        name: "save_meal",
        arguments: { meal_type: "lunch", dishes: [`dish ${i}`] },
      });
    }
    await page.goto(`${base}/console/calls/${long}`);
    const ids = () => page.$$eval("#timeline tbody tr[id^='fc-']", (trs) => trs.map((t) => t.id));
    let shown = await ids();
    check(shown.length === 200, `the page shows the newest 200 invocations (${shown.length})`);
    check(shown[0] === "fc-l250" && shown[199] === "fc-l449", "the newest, oldest first");
    check(
      (await page.textContent("#timeline-more")).includes(`Showing 200 of ${n} invocations`),
      "the page says how many invocations it shows of the call's",
    );
    check((await page.textContent("#load-earlier")).includes("250 earlier"), "the table says how many are not shown");
    check(
      (await page.locator("tr#fc-l449 td.output").textContent()).includes("logged your lunch"),
      "each row shows what the model received",
    );
    await shot(page, "call-long-timeline");
    await page.click("#load-earlier button");
    await page.locator("tr#fc-l50").waitFor();
    shown = await ids();
    check(shown.length === 400 && shown[0] === "fc-l50", `200 earlier invocations are added at the top (${shown.length})`);
    check((await page.textContent("#load-earlier")).includes("50 earlier"), "the table says how many remain");
    check((await page.textContent("#timeline-more")).includes(`Showing 400 of ${n}`), "the notice counts the rows added");
    await page.click("#load-earlier button");
    await page.locator("tr#fc-l0").waitFor();
    shown = await ids();
    const every = Array.from({ length: n }, (_, i) => `fc-l${i}`);
    check(JSON.stringify(shown) === JSON.stringify(every), "every invocation once, in order, to the first");
    check((await page.locator("#load-earlier").count()) === 0, "nothing earlier is offered at the first");
    check((await page.textContent("#timeline-more")).includes(`Showing ${n} of ${n}`), "the notice says every invocation is shown");
    await api("DELETE", `/v1/calls/${long}`);
  }

  step = "health shows the tool's invocations";
  await page.goto(base + "/console/health");
  const health = await page.textContent("main");
  check(health.includes("save_meal"), "health lists save_meal");
  check(/\d+ invocations/.test(health), "health counts invocations");
  await shot(page, "health");

  step = "a call's timeline stops following when its session's key is revoked";
  {
    const watcher = await browser.newContext({ viewport: { width: 1200, height: 800 } });
    const watching = await watcher.newPage();
    watch(watching);
    watching.setDefaultTimeout(20000);
    await signIn(watching, watchKey);
    const opened = watching.waitForResponse((r) => r.url().includes(`/console/calls/${watchCall}/events`));
    await watching.goto(`${base}/console/calls/${watchCall}`);
    check((await opened).status() === 200, "the watched call's event stream is open");
    await api("POST", `/v1/calls/${watchCall}/invocations`, {
      function_call_id: "watch-1",
      name: "save_meal",
      arguments: { meal_type: "lunch", dishes: ["soup"] },
    });
    await watching.locator("#timeline tbody tr#fc-watch-1").waitFor();
    await api("DELETE", `/v1/api-keys/${watchKeyId}`);
    const note = watching.locator('#timeline-note[data-reason="signedout"]');
    await note.waitFor();
    check((await note.textContent()).includes("Sign in again"), "the page says the session ended and what to do");
    await api("POST", `/v1/calls/${watchCall}/invocations`, {
      function_call_id: "watch-2",
      name: "save_meal",
      arguments: { meal_type: "dinner", dishes: ["rice"] },
    });
    // Longer than several polls: a stream that still followed would have shown the row.
    await watching.waitForTimeout(2000);
    check((await watching.locator("#timeline tbody tr#fc-watch-2").count()) === 0, "nothing recorded after the revocation reaches the page");
    await shot(watching, "call-signed-out");
    await watching.reload();
    await watching.waitForURL("**/console/signin");
    await watcher.close();
  }

  step = "connect an agent's Google Calendar: the consent site sends the browser back, and the page says whose connection it is";
  await page.goto(`${base}/console/agents/${googleAgent}`);
  check((await page.textContent("#connections")).includes("never connected"), "the agent page shows the calendar never connected");
  await page.click('#connections a:has-text("Connect")');
  await page.waitForURL(`**/console/agents/${googleAgent}/connections/google_calendar`);
  const connectFor = await page.textContent("#connect-for");
  check(connectFor.includes(googleAgent) && connectFor.includes("acme"), `the page names the agent and the tenant: ${connectFor}`);
  // The simulator consents at once with a redirect; Google shows a page whose "Allow" the user
  // clicks, so the way back is a navigation started on Google's site. The consent page here is
  // made so: the simulator's answer becomes a page on its site with that link, clicked below.
  await page.route(`${consentSite}**`, async (route) => {
    const answer = await route.fetch({ maxRedirects: 0 });
    const back = answer.headers()["location"] || "";
    const href = back.replace(/&/g, "&amp;").replace(/"/g, "&quot;");
    await route.fulfill({ status: 200, contentType: "text/html", body: `<a id="allow" href="${href}">Allow</a>` });
  });
  await page.click("#connect-button");
  await page.waitForURL(`${consentSite}**`);
  await page.click("#allow");
  await page.waitForURL("**/v1/oauth/callback?**");
  const connected = await page.textContent("body");
  check(
    connected.includes(`Connected: tenant \`acme\`, agent \`${googleAgent}\``),
    `the callback, reached from the consent site, completes in this browser: ${connected}`,
  );
  await page.goto(`${base}/console/agents/${googleAgent}`);
  const connectionsShown = await page.textContent("#connections");
  check(
    connectionsShown.includes("Reconnect") && connectionsShown.includes("ok") && connectionsShown.includes("last refresh"),
    `the agent page shows the calendar connected, with its last refresh: ${connectionsShown}`,
  );
  await shot(page, "agent-connected");

  step = "a call books through the connected calendar, and the call's timeline links to the event";
  await api("POST", "/v1/calls", { call_id: "booking-call", agent: googleAgent, from: "+14155550100" });
  const booked = JSON.parse(
    await api("POST", "/v1/calls/booking-call/invocations", {
      function_call_id: "book-1",
      name: "create_event",
      arguments: { title: "Checkup", start_time: "2030-01-07T10:00:00Z", duration_minutes: 30 },
    }),
  );
  check(booked.ok === true && booked.result.data.created === true, `the booking is made: ${JSON.stringify(booked)}`);
  const eventLink = booked.result.data.link;
  check(typeof eventLink === "string" && eventLink.startsWith("https://"), `the answer links the event: ${JSON.stringify(booked)}`);
  await page.goto(`${base}/console/calls/booking-call`);
  const bookingLink = page.locator("#timeline tbody tr#fc-book-1 a.booking-link");
  await bookingLink.waitFor();
  check((await bookingLink.getAttribute("href")) === eventLink, "the timeline row links to the event's page in the calendar");
  check((await bookingLink.textContent()).includes(booked.result.data.id), "the link names the event");
  await shot(page, "call-booking-link");

  step = "sign out; the old session cookie, kept and sent again, opens nothing";
  const kept = (await page.context().cookies()).filter((c) => c.name === "sb_console");
  check(kept.length === 1, "the session cookie is set");
  await page.click("header button:has-text('Sign out')");
  await page.waitForURL("**/console/signin");
  await page.goto(base + "/console/tools");
  await page.waitForURL("**/console/signin");
  await page.context().addCookies(kept);
  await page.goto(base + "/console/tools");
  await page.waitForURL("**/console/signin");
  const replayed = await page.request.get(`${base}/console/calls/${liveCall}`, { maxRedirects: 0 });
  check(replayed.status() === 303, `the old cookie is refused (${replayed.status()})`);
  await page.context().clearCookies();

  step = "another tenant sees none of the first tenant's tools or calls";
  expect(404, "/console/calls/");
  await signIn(page, otherKey);
  check((await page.textContent("header .tenant")).includes("other"), "the header names the other tenant");
  check((await page.locator('a[href="/console/tools/save_meal"]').count()) === 0, "no save_meal in the tools list");
  check((await page.textContent("#tools")).includes("No tools yet."), "the other tenant has no tools");
  await page.goto(base + "/console/calls");
  check((await page.textContent("#calls")).includes("No calls match."), "the other tenant has no calls");
  for (const [url, absent] of [
    ["/console/tools/save_meal", "I've logged"],
    ["/console/agents", "assistant"],
    ["/console/health", "save_meal"],
  ]) {
    await page.goto(base + url);
    check(!(await page.textContent("main")).includes(absent), `${url} shows nothing of the first tenant`);
  }
  for (const id of ["c1", liveCall]) {
    const r = await page.goto(`${base}/console/calls/${id}`);
    check(r.status() === 404, `the first tenant's call ${id} is not found for the other (${r.status()})`);
  }
  await page.goto(base + "/console/tools");
  await page.click("header button:has-text('Sign out')");
  await page.waitForURL("**/console/signin");

  step = "the admin key opens the tenants: create one (its key shown once), delete it, sign out";
  await page.fill('input[name="key"]', adminKey);
  await page.click('button[type="submit"]');
  await page.waitForURL("**/console/admin/tenants");
  const tenants = await page.textContent("#tenants");
  check(tenants.includes("acme") && tenants.includes("other"), "the tenants list shows both tenants");
  check(!(await page.textContent("body")).includes("save_meal"), "nothing of a tenant's tools on the admin page");
  await page.fill('#new-tenant input[name="id"]', "walk-new");
  await page.fill('#new-tenant input[name="name"]', "Walk New");
  await page.click("#new-tenant button[type=submit]");
  await page.locator("#created-key").waitFor();
  const shown = await page.textContent("#created-key code.secret");
  check(shown.startsWith("sb_walk-new_"), "the new tenant's first key is shown");
  check((await page.textContent("#tenants")).includes("walk-new"), "the list shows the new tenant");
  await page.goto(base + "/console/admin/tenants");
  check(!(await page.textContent("body")).includes(shown), "the key is not shown again");
  await shot(page, "tenants");
  await page.click('a[href="/console/admin/tenants/walk-new/delete"]');
  await page.waitForURL("**/console/admin/tenants/walk-new/delete");
  await page.fill('#delete-tenant input[name="confirm"]', "walk-new");
  await page.click("#delete-tenant button[type=submit]");
  await page.locator("#deleted").waitFor();
  await page.goto(base + "/console/tools");
  await page.waitForURL("**/console/admin/tenants");
  check(!(await page.textContent("#tenants")).includes("walk-new"), "the deleted tenant is gone");
  await page.click("header button:has-text('Sign out')");
  await page.waitForURL("**/console/signin");
}

(async () => {
  const browser = await chromium.launch({
    executablePath: env("SB_CHROMIUM"),
    headless: true,
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
  const context = await browser.newContext({ viewport: { width: 1200, height: 800 } });
  const page = await context.newPage();
  // Generous: CI runs this beside the other API tests on two cores. Waits end as soon as the
  // page shows what they wait for.
  page.setDefaultTimeout(20000);
  watch(page);
  let failed = null;
  try {
    await main(page, browser);
    step = "every page ran without a script error, a console error or a failed request";
    check(faults.length === 0, `faults: ${faults.join("; ")}`);
  } catch (e) {
    let shown = "";
    try {
      shown = `${page.url()}\n${(await page.textContent("body")).replace(/\s+/g, " ").slice(0, 2000)}`;
    } catch (_) {
      shown = "(the page could not be read)";
    }
    failed = `console in the browser: step "${step}" failed: ${e.message}\npage: ${shown}`;
  } finally {
    await browser.close();
  }
  if (failed) {
    console.error(failed);
    process.exit(1);
  }
  console.log("console in the browser: every step passed");
})().catch((e) => {
  console.error(`console in the browser: step "${step}" failed: ${e.stack || e}`);
  process.exit(1);
});
