/**
 * Batched admission (domain/admission.ts): submits that arrive together are admitted in one
 * transaction, and each still gets the answer it would have got alone: its own task, the task of an
 * earlier submit with the same idempotency key, SESSION_ARCHIVED / SESSION_NOT_FOUND, or a 429 when
 * the queue is full, with the gate's limits exact.
 */
import { randomUUID } from "node:crypto";
import { expect, it } from "vitest";
import { useGateway } from "../support/use-gateway.js";
import { call } from "../support/gateway.js";
import { cancelOpenTasks, createSession, submit, waitTask } from "../support/turns.js";

const gt = useGateway({
  env: { MOORING_MAX_ACTIVE: "3", MOORING_MAX_QUEUED: "12" },
  workspace: true,
  gateway: {
    logLevel: "debug",
    onLog: (record) => {
      if (record.msg === "admission committed") batches.push(record.submits);
    },
  },
});
const batches: number[] = [];

it("answers each submit of a batch as if it came alone", async () => {
  const open = await Promise.all(Array.from({ length: 8 }, () => createSession(gt.url, gt.workspace)));
  const archived = await createSession(gt.url, gt.workspace);
  expect((await call(gt.url, "DELETE", `/v1/sessions/${archived}`)).status).toBe(200);
  const missing = randomUUID();
  batches.length = 0;

  const [keyed1, keyed2, onArchived, onMissing, ...plain] = await Promise.all([
    submit(gt.url, open[0], { prompt: "[sleep 300] keyed", idempotencyKey: "k-1" }),
    submit(gt.url, open[0], { prompt: "[sleep 300] keyed", idempotencyKey: "k-1" }),
    submit(gt.url, archived, { prompt: "hello" }),
    submit(gt.url, missing, { prompt: "hello" }),
    ...open.slice(1).map((id, i) => submit(gt.url, id, { prompt: `[sleep 300] plain ${i}` })),
  ]);

  // Several submits went in one transaction.
  expect(Math.max(...batches)).toBeGreaterThan(1);

  // One task for the key: one 202, one 200, the same id.
  expect([keyed1.status, keyed2.status].sort()).toEqual([200, 202]);
  expect(keyed1.body.id).toBe(keyed2.body.id);
  expect(onArchived.status).toBe(409);
  expect(onArchived.body.error.code).toBe("SESSION_ARCHIVED");
  expect(onMissing.status).toBe(404);
  expect(onMissing.body.error.code).toBe("SESSION_NOT_FOUND");
  for (const answer of plain) expect(answer.status).toBe(202);

  // 8 tasks: 3 running (the gate's limit), 5 queued with positions 1..5.
  const accepted = [keyed1.status === 202 ? keyed1 : keyed2, ...plain];
  expect(accepted.filter((a) => a.body.status === "running")).toHaveLength(3);
  expect(
    accepted
      .filter((a) => a.body.status === "queued")
      .map((a) => a.body.position)
      .sort(),
  ).toEqual([1, 2, 3, 4, 5]);
  const [{ n }] = await gt.sql<{ n: number }[]>`select count(*)::int as n from tasks`;
  expect(n).toBe(8);

  // Each session's log is gap-free: task.queued (then task.position while it waited), task.started.
  const finals = await Promise.all(accepted.map((a) => waitTask(gt.url, a.body.id)));
  for (const t of finals) expect(t.status).toBe("completed");
  const logs = await gt.sql<{ sessionId: string; seqs: number[]; types: string[] }[]>`
    select session_id, array_agg(seq order by seq) as seqs, array_agg(type order by seq) as types
    from events where session_id = any(${open}::uuid[]) group by session_id`;
  expect(logs).toHaveLength(8);
  for (const log of logs) {
    expect(log.seqs).toEqual(log.seqs.map((_, i) => i + 1));
    expect(log.types[0]).toBe("task.queued");
    expect(log.types.filter((t) => t === "task.started")).toHaveLength(1);
    expect(log.types[log.types.length - 1]).toBe("task.completed");
  }
});

it("refuses exactly the submits that overflow the queue when a batch would overfill it", async () => {
  const sessions = await Promise.all(Array.from({ length: 24 }, () => createSession(gt.url, gt.workspace)));
  batches.length = 0;
  // The turns hang until cancelled: a slot freed by a finished turn while the submits are still
  // arriving (a loaded machine spreads them out) would admit more than the limits allow here.
  const answers = await Promise.all(sessions.map((id) => submit(gt.url, id, { prompt: "[hang] fill" })));
  const accepted = answers.filter((a) => a.status === 202);
  const refused = answers.filter((a) => a.status !== 202);
  // 3 running + 12 queued admitted; the rest refused with nothing written.
  expect(accepted).toHaveLength(15);
  for (const r of refused) {
    expect(r.status).toBe(429);
    expect(r.body.error.reason).toBe("queue_full");
  }
  const byStatus = await gt.sql<{ status: string; n: number }[]>`
    select status, count(*)::int as n from tasks where session_id = any(${sessions}::uuid[])
    group by status order by status`;
  expect(Object.fromEntries(byStatus.map((r) => [r.status, r.n]))).toEqual({ queued: 12, running: 3 });
  await cancelOpenTasks(gt.url, gt.sql);
  const finals = await Promise.all(accepted.map((a) => waitTask(gt.url, a.body.id)));
  for (const t of finals) expect(t.status).toBe("cancelled");
});
