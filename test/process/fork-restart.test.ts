/**
 * Kill -9 of the gateway during a fork's first turn (docs/api.md, Fork and rollback): the fork,
 * its carried history and its source survive whole, the turn is interrupted as any other, the
 * fork's pending branch is applied by the next turn at most once more, and the agent never sees
 * a turn past the fork point.
 */
import { expect, it } from "vitest";
import type { TestDatabase } from "../support/db.js";
import { call, eventually } from "../support/gateway.js";
import { exitedWithOutput, gatewayEnv, Processes, useProcessSuite } from "../support/lifecycle.js";
import { createSession, runTurn, submitPrompt, waitTerminal } from "../support/turns.js";

let db: TestDatabase;
let workspace: string;
const procs = new Processes();
useProcessSuite("ws-fork-restart-", procs, (d, w) => {
  db = d;
  workspace = w;
});

it("kill -9 during a fork's first turn: nothing lost, nothing applied twice", async () => {
  const env = gatewayEnv(db.url, { MOORING_INSTANCE_ID: "fork-restart" });
  const first = await procs.spawn(env);
  await first.waitReady();
  const source = await createSession(first.url, workspace, { agentConfig: { forkPath: "recap" } });
  for (const prompt of ["alpha", "bravo", "charlie"])
    expect((await runTurn(first.url, source, prompt)).status).toBe("completed");
  const fork = await call(first.url, "POST", `/v1/sessions/${source}/fork`, {
    atTurn: 1,
    idempotencyKey: "fork-k9",
  });
  expect(fork.status).toBe(201);
  const forkId = fork.body.id as string;
  const turn = await submitPrompt(first.url, forkId, "[history] [hang]");
  // The agent has started: the fresh conversation with the carried history was announced.
  await eventually(async () => {
    const [row] =
      await db.sql`select count(*)::int as n from events where session_id = ${forkId} and type = 'session.reset'`;
    return row.n > 0 ? true : null;
  });
  first.kill("SIGKILL");
  expect(await exitedWithOutput(first)).toBe("SIGKILL");

  const second = await procs.spawn(env);
  await second.waitReady();
  expect((await waitTerminal(second.url, turn.id)).status).toBe("interrupted");
  // A retried fork (the client never saw its answer) is the same fork, not a second one.
  const again = await call(second.url, "POST", `/v1/sessions/${source}/fork`, {
    atTurn: 1,
    idempotencyKey: "fork-k9",
  });
  expect(again.status).toBe(200);
  expect(again.body.id).toBe(forkId);

  const next = await runTurn(second.url, forkId, "[history]");
  expect(next.status).toBe("completed");
  expect(next.turnIndex).toBe(3);
  expect(next.result.text).not.toContain("charlie");
  // Nothing lost: the carried turns, the source's turns, every seq of both logs.
  const snapshot = (await call(second.url, "GET", `/v1/sessions/${forkId}`)).body;
  expect(snapshot.turns.map((t: any) => [t.turnIndex, t.prompt, t.status])).toEqual([
    [0, "alpha", "completed"],
    [1, "bravo", "completed"],
    [2, "[history] [hang]", "interrupted"],
    [3, "[history]", "completed"],
  ]);
  const sourceTurns = (await call(second.url, "GET", `/v1/sessions/${source}`)).body.turns;
  expect(sourceTurns.map((t: any) => t.prompt)).toEqual(["alpha", "bravo", "charlie"]);
  for (const id of [forkId, source]) {
    const seqs = await db.sql`select seq from events where session_id = ${id} order by seq`;
    expect(seqs.map((r) => Number(r.seq))).toEqual(seqs.map((_, i) => i + 1));
  }
  // Nothing applied twice: one fork for the key, the branch cleared, at most one fresh start per
  // attempt that ran, and none once the branch was applied and saved.
  const [{ n: forks }] =
    await db.sql`select count(*)::int as n from sessions where forked_from->>'sessionId' = ${source}`;
  expect(forks).toBe(1);
  const [row] = await db.sql`select rewind from sessions where id = ${forkId}`;
  expect(row.rewind).toBeNull();
  const resets =
    await db.sql`select task_id from events where session_id = ${forkId} and type = 'session.reset'`;
  expect(resets.length).toBeGreaterThanOrEqual(1);
  expect(resets.filter((r) => r.task_id === turn.id).length).toBeLessThanOrEqual(1);
  expect(resets.length).toBeLessThanOrEqual(2);
}, 300_000);
