/**
 * Workspace checkpoints across a kill -9 (docs/api.md, Workspace checkpoints): the instance that
 * ran the turn took its "before" and died before its "after"; the next instance to touch the
 * session takes the missing "after" at reconcile, marked as such, and the turn's diff shows what
 * the agent wrote before the kill.
 */
import { execFileSync } from "node:child_process";
import { rm, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { expect, it } from "vitest";
import type { TestDatabase } from "../support/db.js";
import { call, eventually } from "../support/gateway.js";
import { exitedWithOutput, gatewayEnv, Processes, tempDir, useProcessSuite } from "../support/lifecycle.js";
import { createSession, submitPrompt, waitTerminal } from "../support/turns.js";

let db: TestDatabase;
let workspace: string;
const procs = new Processes();
useProcessSuite("ws-ckpt-restart-", procs, (d, w) => {
  db = d;
  workspace = w;
});

it('kill -9 during a turn: the next instance takes the missing "after" at reconcile', async () => {
  const git = (args: string[]) =>
    execFileSync("git", args, {
      cwd: workspace,
      encoding: "utf8",
      env: {
        PATH: process.env.PATH ?? "",
        HOME: workspace,
        GIT_CONFIG_NOSYSTEM: "1",
        GIT_CONFIG_GLOBAL: "/dev/null",
      },
    });
  git(["init", "-q"]);
  await writeFile(join(workspace, "kept.txt"), "kept\n");
  const dataDir = await tempDir("mooring-ckpt-data-");
  try {
    await killedAndReconciled(git, dataDir);
  } finally {
    await rm(dataDir, { recursive: true, force: true });
  }
}, 180_000);

async function killedAndReconciled(git: (args: string[]) => string, dataDir: string): Promise<void> {
  const env = gatewayEnv(db.url, { MOORING_CHECKPOINTS: "true", MOORING_DATA_DIR: dataDir });
  const first = await procs.spawn(env);
  await first.waitReady();
  const s = await createSession(first.url, workspace);
  const task = await submitPrompt(first.url, s, "[write during.txt 2] [hang]");
  // The agent wrote its file and hangs: the "before" was taken, the "after" not yet.
  await eventually(async () => ((await stat(join(workspace, "during.txt")).catch(() => null)) ? true : null));
  const before = await db.sql`select name from checkpoints where session_id = ${s} order by name`;
  expect(before.map((r) => r.name)).toEqual(["0/before"]);
  first.kill("SIGKILL");
  expect(await exitedWithOutput(first)).toBe("SIGKILL");

  const second = await procs.spawn(env);
  await second.waitReady();
  const done = await waitTerminal(second.url, task.id, 120_000);
  expect(done.status).toBe("interrupted");
  const diff = await call(second.url, "GET", `/v1/tasks/${task.id}/diff`);
  expect(diff.status).toBe(200);
  expect(diff.body.to.atReconcile).toBe(true);
  expect(diff.body.from.atReconcile).toBe(false);
  expect(diff.body.items.map((f: any) => [f.path, f.status, f.additions])).toEqual([
    ["during.txt", "added", 2],
  ]);
  const rows = await db.sql`select name, at_reconcile from checkpoints where session_id = ${s} order by name`;
  expect(rows.map((r) => [r.name, r.atReconcile])).toEqual([
    ["0/after", true],
    ["0/before", false],
  ]);
  expect(git(["for-each-ref", "--format=%(refname)", "refs/mooring/"]).trim().split("\n")).toEqual([
    `refs/mooring/${s}/0/after`,
    `refs/mooring/${s}/0/before`,
  ]);
}
