/**
 * An attacker's page in a real browser (Debian's chromium through playwright-core): a page served
 * from a second loopback origin (127.0.0.2, standing in for any website the user visits) tries
 * the WebSocket, a preflighted fetch POST, a simple POST and EventSource against a default
 * gateway, and gets nowhere (the database is unchanged). With MOORING_CORS_ORIGINS naming that
 * origin, the same page works, preflighted POST and streams included.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { type Browser, chromium, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Gateway } from "../../src/gateway.js";
import { createTestDatabase, type TestDatabase } from "../support/db.js";
import { startTestGateway } from "../support/gateway.js";
import { createSession } from "../support/turns.js";

const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";

let db: TestDatabase;
let site: Server;
let siteOrigin: string;
let browser: Browser;
let page: Page;

beforeAll(async () => {
  db = await createTestDatabase();
  site = createServer((_req, res) => {
    res.writeHead(200, { "content-type": "text/html" });
    res.end("<!doctype html><title>some website</title><p>nothing to see</p>");
  });
  await new Promise<void>((resolve) => site.listen(0, "127.0.0.2", resolve));
  siteOrigin = `http://127.0.0.2:${(site.address() as AddressInfo).port}`;
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
  page = await browser.newPage();
  await page.goto(`${siteOrigin}/`);
});
afterAll(async () => {
  await browser?.close();
  await new Promise((resolve) => site?.close(resolve));
  await db?.drop();
});

const rows = async () => {
  const [r] = await db.sql`select (select count(*)::int from sessions) as sessions, (select count(*)::int from tasks) as tasks`;
  return r as { sessions: number; tasks: number };
};

interface SocketResult {
  opened: boolean;
  code: number;
  messages: any[];
}

/** In the page: open the gateway's WebSocket, create a session and submit a turn if it can. */
function socketAttempt(api: string): Promise<SocketResult> {
  return page.evaluate(
    (api) =>
      new Promise<SocketResult>((resolve) => {
        const socket = new WebSocket(`${api.replace("http", "ws")}/v1/ws`);
        const messages: any[] = [];
        const send = (id: number, method: string, params: unknown) =>
          socket.send(JSON.stringify({ jsonrpc: "2.0", id, method, params }));
        socket.onmessage = (m) => {
          const message = JSON.parse(m.data);
          messages.push(message);
          if (message.method === "hello") send(1, "sessions.create", { workspace: "/tmp", agent: "simulated" });
          else if (message.id === 1) send(2, "turns.submit", { sessionId: message.result.id, prompt: "[deltas 1]" });
          else if (message.id === 2) socket.close();
        };
        socket.onclose = (e) => resolve({ opened: messages.length > 0, code: e.code, messages });
      }),
    api,
  );
}

/** In the page: a JSON POST (preflighted: its content type is not a simple one). */
function postAttempt(api: string, path: string, body: unknown) {
  return page.evaluate(
    async ({ url, body }) => {
      try {
        const r = await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body });
        return {
          status: r.status,
          body: await r.json(),
          location: r.headers.get("location"),
          requestId: r.headers.get("x-request-id"),
        };
      } catch (err) {
        return { blocked: String(err) };
      }
    },
    { url: `${api}${path}`, body: JSON.stringify(body) },
  );
}

/** In the page: a "simple" POST, which a browser sends without asking first (the answer is opaque). */
function simplePost(api: string, body: unknown) {
  return page.evaluate(
    async ({ url, body }) => {
      try {
        await fetch(url, { method: "POST", mode: "no-cors", headers: { "content-type": "text/plain" }, body });
        return "sent";
      } catch (err) {
        return String(err);
      }
    },
    { url: `${api}/v1/sessions`, body: JSON.stringify(body) },
  );
}

/** In the page: an EventSource on the session's events until `until` arrives or the stream fails. */
function sseAttempt(api: string, sessionId: string, until: string) {
  return page.evaluate(
    ({ url, until }) =>
      new Promise<{ failed: boolean; types: string[] }>((resolve) => {
        const source = new EventSource(url);
        const types: string[] = [];
        source.onmessage = (m) => {
          types.push(JSON.parse(m.data).type);
          if (types.includes(until)) {
            source.close();
            resolve({ failed: false, types });
          }
        };
        source.onerror = () => {
          // A refused stream is not retried: the browser closes it.
          if (source.readyState === EventSource.CLOSED) resolve({ failed: true, types });
        };
      }),
    { url: `${api}/v1/sessions/${sessionId}/events`, until },
  );
}

describe("a page from another origin", () => {
  it("cannot reach a default gateway: WebSocket, fetch POST, simple POST and EventSource are refused, nothing is written", async () => {
    const gw: Gateway = await startTestGateway(db.url);
    try {
      // A session made by a legitimate local client, whose events the page would like to read.
      const own = await createSession(gw.url, "/tmp");
      const before = await rows();

      const socket = await socketAttempt(gw.url);
      expect(socket).toEqual({ opened: false, code: 1006, messages: [] });
      const post = await postAttempt(gw.url, "/v1/sessions", { workspace: "/", agent: "claude-code" });
      expect(post).toEqual({ blocked: expect.stringContaining("Failed to fetch") });
      const turn = await postAttempt(gw.url, `/v1/sessions/${own}/turns`, { prompt: "rm -rf ~" });
      expect(turn).toEqual({ blocked: expect.stringContaining("Failed to fetch") });
      expect(await simplePost(gw.url, { workspace: "/", agent: "claude-code" })).toBe("sent");
      const sse = await sseAttempt(gw.url, own, "task.completed");
      expect(sse).toEqual({ failed: true, types: [] });

      expect(await rows()).toEqual(before);
      expect(before.tasks).toBe(0);
    } finally {
      await gw.stop();
    }
  });

  it("works against a gateway that lists its origin in MOORING_CORS_ORIGINS, preflighted POST included", async () => {
    const gw: Gateway = await startTestGateway(db.url, { MOORING_CORS_ORIGINS: siteOrigin });
    try {
      const before = await rows();

      const socket = await socketAttempt(gw.url);
      expect(socket.opened).toBe(true);
      expect(socket.messages.map((m) => m.method ?? m.id)).toEqual(["hello", 1, 2]);
      expect(socket.messages[2].result).toMatchObject({ status: expect.any(String) });

      const created = await postAttempt(gw.url, "/v1/sessions", { workspace: "/tmp", agent: "simulated" });
      expect(created).toMatchObject({ status: 201, body: { agent: "simulated" }, requestId: expect.any(String) });
      const sessionId = (created as { body: { id: string } }).body.id;
      const turn = await postAttempt(gw.url, `/v1/sessions/${sessionId}/turns`, { prompt: "[deltas 2]" });
      expect(turn).toMatchObject({ status: 202 });
      const task = (turn as { body: { id: string }; location: string }).body;
      // Location is exposed to the page, so it can follow the task.
      expect((turn as { location: string }).location).toBe(`/v1/tasks/${task.id}`);

      const sse = await sseAttempt(gw.url, sessionId, "task.completed");
      expect(sse.failed).toBe(false);
      expect(sse.types).toEqual(expect.arrayContaining(["task.queued", "task.started", "message.delta", "task.completed"]));

      expect(await rows()).toEqual({ sessions: before.sessions + 2, tasks: before.tasks + 2 });
    } finally {
      await gw.stop();
    }
  });
});
