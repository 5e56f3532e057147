/**
 * Workspace checkpoints from the CLI and the SDK (docs/cli.md; docs/api.md, Workspace
 * checkpoints): `mooring diff <task>` prints the turn's changed files and patches,
 * `mooring revert <session> --to-turn N` restores them (exit 4 with the paths on a conflict), and
 * the SDK's `client.tasks.diff`, `run.diff()` and `client.sessions.revert` answer the same.
 */
import { readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, expect, it } from "vitest";
import { MooringClient, WorkspaceConflictError } from "../../src/client/index.js";
import { jsonLines, runCli } from "../support/cli.js";
import { cliFixture } from "../support/cli-fixture.js";
import { createSession, runTurn } from "../support/turns.js";

// The gateway's data folder (its checkpoint repositories), made by the gateway at its start.
const dataDir = join(tmpdir(), `mooring-cli-ckpt-data-${process.pid}-${Date.now()}`);
const t = cliFixture({ MOORING_CHECKPOINTS: "true", MOORING_DATA_DIR: dataDir, MOORING_POLL_MS: "100" });
afterAll(() => rm(dataDir, { recursive: true, force: true }));

const env = () => t.env();

it("mooring diff and mooring revert; the SDK's diff and revert", async () => {
  await writeFile(join(t.workspace, "notes.md"), "first\n");
  const s = await createSession(t.url, t.workspace);
  const t0 = await runTurn(t.url, s, "[append notes.md 2] [write made.txt 1]");
  expect(t0.status).toBe("completed");

  const shown = await runCli(["diff", t0.id], { env: env() });
  expect(shown.code).toBe(0);
  expect(shown.stdout).toContain("added     +1 -0  made.txt\n");
  expect(shown.stdout).toContain("modified  +2 -0  notes.md\n");
  expect(shown.stdout).toContain("2 file(s) changed, 3 addition(s), 0 deletion(s)\n");
  expect(shown.stdout).toContain("+added 1\n+added 2\n");
  const asJson = await runCli(["diff", t0.id, "--json"], { env: env() });
  expect(jsonLines(asJson.stdout)[0].files).toBe(2);

  const client = new MooringClient({ url: t.url });
  const diff = await client.tasks.diff(t0.id);
  expect(diff.items.map((f) => f.path)).toEqual(["made.txt", "notes.md"]);
  const t1 = await client.turns.submit(s, { prompt: "[write late.txt 1]" });
  await t1.done();
  expect((await t1.diff()).items.map((f) => f.path)).toEqual(["late.txt"]);

  // A user edit after the last checkpoint: a conflict, exit 4, the path on stderr.
  await writeFile(join(t.workspace, "made.txt"), "mine\n");
  const refused = await runCli(["revert", s, "--to-turn", "0"], { env: env() });
  expect(refused.code).toBe(4);
  expect(refused.stderr).toContain("changed since the last checkpoint: made.txt");
  await expect(client.sessions.revert(s, { toTurn: 0 })).rejects.toBeInstanceOf(WorkspaceConflictError);
  const forced = await runCli(["revert", s, "--to-turn", "0", "--force"], { env: env() });
  expect(forced.code).toBe(0);
  expect(forced.stdout).toContain("removed  made.txt\n");
  expect(await readFile(join(t.workspace, "notes.md"), "utf8")).toBe("first\n");
  const undone = await client.sessions.revert(s, { unrevert: true });
  expect(undone.unrevert).toBe(true);
  expect(await readFile(join(t.workspace, "made.txt"), "utf8")).toBe("mine\n");
  expect((await runCli(["revert", s], { env: env() })).code).toBe(2);
}, 180_000);
