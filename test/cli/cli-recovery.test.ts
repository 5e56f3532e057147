/**
 * Recovery through real processes: `attach` after the CLI itself was killed with kill -9
 * repeats nothing; a gateway killed with kill -9 and restarted mid-run leaves stdout byte-for-byte
 * what an undisturbed run printed up to the cut, and stderr says it restarted.
 */
import { readdir, readFile, rm } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { killAllClis, runCli, spawnCli } from "../support/cli.js";
import type { TestDatabase } from "../support/db.js";
import { call, eventually } from "../support/gateway.js";
import { gatewayEnv, Processes, tempDir, useProcessSuite } from "../support/lifecycle.js";

const procs = new Processes();
let db: TestDatabase;
let workspace: string;
useProcessSuite("mooring-cli-recovery-", procs, (d, w) => {
  db = d;
  workspace = w;
});
afterEach(() => killAllClis());

const runArgs = (prompt: string) => ["run", "--workspace", workspace, "--agent", "simulated", prompt];

describe("mooring attach", () => {
  it("after the CLI was killed with kill -9, resumes without repeating output", async () => {
    const gw = await procs.spawn(gatewayEnv(db.url));
    await gw.waitReady();
    const stateHome = await tempDir("mooring-cli-state-");
    const env = { XDG_STATE_HOME: stateHome, MOORING_URL: gw.url };
    const undisturbed = await runCli(runArgs("[deltas 5] [sleep 2000] [deltas 5]"), { env });
    expect(undisturbed.code).toBe(0);

    const cursors = join(stateHome, "mooring", "cursors");
    const undisturbedFiles = await readdir(cursors);
    const cli = spawnCli(runArgs("[deltas 5] [sleep 2000] [deltas 5]"), { env });
    await cli.waitFor("chunk 5 ");
    // The kill lands after the printed event's cursor is on disk (the CLI saves it right after the
    // output; a kill between the two repeats that one event, as docs/cli.md says): find the event
    // that carried "chunk 5" and wait for the saved cursor to reach it.
    const file = await eventually(async () =>
      (await readdir(cursors)).find((f) => !undisturbedFiles.includes(f)),
    );
    const saved = async () => JSON.parse(await readFile(join(cursors, file), "utf8"));
    const { sessionId } = await eventually(saved);
    const page = await call(gw.url, "GET", `/v1/sessions/${sessionId}/events?afterSeq=0`, undefined, {
      accept: "application/json",
    });
    const printed = page.body.items.find((e: any) => String(e.data?.text ?? "").includes("chunk 5"));
    expect(printed).toBeDefined();
    await eventually(async () => (await saved()).cursor >= printed.seq);
    cli.child.kill("SIGKILL");
    expect(await cli.exited).toBe("SIGKILL");
    const before = cli.stdout();

    // The cursor file names the task: the one this machine followed.
    const files = await readdir(join(stateHome, "mooring", "cursors"));
    const taskIds = files.map((f) => f.replace(/\.json$/, ""));
    expect(taskIds).toHaveLength(2);
    const attaches = await Promise.all(taskIds.map((id) => runCli(["attach", id], { env })));
    const resumed = attaches.find((a) => a.stdout !== "")!;
    expect(resumed.code).toBe(0);
    // The task the first, undisturbed run followed to its end: nothing after its saved cursor.
    expect(attaches.filter((a) => a.stdout === "")).toHaveLength(1);
    expect(before + resumed.stdout).toBe(undisturbed.stdout);
    // --from-start replays the whole answer.
    const again = await runCli(["attach", "--from-start", taskIds[0]], { env });
    expect(again.stdout).toBe(undisturbed.stdout);
    await rm(stateHome, { recursive: true, force: true });
  });
});

describe("a gateway killed with kill -9 mid-run", () => {
  it("stdout matches the undisturbed run up to the cut, stderr says it restarted, exit 1 (interrupted)", async () => {
    const gw = await procs.spawn(gatewayEnv(db.url));
    await gw.waitReady();
    const port = new URL(gw.url).port;
    const stateHome = await tempDir("mooring-cli-state-");
    const env = { XDG_STATE_HOME: stateHome, MOORING_URL: gw.url };
    // What the part before the cut prints when nothing happens.
    const undisturbed = await runCli(runArgs("[deltas 20]"), { env });
    expect(undisturbed.code).toBe(0);

    const cli = spawnCli(runArgs("[deltas 20] [sleep 30000] [deltas 20]"), { env });
    await cli.waitFor("chunk 20 ");
    gw.kill("SIGKILL");
    await gw.exited;
    const again = await procs.spawn(gatewayEnv(db.url, { PORT: port }));
    await again.waitReady();

    expect(await cli.exited).toBe(1);
    expect(cli.stdout()).toBe(undisturbed.stdout);
    expect(cli.stderr()).toMatch(/the gateway restarted/);
    expect(cli.stderr()).toMatch(/after the restart, \d+ event\(s\) were replayed/);
    // Says what became of the turn, in one sentence, and claims nothing else.
    expect(cli.stderr()).toMatch(
      /mooring: the running turn was interrupted \(GATEWAY_RESTART\): the gateway [^.]+; send it again\n/,
    );
    expect(cli.stderr()).not.toMatch(/nothing is lost|\.;/);
    await rm(stateHome, { recursive: true, force: true });
  });
});
