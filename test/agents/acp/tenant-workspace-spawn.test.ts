/**
 * A tenant's own workspace roots hold at every agent start, not only at session create: tenant A
 * makes its session's folder a symlink into tenant B's root (its agent can run `ln -s`), and A's
 * next turn is refused before any agent runs there. The symlink target stays inside the global
 * MOORING_WORKSPACE_ROOTS, so only the tenant check can catch it. The agent is the real ACP test
 * agent (test/support/acp-agent.ts), whose `[ls]` lists the folder it runs in.
 */
import { mkdir, mkdtemp, realpath, rename, rm, symlink, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Gateway } from "../../../src/gateway.js";
import { startSpawnWatchingGateway, taskEvents } from "../../support/agent-gateway.js";
import { useGateway } from "../../support/use-gateway.js";
import { repoRoot } from "../../support/gateway.js";
import { createSessionWith, submitOk, waitTask } from "../../support/turns.js";

const agentScript = join(repoRoot, "test/support/acp-agent.ts");
const tsxLoader = pathToFileURL(createRequire(import.meta.url).resolve("tsx")).href;
const A = "token-tenant-a-workspace";
const B = "token-tenant-b-workspace";
const auth = (token: string) => ({ authorization: `Bearer ${token}` });

// The file's database; its gateway watches what it spawns (startSpawnWatchingGateway).
const suite = useGateway({ start: false });
let gw: Gateway;
let base: string;
let rootA: string;
let rootB: string;
let secretB: string;
let watched: Awaited<ReturnType<typeof startSpawnWatchingGateway>>;

beforeAll(async () => {
  base = await realpath(await mkdtemp(join(tmpdir(), "mooring-tenant-spawn-")));
  rootA = join(base, "a");
  rootB = join(base, "b");
  secretB = join(rootB, "project");
  await mkdir(rootA);
  await mkdir(secretB, { recursive: true });
  await writeFile(join(secretB, "b-secret.txt"), "tenant B only");
  const agents = {
    acp: { driver: "acp", command: process.execPath, args: ["--import", tsxLoader, agentScript] },
  };
  const tenants = {
    alpha: { tokens: [A], workspaceRoots: [rootA] },
    beta: { tokens: [B], workspaceRoots: [rootB] },
  };
  watched = await startSpawnWatchingGateway(suite.databaseUrl, {
    MOORING_AGENTS: JSON.stringify(agents),
    MOORING_TENANTS: JSON.stringify(tenants),
    MOORING_WORKSPACE_ROOTS: base,
  });
  gw = watched.gw;
});
afterAll(async () => {
  await watched?.stop();
  await rm(base, { recursive: true, force: true });
});

const spawnedFor = (sessionId: string) => watched.spawnedFor(sessionId);

async function turn(token: string, sessionId: string, prompt: string): Promise<any> {
  const submitted = await submitOk(gw.url, sessionId, { prompt }, auth(token));
  return waitTask(gw.url, submitted.id, undefined, undefined, auth(token));
}

describe("a tenant's roots checked again at every agent start", () => {
  it("tenant B's agent lists its own folder (the agent would show the files if started)", async () => {
    const session = await createSessionWith(gw.url, { workspace: secretB, agent: "acp" }, auth(B));
    const task = await turn(B, session.id, "[ls]");
    expect(task.status).toBe("completed");
    expect(task.result.text).toBe("ls: b-secret.txt");
  });

  it("a path not made yet, later a symlink into tenant B's root: A's turn is refused at start", async () => {
    const folder = join(rootA, "later");
    const session = await createSessionWith(gw.url, { workspace: folder, agent: "acp" }, auth(A));
    await symlink(secretB, folder);

    const task = await turn(A, session.id, "[ls]");

    expect(task.status).toBe("failed");
    expect(task.error.code).toBe("WORKSPACE_NOT_ALLOWED");
    expect(task.error.message).toContain(folder);
    expect(task.error.message).not.toContain(secretB);
    expect(JSON.stringify(task)).not.toContain("b-secret");
    expect((await taskEvents(suite.sql, task.id)).map((e) => e.type)).toEqual([
      "task.queued",
      "task.started",
      "task.failed",
    ]);
    expect(spawnedFor(session.id)).toEqual([]);
  });

  it("a warm agent's folder swapped for a symlink into B's root: the next turn does not run", async () => {
    const folder = join(rootA, "warm");
    await mkdir(folder);
    await writeFile(join(folder, "a-file.txt"), "tenant A");
    const session = await createSessionWith(gw.url, { workspace: folder, agent: "acp" }, auth(A));
    const first = await turn(A, session.id, "[ls]");
    expect(first.result.text).toBe("ls: a-file.txt");

    await rename(folder, `${folder}.moved`);
    await symlink(secretB, folder);
    const second = await turn(A, session.id, "[ls]");

    expect(second.status).toBe("failed");
    expect(second.error.code).toBe("WORKSPACE_NOT_ALLOWED");
    expect(JSON.stringify(second)).not.toContain("b-secret");
    expect(spawnedFor(session.id).map((r) => r.cwd)).toEqual([folder]);
  });

  it("a symlink inside the tenant's own root still runs, in the folder it resolves to", async () => {
    const real = join(rootA, "real");
    await mkdir(real);
    await writeFile(join(real, "mine.txt"), "A");
    const alias = join(rootA, "alias");
    const session = await createSessionWith(gw.url, { workspace: alias, agent: "acp" }, auth(A));
    await symlink(real, alias);

    const task = await turn(A, session.id, "[ls]");

    expect(task.status).toBe("completed");
    expect(task.result.text).toBe("ls: mine.txt");
  });
});
