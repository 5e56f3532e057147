/**
 * A second start on a data folder a live gateway owns: real processes started
 * as `npm start` and `npx mooring serve` start them, on the embedded Postgres (DATABASE_URL unset)
 * in a temp data folder. The second exits 2 with one line naming the first (pid, port, URL) and
 * the first keeps serving on its database; after a kill -9 of the owner the next start takes the
 * folder over.
 */
import { existsSync, readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { isRunning } from "../support/agent-gateway.js";
import {
  call,
  eventually,
  type GatewayCommand,
  type GatewayProcess,
  spawnGateway,
} from "../support/gateway.js";
import { runGatewayToExit } from "../support/run-to-exit.js";

let dataDir: string;
let workspace: string;
const started: GatewayProcess[] = [];

beforeAll(async () => {
  dataDir = await mkdtemp(join(tmpdir(), "mooring-lock-"));
  workspace = await mkdtemp(join(tmpdir(), "mooring-lock-ws-"));
});

afterEach(async () => {
  for (const gw of started.splice(0)) {
    if (gw.child.exitCode === null && gw.child.signalCode === null) {
      gw.kill("SIGTERM");
      await gw.exited;
    }
  }
});

afterAll(async () => {
  const pid = postmasterPid();
  if (pid !== null && isRunning(pid)) process.kill(pid, "SIGKILL");
  await rm(dataDir, { recursive: true, force: true });
  await rm(workspace, { recursive: true, force: true });
});

const env = (port = "0") => ({
  DATABASE_URL: "",
  MOORING_DATA_DIR: dataDir,
  HOST: "127.0.0.1",
  PORT: port,
  LOG_LEVEL: "info",
});

function postmasterPid(): number | null {
  const file = join(dataDir, "pg", "postmaster.pid");
  return existsSync(file) ? Number(readFileSync(file, "utf8").split("\n")[0]) : null;
}

async function startOwner(command: GatewayCommand): Promise<GatewayProcess> {
  const gw = await spawnGateway(env(), command);
  started.push(gw);
  await gw.waitReady();
  return gw;
}

/** The owner still answers from its database: a session made before the second start is there. */
async function expectServing(gw: GatewayProcess, sessionId: string): Promise<void> {
  expect((await call(gw.url, "GET", "/readyz")).status).toBe(200);
  expect((await call(gw.url, "GET", `/v1/sessions/${sessionId}`)).status).toBe(200);
}

describe.each([
  ["npm start", "npmStart", "mooring serve", "serve"],
  ["mooring serve", "serve", "npm start", "npmStart"],
] as const)("a gateway started by %s, then %s in the same folder", (_a, first, _b, second) => {
  it("refuses the second start, on the same port or another, and the first keeps its database", async () => {
    const owner = await startOwner(first);
    const postmaster = postmasterPid();
    expect(postmaster).not.toBeNull();
    const session = await call(owner.url, "POST", "/v1/sessions", { workspace, agent: "simulated" });
    expect(session.status).toBe(201);
    const port = new URL(owner.url).port;

    for (const secondPort of [port, "0"]) {
      const refused = await runGatewayToExit(env(secondPort), 60_000, second);
      expect(refused.code).toBe(2);
      const lines = refused.stderr.trim().split("\n");
      expect(lines).toEqual([
        `mooring: another gateway already runs on the data folder ${dataDir} (pid ${owner.child.pid}, port ${port}, ${owner.url}); stop it first, or start this one with another MOORING_DATA_DIR or a DATABASE_URL`,
      ]);
      expect(refused.stdout).not.toContain("stopping a postmaster left behind");
      expect(refused.stdout).not.toContain('"msg":"listening"');
      expect(isRunning(postmaster!)).toBe(true);
      expect(postmasterPid()).toBe(postmaster);
      await expectServing(owner, session.body.id);
    }
  });
});

it("after a kill -9 of the owner the next start takes the folder over, its postmaster stopped", async () => {
  const owner = await startOwner("npmStart");
  const session = await call(owner.url, "POST", "/v1/sessions", { workspace, agent: "simulated" });
  expect(session.status).toBe(201);
  const leftover = postmasterPid();
  owner.kill("SIGKILL");
  expect(await owner.exited).toBe("SIGKILL");
  expect(isRunning(leftover!)).toBe(true);

  const next = await startOwner("serve");
  expect(next.output()).toContain("stopping a postmaster left behind by an earlier gateway");
  await eventually(async () => !isRunning(leftover!));
  await expectServing(next, session.body.id);
});
