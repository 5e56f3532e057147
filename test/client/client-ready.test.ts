/**
 * A gateway still starting (listening, its database not there yet, so every call answers 503
 * NOT_READY) is waited for up to `readyTimeoutMs`; past it the call throws NotReadyError.
 * The database is reached through a proxy that refuses until the test lets it through.
 */
import { rm } from "node:fs/promises";
import { pino } from "pino";
import { afterAll, beforeAll, expect, it } from "vitest";
import { MooringClient, NotReadyError } from "../../src/client/index.js";
import { loadConfig } from "../../src/config.js";
import { type Gateway, startGateway } from "../../src/gateway.js";
import { claimTestDatabase, type TestDatabase } from "../support/db.js";
import { testEnv } from "../support/gateway.js";
import { TcpProxy } from "../support/tcp-proxy.js";
import { tempWorkspace } from "../support/turns.js";

let db: TestDatabase;
let dbProxy: TcpProxy;
let gw: Gateway;
let workspace: string;

beforeAll(async () => {
  db = await claimTestDatabase();
  const direct = new URL(db.url);
  dbProxy = await TcpProxy.start(`http://${direct.hostname}:${direct.port || 5432}`);
  dbProxy.refuse = true;
  const viaProxy = new URL(db.url);
  viaProxy.port = new URL(dbProxy.url).port;
  gw = await startGateway(loadConfig(testEnv(viaProxy.toString())), pino({ level: "silent" }));
  workspace = await tempWorkspace();
});

afterAll(async () => {
  await gw?.stop();
  await dbProxy?.close();
  await db?.drop();
  await rm(workspace, { recursive: true, force: true });
});

it("waits for a gateway that is still starting, up to readyTimeoutMs", async () => {
  const impatient = new MooringClient({ url: gw.url, readyTimeoutMs: 300 });
  const refused = await impatient.sessions.create({ workspace, agent: "simulated" }).catch((e) => e);
  expect(refused).toBeInstanceOf(NotReadyError);

  let attempts = 0;
  let secondAttempt: () => void = () => {};
  const retried = new Promise<void>((resolve) => {
    secondAttempt = resolve;
  });
  const patient = new MooringClient({
    url: gw.url,
    readyTimeoutMs: 30_000,
    fetch: (input, init) => {
      if (++attempts === 2) secondAttempt();
      return fetch(input, init);
    },
  });
  const creating = patient.sessions.create({ workspace, agent: "simulated" });
  // Refused once and retried: the gateway is still starting when the client comes back.
  await retried;
  dbProxy.refuse = false;
  await gw.started;
  const session = await creating;
  expect(session.status).toBe("idle");
  expect(attempts).toBeGreaterThanOrEqual(3);
});
