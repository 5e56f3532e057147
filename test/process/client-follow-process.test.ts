/**
 * An app saved its cursor and restarted; a new process follows the task from that
 * cursor and gets only the events after it, live, ending with the terminal event. A process that
 * follows a task that already ended gets its tail and exits at once.
 */
import { spawn } from "node:child_process";
import { rm } from "node:fs/promises";
import { afterAll, expect, it } from "vitest";
import { useGateway } from "../support/use-gateway.js";
import { MooringClient, type MooringEvent } from "../../src/client/index.js";
import { repoRoot } from "../support/gateway.js";

const t = useGateway({ workspace: true });

afterAll(async () => {
  await rm(t.workspace, { recursive: true, force: true });
});

/** Runs the follow script to its end; its printed lines, parsed. */
function followInNewProcess(
  taskId: string,
  afterSeq: number,
): Promise<{ item?: MooringEvent; done?: any }[]> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      ["--import", "tsx", "test/support/follow-script.ts", t.url, taskId, String(afterSeq)],
      {
        cwd: repoRoot,
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    let out = "";
    let err = "";
    child.stdout.on("data", (c) => (out += c));
    child.stderr.on("data", (c) => (err += c));
    child.on("exit", (code) => {
      if (code !== 0) return reject(new Error(`follow script exited ${code}: ${err}`));
      resolve(
        out
          .trim()
          .split("\n")
          .map((l) => JSON.parse(l)),
      );
    });
  });
}

it("a new process follows a running task from a saved cursor: only the events after it, then the terminal one", async () => {
  const client = new MooringClient({ url: t.url });
  const session = await client.sessions.create({ workspace: t.workspace, agent: "simulated" });
  const run = await client.turns.submit(session.id, { prompt: "[deltas 3][sleep 2500][deltas 3]" });
  // The first app saw the first events, saved its cursor, and went away.
  let saved = 0;
  for await (const item of run) {
    const e = item as MooringEvent;
    saved = e.seq;
    if (e.type === "message.delta") break;
  }
  const lines = await followInNewProcess(run.taskId, saved);
  const task = lines.at(-1)!.done;
  expect(task.status).toBe("completed");
  const seqs = lines.filter((l) => l.item).map((l) => l.item!.seq);
  const log = await t.sql<
    { seq: number }[]
  >`select seq from events where task_id = ${run.taskId} and seq > ${saved} order by seq`;
  expect(seqs).toEqual(log.map((r) => r.seq));
  expect(lines.at(-2)!.item!.type).toBe("task.completed");

  // The task has ended: a follower gets the tail after its cursor and ends at once.
  const tail = await followInNewProcess(run.taskId, log[log.length - 3].seq);
  expect(tail.filter((l) => l.item).map((l) => l.item!.seq)).toEqual(log.slice(-2).map((r) => r.seq));
});
