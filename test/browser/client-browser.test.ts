/**
 * The client SDK in a real browser (Chromium through playwright-core): the browser bundle, global
 * fetch and WebSocket, the token as `?access_token=` on the socket (a browser cannot set headers
 * there) and as a header on fetch. The page is one of the gateway's own origin, so no CORS is
 * involved.
 */
import { existsSync } from "node:fs";
import { rm } from "node:fs/promises";
import { build } from "esbuild";
import { type Browser, chromium } from "playwright-core";
import { afterAll, beforeAll, expect, it } from "vitest";
import type { Gateway } from "../../src/gateway.js";
import { createTestDatabase, type TestDatabase } from "../support/db.js";
import { repoRoot, startTestGateway } from "../support/gateway.js";
import { tempWorkspace } from "../support/turns.js";

const executablePath = ["/usr/bin/chromium", "/usr/bin/chromium-browser"].find((p) => existsSync(p));

let db: TestDatabase;
let gw: Gateway;
let workspace: string;
let browser: Browser;
let bundle: string;

beforeAll(async () => {
  db = await createTestDatabase();
  gw = await startTestGateway(db.url, { MOORING_API_TOKENS: "browser-secret" });
  workspace = await tempWorkspace();
  const built = await build({
    entryPoints: [`${repoRoot}/src/client/index.ts`],
    bundle: true,
    platform: "browser",
    format: "iife",
    globalName: "Mooring",
    write: false,
    logLevel: "silent",
  });
  bundle = built.outputFiles[0].text;
  browser = await chromium.launch({ executablePath, args: ["--no-sandbox"] });
});

afterAll(async () => {
  await browser?.close();
  await gw?.stop();
  await db?.drop();
  await rm(workspace, { recursive: true, force: true });
});

it("a browser follows a turn over its WebSocket with ?access_token=, and over SSE and polling", async () => {
  // A page of the gateway's own origin (no CORS), with the bundle added as a script.
  // (page.route would intercept the page's requests, and a WebSocket upgrade under an active route fails.)
  const page = await browser.newPage();
  await page.goto(`${gw.url}/healthz`);
  await page.addScriptTag({ content: bundle });
  // A string, not a function: the page runs it as written (vitest transforms the code of test functions).
  const script = `(async () => {
    const { MooringClient } = globalThis.Mooring;
    const out = { hasNodeWs: typeof globalThis.process !== "undefined" };
    for (const transport of ["ws", "sse", "poll"]) {
      const client = new MooringClient({ url: ${JSON.stringify(gw.url)}, token: "browser-secret", transport });
      const session = await client.sessions.create({ workspace: ${JSON.stringify(workspace)}, agent: "simulated" });
      const run = await client.turns.submit(session.id, { prompt: "[deltas 3]" });
      const types = [];
      const states = [];
      run.on("state", (s) => states.push(s.state));
      for await (const item of run) types.push(item.type);
      const task = await run.done();
      out[transport] = { types, states, status: task.status, text: await run.text() };
    }
    return out;
  })()`;
  const result = (await page.evaluate(script)) as Record<string, unknown>;
  expect(result.hasNodeWs).toBe(false);
  for (const transport of ["ws", "sse", "poll"]) {
    const r = result[transport] as { types: string[]; states: string[]; status: string };
    expect(r.status, transport).toBe("completed");
    expect(r.types[0]).toBe("task.queued");
    expect(r.types.at(-1)).toBe("task.completed");
    expect(r.states.at(-1)).toBe("done");
    if (transport !== "poll") expect(r.states).toContain("streaming");
  }
});
