/**
 * Chained gateways under the production launcher: the downstream runs as
 * `npm start` runs it (scripts/start.mjs: the bundle of dist/, compiled with V8's code cache), and
 * its follower must reach the upstream over WebSocket, not fall back to polling. Under tsx it
 * always did; in the code-cached bundle the SDK's run-time `import("ws")` failed and the follower
 * polled without a word. The upstream is a real gateway behind a TCP proxy that records every
 * request line, upgrades included.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { afterAll, expect, it } from "vitest";
import type { TestDatabase } from "../support/db.js";
import { repoRoot } from "../support/gateway.js";
import { exitedWithOutput, gatewayEnv, logsWith, Processes, useProcessSuite } from "../support/lifecycle.js";
import { TcpProxy } from "../support/tcp-proxy.js";
import { createSession, submitPrompt, waitTerminal } from "../support/turns.js";
import { useProcessGateway } from "../support/use-gateway.js";

const TOKEN = "upstream-launcher-token-41c2";
const procs = new Processes();
let downDb: TestDatabase;
let workspace: string;
useProcessSuite("mooring-chain-launcher-", procs, (db, ws) => {
  downDb = db;
  workspace = ws;
});

// The upstream's own database.
const upstream = useProcessGateway();
let proxy: TcpProxy | undefined;
afterAll(async () => {
  await proxy?.close();
});

it("follows the upstream turn over WebSocket when the downstream runs under npm start (code cache loaded)", async () => {
  const up = await procs.spawn(gatewayEnv(upstream.databaseUrl, { MOORING_API_TOKENS: TOKEN }));
  await up.waitReady();
  proxy = await TcpProxy.start(up.url);
  const agents = { up: { driver: "mooring", url: proxy.url, tokenEnv: "CHAIN_TOKEN", agent: "simulated" } };
  const env = gatewayEnv(downDb.url, { MOORING_AGENTS: JSON.stringify(agents), CHAIN_TOKEN: TOKEN });

  // A first start builds dist/ if needed and leaves the V8 code cache on its way out; the second
  // loads the bundle from that cache, which is what broke the dynamic import.
  const warm = await procs.spawn(env, "npmStart");
  await warm.waitReady();
  warm.kill("SIGTERM");
  await exitedWithOutput(warm);
  expect(existsSync(join(repoRoot, "dist", "main.bundle.cjs.v8cache"))).toBe(true);

  const down = await procs.spawn(env, "npmStart");
  await down.waitReady();
  const sessionId = await createSession(down.url, workspace, { agent: "up" });
  const task = await submitPrompt(down.url, sessionId, "[deltas 2][sleep 3000][deltas 2]");
  const done = await waitTerminal(down.url, task.id, 120_000);
  expect(done.status, JSON.stringify(done.error)).toBe("completed");

  expect(proxy.requests).toContain("GET /v1/ws");
  expect(proxy.requests.filter((r) => r.includes("waitMs="))).toEqual([]);
  expect(logsWith(down, "by polling")).toEqual([]);
}, 240_000);
