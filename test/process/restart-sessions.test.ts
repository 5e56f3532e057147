/**
 * Sessions survive a restart of the gateway process: against an external Postgres, and
 * with the embedded one (DATABASE_URL unset), including after kill -9 left its postmaster behind.
 */
import { existsSync, readFileSync } from "node:fs";
import { mkdtemp, realpath, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { call, eventually, type GatewayProcess, spawnGateway } from "../support/gateway.js";
import { logLines } from "../support/lifecycle.js";
import { createSessionWith } from "../support/turns.js";
import { useProcessGateway } from "../support/use-gateway.js";

const spawned: GatewayProcess[] = [];
let workspace: string;

beforeAll(async () => {
  workspace = await realpath(await mkdtemp(join(tmpdir(), "mooring-restart-ws-")));
});
afterAll(async () => {
  for (const gw of spawned) {
    if (gw.child.exitCode === null && gw.child.signalCode === null) {
      gw.kill("SIGKILL");
      await gw.exited;
    }
  }
  await rm(workspace, { recursive: true, force: true });
});

async function start(env: Record<string, string>): Promise<GatewayProcess> {
  const gw = await spawnGateway(env);
  spawned.push(gw);
  await gw.waitReady();
  return gw;
}

/** SIGTERM, and the process exits 0 after a complete shutdown. */
async function stop(gw: GatewayProcess): Promise<void> {
  gw.kill("SIGTERM");
  expect(await gw.exited).toBe(0);
  expect(gw.output()).toContain('"msg":"shutdown: done"');
}

/** Creates sessions of every kind (plain, titled with metadata and config, archived); returns their snapshots. */
async function createSessions(url: string, tag: string): Promise<any[]> {
  const bodies = [
    { workspace, agent: "simulated" },
    {
      workspace: `${workspace}/./`,
      agent: "simulated",
      title: `${tag} titled`,
      metadata: { tag, n: [1, 2] },
      agentConfig: { contextSuffix: true },
    },
    { workspace, agent: "claude-code", title: `${tag} archived` },
  ];
  const created: any[] = [];
  for (const body of bodies) {
    created.push(await createSessionWith(url, body, { "x-request-id": `${tag}-${created.length}` }));
  }
  const archived = await call(url, "DELETE", `/v1/sessions/${created[2].id}`);
  expect(archived.body.status).toBe("archived");
  const snapshots: any[] = [];
  for (const s of created) snapshots.push((await call(url, "GET", `/v1/sessions/${s.id}`)).body);
  return snapshots;
}

async function expectSessions(url: string, expected: any[]): Promise<void> {
  for (const s of expected) {
    const r = await call(url, "GET", `/v1/sessions/${s.id}`);
    expect(r.status).toBe(200);
    expect(r.body).toEqual(s);
  }
  const listed = (await call(url, "GET", "/v1/sessions?limit=200")).body.items.map(
    (s: { id: string }) => s.id,
  );
  for (const s of expected) expect(listed).toContain(s.id);
}

async function bootId(url: string): Promise<string> {
  return (await call(url, "GET", "/readyz")).body.bootId;
}

describe("against an external Postgres", () => {
  const ext = useProcessGateway();

  it("keeps every session across a SIGTERM restart; request log lines carry the request id", async () => {
    const env = ext.env({ LOG_LEVEL: "info" });
    const first = await start(env);
    const sessions = await createSessions(first.url, "ext");
    const firstBoot = await bootId(first.url);

    // Request ids in a real process: every line of a request, the domain's included, carries it.
    // The id is the gateway's own; the client's x-request-id is kept beside it.
    const incoming = logLines(first).find(
      (l) => l.msg === "incoming request" && l.clientRequestId === "ext-1",
    );
    expect(incoming?.reqId).toMatch(/^[0-9a-f-]{36}$/);
    const ofRequest = logLines(first).filter((l) => l.reqId === incoming?.reqId);
    expect(ofRequest.map((l) => l.msg)).toEqual(
      expect.arrayContaining(["incoming request", "session created", "request completed"]),
    );
    expect(ofRequest.find((l) => l.msg === "session created")?.sessionId).toBe(sessions[1].id);

    await stop(first);
    const [instance] = await ext.sql`select stopped_at from instances where boot_id = ${firstBoot}`;
    expect(instance.stoppedAt).toBeInstanceOf(Date);

    const second = await start(env);
    expect(await bootId(second.url)).not.toBe(firstBoot);
    await expectSessions(second.url, sessions);
    expect((await ext.sql`select count(*)::int as n from sessions`)[0].n).toBe(sessions.length);
    await stop(second);
  });
});

describe("with the embedded Postgres (DATABASE_URL unset)", () => {
  let dataDir: string;
  beforeAll(async () => {
    // mkdtemp makes a 0700 folder: as root, the embedded database (run as `postgres`) must still reach it.
    dataDir = await mkdtemp(join(tmpdir(), "mooring-restart-data-"));
  });
  afterAll(async () => {
    const pid = postmasterPid();
    if (pid !== null && running(pid)) process.kill(pid, "SIGKILL");
    await rm(dataDir, { recursive: true, force: true });
  });

  const pidFile = () => join(dataDir, "pg", "postmaster.pid");
  function postmasterPid(): number | null {
    if (!existsSync(pidFile())) return null;
    return Number(readFileSync(pidFile(), "utf8").split("\n")[0]);
  }
  function running(pid: number): boolean {
    try {
      process.kill(pid, 0);
      return true;
    } catch {
      return false;
    }
  }

  it("keeps every session across a SIGTERM restart and after kill -9", async () => {
    const env = {
      DATABASE_URL: "",
      MOORING_DATA_DIR: dataDir,
      HOST: "127.0.0.1",
      PORT: "0",
      LOG_LEVEL: "info",
    };

    const first = await start(env);
    // A new cluster: initdb's, or a copy of the machine's cluster template (db/cluster-template.ts).
    expect(first.output()).toMatch(/initialising embedded postgres|new cluster copied from the template/);
    expect(postmasterPid()).not.toBeNull();
    const sessions = await createSessions(first.url, "emb");
    await stop(first);
    expect(first.output()).toContain('"msg":"embedded postgres stopped"');
    expect(existsSync(pidFile())).toBe(false); // the postmaster shut down cleanly

    const second = await start(env);
    expect(second.output()).not.toMatch(
      /initialising embedded postgres|new cluster copied from the template/,
    );
    await expectSessions(second.url, sessions);
    const more = await createSessions(second.url, "emb2");
    const leftover = postmasterPid();
    expect(leftover).not.toBeNull();

    // kill -9: the gateway dies, its postmaster stays behind holding the data folder.
    second.kill("SIGKILL");
    expect(await second.exited).toBe("SIGKILL");
    expect(running(leftover!)).toBe(true);

    const third = await start(env);
    expect(third.output()).toContain("stopping a postmaster left behind by an earlier gateway");
    await eventually(async () => !running(leftover!));
    expect(postmasterPid()).not.toBe(leftover);
    await expectSessions(third.url, [...sessions, ...more]);
    await stop(third);
    expect(existsSync(pidFile())).toBe(false);
  });
});
