/**
 * The workspace is checked again when an agent runs, not only when the session was created: a
 * folder swapped for a symlink to somewhere outside the roots (or created as one later) must not
 * get an agent, warm or new. A real ACP agent (test/support/acp-agent.ts) reports where it runs.
 */
import { mkdir, mkdtemp, realpath, rename, rm, symlink } from "node:fs/promises";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Gateway } from "../../../src/gateway.js";
import { startSpawnWatchingGateway, taskEvents } from "../../support/agent-gateway.js";
import { useGateway } from "../../support/use-gateway.js";
import { repoRoot } from "../../support/gateway.js";
import { createSessionWith, runTurn } from "../../support/turns.js";

const agentScript = join(repoRoot, "test/support/acp-agent.ts");
const tsxLoader = pathToFileURL(createRequire(import.meta.url).resolve("tsx")).href;

// The file's database; its gateway watches what it spawns (startSpawnWatchingGateway).
const suite = useGateway({ start: false });
let gw: Gateway;
let base: string;
let root: string;
let outside: string;
let watched: Awaited<ReturnType<typeof startSpawnWatchingGateway>>;

beforeAll(async () => {
  base = await realpath(await mkdtemp(join(tmpdir(), "mooring-spawn-")));
  root = join(base, "root");
  outside = join(base, "outside");
  await mkdir(root);
  await mkdir(outside);
  const agents = {
    acp: { driver: "acp", command: process.execPath, args: ["--import", tsxLoader, agentScript] },
  };
  watched = await startSpawnWatchingGateway(suite.databaseUrl, {
    MOORING_AGENTS: JSON.stringify(agents),
    MOORING_WORKSPACE_ROOTS: root,
  });
  gw = watched.gw;
});
afterAll(async () => {
  await watched?.stop();
  await rm(base, { recursive: true, force: true });
});

const spawnedFor = (sessionId: string) => watched.spawnedFor(sessionId);

/** Replace `path` (a folder) by a symlink to `target`, as an attacker with write access would. */
async function swapForSymlink(path: string, target: string): Promise<void> {
  await rename(path, `${path}.moved`);
  await symlink(target, path);
}

describe("a workspace resolved again at every turn and spawn", () => {
  it("a warm agent's folder swapped for a symlink outside the roots: the next turn does not run", async () => {
    const folder = join(root, "warm");
    await mkdir(folder);
    const session = await createSessionWith(gw.url, { workspace: folder, agent: "acp" });
    const first = await runTurn(gw.url, session.id, "[cwd]");
    expect(first.status).toBe("completed");
    expect(first.result.text).toBe(`cwd: ${folder} session-cwd: ${folder}`);

    await swapForSymlink(folder, outside);
    const second = await runTurn(gw.url, session.id, "[cwd]");

    expect(second.status).toBe("failed");
    expect(second.error.code).toBe("WORKSPACE_NOT_ALLOWED");
    expect(second.error.message).toContain(folder);
    expect(second.error.message).not.toContain(outside);
    // Nothing from the agent: it was not asked to run anything.
    expect((await taskEvents(suite.sql, second.id)).map((e) => e.type)).toEqual([
      "task.queued",
      "task.started",
      "task.failed",
    ]);
    expect(spawnedFor(session.id).map((r) => r.cwd)).toEqual([folder]);
  });

  it("a folder swapped before the first turn: no agent is started", async () => {
    const folder = join(root, "fresh");
    await mkdir(folder);
    const session = await createSessionWith(gw.url, { workspace: folder, agent: "acp" });
    await swapForSymlink(folder, "/");

    const task = await runTurn(gw.url, session.id, "[cwd]");

    expect(task.error).toMatchObject({ code: "WORKSPACE_NOT_ALLOWED" });
    expect(spawnedFor(session.id)).toEqual([]);
  });

  it("a folder missing at creation and later created as a symlink outside: refused", async () => {
    const folder = join(root, "later");
    const session = await createSessionWith(gw.url, { workspace: folder, agent: "acp" });
    expect(session.workspace).toBe(folder);
    await symlink(outside, folder);

    const task = await runTurn(gw.url, session.id, "[cwd]");

    expect(task.error).toMatchObject({ code: "WORKSPACE_NOT_ALLOWED" });
    expect(spawnedFor(session.id)).toEqual([]);
  });

  it("a folder that does not exist fails the turn with a clear start failure", async () => {
    const folder = join(root, "never-made");
    const session = await createSessionWith(gw.url, { workspace: folder, agent: "acp" });

    const task = await runTurn(gw.url, session.id, "[cwd]");

    expect(task.status).toBe("failed");
    expect(task.error).toEqual({
      code: "AGENT_START_FAILED",
      message: `The workspace ${folder} does not exist.`,
      reason: "workspace_missing",
    });
  });

  it("runs the agent in the folder the path resolves to now, and the spawn log says so", async () => {
    const real = join(root, "real");
    await mkdir(real);
    const alias = join(root, "alias");
    const session = await createSessionWith(gw.url, { workspace: alias, agent: "acp" });
    await symlink(real, alias); // inside the roots: allowed

    const task = await runTurn(gw.url, session.id, "[cwd]");

    expect(task.status).toBe("completed");
    expect(task.result.text).toBe(`cwd: ${real} session-cwd: ${real}`);
    expect(spawnedFor(session.id)).toEqual([expect.objectContaining({ cwd: real, workspace: alias })]);
  });
});
