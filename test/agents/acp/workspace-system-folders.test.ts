/**
 * Without workspace roots a caller must still not learn the gateway's paths: workspaces under
 * /proc, /sys and /dev, and paths that exist but are not folders, are refused with 400
 * INVALID_WORKSPACE on the `workspace` field at create; and a session's path that later resolves
 * into one of them is refused at agent start (WORKSPACE_NOT_ALLOWED), no agent spawned. The agent
 * is the real ACP test agent, which would report its folder if started.
 */
import { mkdtemp, realpath, rm, symlink, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Gateway } from "../../../src/gateway.js";
import { startSpawnWatchingGateway } from "../../support/agent-gateway.js";
import { useGateway } from "../../support/use-gateway.js";
import { call, repoRoot } from "../../support/gateway.js";
import { createSessionWith, runTurn } from "../../support/turns.js";

const agentScript = join(repoRoot, "test/support/acp-agent.ts");
const tsxLoader = pathToFileURL(createRequire(import.meta.url).resolve("tsx")).href;

// The file's database; its gateway watches what it spawns (startSpawnWatchingGateway).
const suite = useGateway({ start: false });
let gw: Gateway;
let base: string;
let watched: Awaited<ReturnType<typeof startSpawnWatchingGateway>>;

beforeAll(async () => {
  base = await realpath(await mkdtemp(join(tmpdir(), "mooring-sysdirs-")));
  await writeFile(join(base, "a-file"), "not a folder");
  const agents = {
    acp: { driver: "acp", command: process.execPath, args: ["--import", tsxLoader, agentScript] },
  };
  // No MOORING_WORKSPACE_ROOTS: any folder is allowed, but never these.
  watched = await startSpawnWatchingGateway(suite.databaseUrl, { MOORING_AGENTS: JSON.stringify(agents) });
  gw = watched.gw;
});
afterAll(async () => {
  await watched?.stop();
  await rm(base, { recursive: true, force: true });
});

const create = (workspace: string) => call(gw.url, "POST", "/v1/sessions", { workspace, agent: "simulated" });
const sessionCount = async () => Number((await suite.sql`select count(*)::int as n from sessions`)[0].n);

describe("system folders and non-folders at create", () => {
  it.each(["/proc/self/cwd", "/proc/self/fd/1", "/proc", "/sys/kernel", "/dev/shm", "/dev/null"])(
    "%s: 400 INVALID_WORKSPACE, naming only what was sent",
    async (sent) => {
      const before = await sessionCount();
      const r = await create(sent);
      expect(r.status).toBe(400);
      expect(r.body.error).toMatchObject({ code: "INVALID_WORKSPACE", field: "workspace" });
      expect(r.body.error.message).toBe(
        `workspace ${JSON.stringify(sent)} is inside /proc, /sys, /dev, which are never workspaces`,
      );
      expect(JSON.stringify(r.body)).not.toContain(process.cwd());
      expect(await sessionCount()).toBe(before);
    },
  );

  it.each([
    ["/proc/self", "into /proc"],
    ["/proc/self/cwd", "through /proc to an ordinary folder"],
  ])("a symlink to %s (%s) is refused", async (target) => {
    const link = join(base, `to-${target.replaceAll("/", "-")}`);
    await symlink(target, link);
    const r = await create(link);
    expect(r.status).toBe(400);
    expect(r.body.error).toMatchObject({ code: "INVALID_WORKSPACE", field: "workspace" });
    expect(r.body.error.message).not.toContain(String(process.pid));
    expect(r.body.error.message).not.toContain(process.cwd());
  });

  it("a file is not a workspace: 400 INVALID_WORKSPACE", async () => {
    const r = await create(join(base, "a-file"));
    expect(r.status).toBe(400);
    expect(r.body.error).toMatchObject({
      code: "INVALID_WORKSPACE",
      field: "workspace",
      message: `workspace ${JSON.stringify(join(base, "a-file"))} is not a folder`,
    });
  });

  it("a folder, and a path not made yet, are still accepted", async () => {
    expect((await create(base)).status).toBe(201);
    expect((await create(join(base, "not-yet"))).status).toBe(201);
  });
});

describe("system folders at agent start", () => {
  it("a path made a symlink into /proc after create: the turn is refused, no agent started", async () => {
    const folder = join(base, "later-proc");
    const session = await createSessionWith(gw.url, { workspace: folder, agent: "acp" });
    await symlink("/proc/self/cwd", folder);

    const task = await runTurn(gw.url, session.id, "[cwd]");

    expect(task.status).toBe("failed");
    expect(task.error.code).toBe("WORKSPACE_NOT_ALLOWED");
    expect(JSON.stringify(task)).not.toContain(process.cwd());
    expect(watched.spawnedFor(session.id)).toEqual([]);
  });
});
