/**
 * Workspace checkpoints with real git and real files (docs/api.md, Workspace checkpoints): a turn
 * of the simulated agent that writes, edits and deletes files shows exactly that diff; a revert
 * restores byte for byte (an untracked file and a deleted one included) and can be undone; a user
 * edit after the turn is a conflict; the user's HEAD, index, log, stash and status are untouched;
 * a hostile `.git/config` runs none of its hooks, fsmonitor, filters or signing; a folder that is
 * no git work tree gets a shadow repository; `checkpoints: false` on an agent entry turns them off.
 */
import { createHash } from "node:crypto";
import { chmod, mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { call, eventually } from "../support/gateway.js";
import { useGateway } from "../support/use-gateway.js";
import { userGit } from "../support/user-git.js";
import { createSession, runTurn, submitOk, tempWorkspace, waitStatus } from "../support/turns.js";

// The gateway's data folder (its checkpoint repositories), made by the gateway at its start.
const dataDir = join(tmpdir(), `mooring-data-${process.pid}-${Date.now()}`);
const t = useGateway({
  env: {
    MOORING_POLL_MS: "100",
    MOORING_CHECKPOINTS: "true",
    MOORING_DATA_DIR: dataDir,
    MOORING_CHECKPOINT_MAX_FILE_BYTES: "4096",
    MOORING_AGENTS: JSON.stringify({ plain: { driver: "simulated", checkpoints: false } }),
  },
  cancelOpenTasks: true,
});
const cleanup: string[] = [];

/** A repository with two committed files, a .gitignore, an ignored file and an untracked one. */
async function userRepo(): Promise<string> {
  const ws = await tempWorkspace();
  cleanup.push(ws);
  userGit(ws, ["init", "-q", "-b", "main"]);
  await writeFile(join(ws, "a.txt"), "alpha\nbeta\n");
  await writeFile(join(ws, "b.txt"), "one\ntwo\nthree\n");
  await writeFile(join(ws, ".gitignore"), "ignored/\n");
  userGit(ws, ["add", "-A"]);
  userGit(ws, ["commit", "-q", "-m", "first"]);
  await writeFile(join(ws, "b.txt"), "one\ntwo\nthree\nfour (staged)\n");
  userGit(ws, ["add", "b.txt"]);
  await mkdir(join(ws, "ignored"));
  await writeFile(join(ws, "ignored", "secret.txt"), "not for checkpoints\n");
  await writeFile(join(ws, "untracked.txt"), "mine, not committed\n");
  return ws;
}

/** Every file of the folder but .git, path → sha256 of its bytes. */
async function tree(dir: string, prefix = ""): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const entry of await readdir(join(dir, prefix), { withFileTypes: true })) {
    const rel = prefix ? `${prefix}/${entry.name}` : entry.name;
    if (rel === ".git") continue;
    if (entry.isDirectory()) Object.assign(out, await tree(dir, rel));
    else
      out[rel] = createHash("sha256")
        .update(await readFile(join(dir, rel)))
        .digest("hex");
  }
  return out;
}

/** What the user sees of their repository (refs/mooring aside). */
async function userView(ws: string) {
  return {
    head: userGit(ws, ["rev-parse", "HEAD"]),
    branches: userGit(ws, ["branch", "-a"]),
    log: userGit(ws, ["log", "--exclude=refs/mooring/*", "--all", "--format=%H %s"]),
    stash: userGit(ws, ["stash", "list"]),
    reflog: userGit(ws, ["reflog"]),
    index: createHash("sha256")
      .update(await readFile(join(ws, ".git", "index")))
      .digest("hex"),
    staged: userGit(ws, ["diff", "--cached", "--name-status"]),
  };
}

const status = (ws: string) => userGit(ws, ["status", "--porcelain=v1", "--untracked-files=all"]);

async function eventsOf(sessionId: string): Promise<{ type: string; data: any; taskId: string | null }[]> {
  return t.sql<{ type: string; data: any; taskId: string | null }[]>`
    select type, data, task_id from events where session_id = ${sessionId} order by seq`;
}

afterAll(async () => {
  for (const dir of [...cleanup, dataDir]) await rm(dir, { recursive: true, force: true });
});

describe("a turn in a git work tree", () => {
  it("shows exactly what the turn wrote, edited and deleted; the user's repository is untouched", async () => {
    const ws = await userRepo();
    const view = await userView(ws);
    const statusBefore = status(ws);
    const s = await createSession(t.url, ws);
    const done = await runTurn(
      t.url,
      s,
      "[write new/file.txt 3] [append a.txt 2] [delete b.txt] [writebin bin.dat 100] [write ignored/x.txt 1] [write big.txt 1000]",
    );
    expect(done.status).toBe("completed");

    const diff = await call(t.url, "GET", `/v1/tasks/${done.id}/diff`);
    expect(diff.status).toBe(200);
    expect(diff.body.items.map((f: any) => [f.path, f.status, f.additions, f.deletions, f.binary])).toEqual([
      ["a.txt", "modified", 2, 0, false],
      ["b.txt", "deleted", 0, 4, false],
      ["bin.dat", "added", 0, 0, true],
      ["new/file.txt", "added", 3, 0, false],
    ]);
    const byPath = Object.fromEntries(diff.body.items.map((f: any) => [f.path, f]));
    expect(byPath["bin.dat"].patch).toBe("binary, 100 bytes");
    expect(byPath["new/file.txt"].patch).toContain("+line 1\n+line 2\n+line 3\n");
    expect(byPath["a.txt"].patch).toContain(" beta\n+added 1\n+added 2\n");
    expect(byPath["b.txt"].patch).toContain("-four (staged)\n");
    expect(diff.body).toMatchObject({
      sessionId: s,
      taskId: done.id,
      fromTurn: 0,
      toTurn: 0,
      files: 4,
      additions: 5,
      deletions: 4,
    });
    // big.txt (1000 lines, over 4096 bytes) is left out with a notice; the ignored folder is not looked at.
    expect(diff.body.skipped).toEqual([{ path: "big.txt", reason: "too_large" }]);

    const events = await eventsOf(s);
    const turnDiff = events.filter((e) => e.type === "turn.diff");
    expect(turnDiff).toEqual([
      { type: "turn.diff", taskId: done.id, data: { files: 4, additions: 5, deletions: 4, skipped: 1 } },
    ]);
    // Before the terminal event, like the turn's other events.
    expect(events.findIndex((e) => e.type === "turn.diff")).toBeLessThan(
      events.findIndex((e) => e.type === "task.completed"),
    );

    // HEAD, branches, log, stash, reflog, index: as they were; status shows the agent's work only.
    expect(await userView(ws)).toEqual(view);
    expect(status(ws)).not.toContain("mooring");
    expect(statusBefore).toBe("M  b.txt\n?? untracked.txt\n");
    expect(status(ws)).toBe(
      " M a.txt\nMD b.txt\n?? big.txt\n?? bin.dat\n?? new/file.txt\n?? untracked.txt\n",
    );
    expect(
      userGit(ws, ["for-each-ref", "--format=%(refname)", "refs/mooring/"]).split("\n").filter(Boolean),
    ).toEqual([`refs/mooring/${s}/0/after`, `refs/mooring/${s}/0/before`]);

    // Paged: one file per page, the cursor continues.
    const first = await call(t.url, "GET", `/v1/tasks/${done.id}/diff?limit=1`);
    expect(first.body.items.map((f: any) => f.path)).toEqual(["a.txt"]);
    const second = await call(
      t.url,
      "GET",
      `/v1/tasks/${done.id}/diff?limit=1&cursor=${first.body.nextCursor}`,
    );
    expect(second.body.items.map((f: any) => f.path)).toEqual(["b.txt"]);
    expect((await call(t.url, "GET", `/v1/tasks/${done.id}/diff?cursor=x`)).status).toBe(400);
  }, 120_000);

  it("reverts byte for byte (an untracked file and a deleted one included), and the revert can be undone", async () => {
    const ws = await userRepo();
    const original = await tree(ws);
    const view = await userView(ws);
    const statusBefore = status(ws);
    const s = await createSession(t.url, ws);
    const t0 = await runTurn(
      t.url,
      s,
      "[write src/made.txt 2] [append a.txt 1] [delete untracked.txt] [delete b.txt]",
    );
    expect(t0.status).toBe("completed");
    const t1 = await runTurn(t.url, s, "[writebin data.bin 64] [append src/made.txt 1]");
    expect(t1.status).toBe("completed");
    const afterTurns = await tree(ws);

    // The session diff over both turns.
    const both = await call(t.url, "GET", `/v1/sessions/${s}/diff?fromTurn=0&toTurn=1`);
    expect(both.status).toBe(200);
    expect(both.body.items.map((f: any) => [f.path, f.status])).toEqual([
      ["a.txt", "modified"],
      ["b.txt", "deleted"],
      ["data.bin", "added"],
      ["src/made.txt", "added"],
      ["untracked.txt", "deleted"],
    ]);

    const reverted = await call(t.url, "POST", `/v1/sessions/${s}/revert`, { toTurn: 0 });
    expect(reverted.status).toBe(200);
    expect(reverted.body).toMatchObject({ sessionId: s, revert: 1, toTurn: 0, unrevert: false });
    expect([...reverted.body.restored].sort()).toEqual(["a.txt", "b.txt", "untracked.txt"]);
    expect([...reverted.body.removed].sort()).toEqual(["data.bin", "src/made.txt"]);
    expect(await tree(ws)).toEqual(original);
    expect(status(ws)).toBe(statusBefore);
    expect(await userView(ws)).toEqual(view);
    const ev = (await eventsOf(s)).filter((e) => e.type === "session.reverted");
    expect(ev).toEqual([
      {
        type: "session.reverted",
        taskId: null,
        data: { revert: 1, toTurn: 0, unrevert: false, restored: 3, removed: 2, paths: null, force: false },
      },
    ]);

    // Undo: back to how the turns left it.
    const undone = await call(t.url, "POST", `/v1/sessions/${s}/revert`, { unrevert: true });
    expect(undone.status).toBe(200);
    expect(undone.body).toMatchObject({ revert: 2, unrevert: true });
    expect(await tree(ws)).toEqual(afterTurns);

    // Only some paths: the folder src/ goes back to before turn 1, the rest stays.
    const partial = await call(t.url, "POST", `/v1/sessions/${s}/revert`, { toTurn: 1, paths: ["src"] });
    expect(partial.status).toBe(200);
    expect(partial.body.restored).toEqual(["src/made.txt"]);
    expect(await readFile(join(ws, "src/made.txt"), "utf8")).toBe("line 1\nline 2\n");
    expect(await stat(join(ws, "data.bin")).then(() => true)).toBe(true);

    // Paths must stay inside the workspace; the request names its turn or unrevert, not both.
    for (const paths of [["../etc"], ["/etc/passwd"], [".git/config"]]) {
      const bad = await call(t.url, "POST", `/v1/sessions/${s}/revert`, { toTurn: 0, paths });
      expect(bad.status).toBe(400);
    }
    expect(
      (await call(t.url, "POST", `/v1/sessions/${s}/revert`, { toTurn: 0, unrevert: true })).status,
    ).toBe(400);
    const missing = await call(t.url, "POST", `/v1/sessions/${s}/revert`, { toTurn: 9 });
    expect(missing.status).toBe(404);
    expect(missing.body.error.code).toBe("CHECKPOINT_NOT_FOUND");
  }, 120_000);

  it("answers 409 WORKSPACE_CONFLICT for a file the user changed after the turn, unless force", async () => {
    const ws = await userRepo();
    const s = await createSession(t.url, ws);
    const t0 = await runTurn(t.url, s, "[write c.txt 2] [append a.txt 1]");
    expect(t0.status).toBe("completed");
    await writeFile(join(ws, "c.txt"), "the user's own words\n");
    const refused = await call(t.url, "POST", `/v1/sessions/${s}/revert`, { toTurn: 0 });
    expect(refused.status).toBe(409);
    expect(refused.body.error.code).toBe("WORKSPACE_CONFLICT");
    expect(refused.body.error.paths).toEqual(["c.txt"]);
    // Nothing was written.
    expect(await readFile(join(ws, "c.txt"), "utf8")).toBe("the user's own words\n");
    expect(await readFile(join(ws, "a.txt"), "utf8")).toBe("alpha\nbeta\nadded 1\n");
    // A revert of other paths only is no conflict.
    const aOnly = await call(t.url, "POST", `/v1/sessions/${s}/revert`, { toTurn: 0, paths: ["a.txt"] });
    expect(aOnly.status).toBe(200);
    expect(await readFile(join(ws, "a.txt"), "utf8")).toBe("alpha\nbeta\n");
    const forced = await call(t.url, "POST", `/v1/sessions/${s}/revert`, { toTurn: 0, force: true });
    expect(forced.status).toBe(200);
    await expect(stat(join(ws, "c.txt"))).rejects.toThrow();
    // Not while a turn runs.
    const running = await submitOk(t.url, s, { prompt: "[hang]" });
    expect((await waitStatus(t.url, running.id, "running")).status).toBe("running");
    const busy = await call(t.url, "POST", `/v1/sessions/${s}/revert`, { toTurn: 0 });
    expect(busy.status).toBe(409);
    expect(busy.body.error).toMatchObject({ code: "SESSION_BUSY", reason: "not_idle" });
  }, 120_000);

  it("runs none of a hostile .git/config: hooks, fsmonitor, filters, signing, external diff", async () => {
    const ws = await userRepo();
    const markers = await mkdtemp(join(tmpdir(), "mooring-markers-"));
    cleanup.push(markers);
    const hooks = join(ws, ".git", "evil-hooks");
    await mkdir(hooks);
    const script = async (name: string) => {
      const path = join(hooks, name);
      await writeFile(path, `#!/bin/sh\ntouch ${join(markers, name)}\ncat\n`);
      await chmod(path, 0o755);
      return path;
    };
    for (const hook of [
      "reference-transaction",
      "post-commit",
      "pre-commit",
      "post-checkout",
      "post-index-change",
    ])
      await script(hook);
    const fsmonitor = await script("fsmonitor");
    const clean = await script("clean");
    const smudge = await script("smudge");
    const gpg = await script("gpg");
    const ext = await script("extdiff");
    await writeFile(
      join(ws, ".git", "config"),
      `${await readFile(join(ws, ".git", "config"), "utf8")}
[core]
\thooksPath = ${hooks}
\tfsmonitor = ${fsmonitor}
[filter "evil"]
\tclean = ${clean}
\tsmudge = ${smudge}
\trequired = true
[commit]
\tgpgSign = true
[gpg]
\tprogram = ${gpg}
[diff]
\texternal = ${ext}
`,
    );
    await writeFile(join(ws, ".git", "info", "attributes"), "* filter=evil\n");
    const s = await createSession(t.url, ws);
    const t0 = await runTurn(t.url, s, "[write evil.txt 2] [append a.txt 1]");
    expect(t0.status).toBe("completed");
    const diff = await call(t.url, "GET", `/v1/tasks/${t0.id}/diff`);
    expect(diff.status).toBe(200);
    expect(diff.body.items.map((f: any) => f.path)).toEqual(["a.txt", "evil.txt"]);
    const reverted = await call(t.url, "POST", `/v1/sessions/${s}/revert`, { toTurn: 0 });
    expect(reverted.status).toBe(200);
    expect(await readFile(join(ws, "a.txt"), "utf8")).toBe("alpha\nbeta\n");
    expect(await readdir(markers)).toEqual([]);
  }, 120_000);
});

describe("other workspaces", () => {
  it("a folder that is no git work tree gets a shadow repository under the data folder", async () => {
    const ws = await tempWorkspace();
    cleanup.push(ws);
    await writeFile(join(ws, "notes.md"), "# notes\n");
    const s = await createSession(t.url, ws);
    const t0 = await runTurn(t.url, s, "[append notes.md 1] [write out/x.txt 1]");
    expect(t0.status).toBe("completed");
    const diff = await call(t.url, "GET", `/v1/tasks/${t0.id}/diff`);
    expect(diff.body.items.map((f: any) => [f.path, f.status])).toEqual([
      ["notes.md", "modified"],
      ["out/x.txt", "added"],
    ]);
    await expect(stat(join(ws, ".git"))).rejects.toThrow();
    const shadows = await readdir(join(dataDir, "checkpoints"));
    expect(shadows.length).toBeGreaterThan(0);
    expect((await call(t.url, "POST", `/v1/sessions/${s}/revert`, { toTurn: 0 })).status).toBe(200);
    expect(await tree(ws)).toEqual({ "notes.md": createHash("sha256").update("# notes\n").digest("hex") });
  }, 120_000);

  it("an agent entry with checkpoints: false takes none", async () => {
    const ws = await userRepo();
    const s = await createSession(t.url, ws, { agent: "plain" });
    const t0 = await runTurn(t.url, s, "[write x.txt 1]");
    expect(t0.status).toBe("completed");
    const diff = await call(t.url, "GET", `/v1/tasks/${t0.id}/diff`);
    expect(diff.status).toBe(404);
    expect(diff.body.error.code).toBe("CHECKPOINT_NOT_FOUND");
    expect((await eventsOf(s)).some((e) => e.type === "turn.diff")).toBe(false);
    expect(userGit(ws, ["for-each-ref", "refs/mooring/"])).toBe("");
  }, 120_000);

  it("a session created with checkpoints: false takes none", async () => {
    const ws = await userRepo();
    const created = await call(t.url, "POST", "/v1/sessions", {
      workspace: ws,
      agent: "simulated",
      checkpoints: false,
    });
    expect(created.status).toBe(201);
    expect(created.body.checkpoints).toBe(false);
    const t0 = await runTurn(t.url, created.body.id, "[write x.txt 1]");
    expect(t0.status).toBe("completed");
    expect((await call(t.url, "GET", `/v1/tasks/${t0.id}/diff`)).status).toBe(404);
    expect(userGit(ws, ["for-each-ref", "refs/mooring/"])).toBe("");
    const other = await call(t.url, "POST", "/v1/sessions", { workspace: ws, agent: "simulated" });
    expect(other.body.checkpoints).toBe(true);
  }, 120_000);

  it("two sessions on one workspace each get their turns' checkpoints; archiving collects a session's", async () => {
    const ws = await userRepo();
    const [s1, s2] = [await createSession(t.url, ws), await createSession(t.url, ws)];
    const [a, b] = await Promise.all([
      runTurn(t.url, s1, "[write one.txt 1]"),
      runTurn(t.url, s2, "[write two.txt 1]"),
    ]);
    expect([a.status, b.status]).toEqual(["completed", "completed"]);
    const [da, db2] = await Promise.all([
      call(t.url, "GET", `/v1/tasks/${a.id}/diff`),
      call(t.url, "GET", `/v1/tasks/${b.id}/diff`),
    ]);
    // Each turn's diff holds its own file (and, when the other ran in between, maybe that one too).
    expect(da.body.items.map((f: any) => f.path)).toContain("one.txt");
    expect(db2.body.items.map((f: any) => f.path)).toContain("two.txt");
    expect(
      userGit(ws, ["for-each-ref", "--format=%(refname)", `refs/mooring/${s1}/`])
        .split("\n")
        .filter(Boolean),
    ).toHaveLength(2);
    expect((await call(t.url, "DELETE", `/v1/sessions/${s1}`)).status).toBe(200);
    const rows = async (id: string) =>
      (await t.sql<{ n: number }[]>`select count(*)::int as n from checkpoints where session_id = ${id}`)[0]
        ?.n;
    await eventually(async () => (await rows(s1)) === 0);
    expect(userGit(ws, ["for-each-ref", `refs/mooring/${s1}/`])).toBe("");
    expect(
      userGit(ws, ["for-each-ref", "--format=%(refname)", `refs/mooring/${s2}/`])
        .split("\n")
        .filter(Boolean),
    ).toHaveLength(2);
    expect(await rows(s2)).toBe(2);
  }, 120_000);

  it("a purge deletes a session's checkpoint rows and refs with it, and nobody else's", async () => {
    const ws = await userRepo();
    const [s1, s2] = [await createSession(t.url, ws), await createSession(t.url, ws)];
    expect((await runTurn(t.url, s1, "[write one.txt 1]")).status).toBe("completed");
    expect((await runTurn(t.url, s2, "[write two.txt 1]")).status).toBe("completed");
    const purged = await call(t.url, "DELETE", `/v1/sessions/${s1}?purge=true`);
    expect(purged.status).toBe(200);
    // The archive's own collection may have taken them first: then the purge found none.
    expect([0, 2]).toContain(purged.body.deleted.checkpoints);
    const rows = async (id: string) =>
      (await t.sql<{ n: number }[]>`select count(*)::int as n from checkpoints where session_id = ${id}`)[0]
        ?.n;
    expect(await rows(s1)).toBe(0);
    await eventually(async () => userGit(ws, ["for-each-ref", `refs/mooring/${s1}/`]) === "");
    expect(
      userGit(ws, ["for-each-ref", "--format=%(refname)", `refs/mooring/${s2}/`])
        .split("\n")
        .filter(Boolean),
    ).toHaveLength(2);
    expect(await rows(s2)).toBe(2);
  }, 120_000);
});
