/**
 * Under a delta flood the event log's flush hit a Postgres deadlock, and the
 * instance then took over its own running turn.
 *
 * - The deadlock: the lease sweep locked an expired task's row and then its session row (to append
 *   the terminal event), while the flush of that turn holds the session row and then updates the
 *   task row (its seq range). Every writer must take session rows first (docs/architecture.md).
 * - The self-takeover: the flood's synchronous loop starved the heartbeat, the lease ran out, and
 *   the sweep treated this instance's own live turn as a stopped instance's. An instance's own
 *   leases are renewed or settled by itself; only another boot's expired leases are swept.
 */
import { randomUUID } from "node:crypto";
import postgres from "postgres";
import { beforeAll, expect, it } from "vitest";
import { useGateway } from "../support/use-gateway.js";
import { eventually, startTestGateway } from "../support/gateway.js";
import { createSession, submitOk, waitStatus, waitTask } from "../support/turns.js";

const t = useGateway({
  env: { MOORING_SWEEP_MS: "50", MOORING_HEARTBEAT_MS: "60000", MOORING_LEASE_MS: "120000" },
  workspace: true,
  gateway: { onLog: (record) => lines.push(record) },
});
const lines: Record<string, any>[] = [];

beforeAll(async () => {
  // Sweeps every 50 ms; the heartbeat is slow, so a lease this test expires stays expired.
});

it("never takes over its own running turn when its lease ran out (a late heartbeat)", async () => {
  const sessionId = await createSession(t.url, t.workspace);
  const task = await submitOk(t.url, sessionId, { prompt: "[sleep 1500] [deltas 5]" });
  const running = await waitStatus(t.url, task.id, "running");
  expect(running.status).toBe("running");
  // The heartbeat ran late: this boot's own lease is over while the turn still runs.
  await t.sql`update tasks set lease_expires_at = now() - interval '5 seconds' where id = ${task.id}`;
  const done = await waitTask(t.url, task.id);
  expect(done.status).toBe("completed");
  expect(done.result.text).toContain("chunk 5");
  expect(lines.filter((l) => l.msg === "lease takeover: tasks of a stopped instance interrupted")).toEqual(
    [],
  );
}, 30_000);

it("sweeping a stopped instance's lease takes the session row before the task row (no deadlock with a flush)", async () => {
  const sessionId = await createSession(t.url, t.workspace);
  // A turn of a boot that stopped (no process renews it); its lease has not run out yet.
  const deadBoot = randomUUID();
  const [task] = await t.sql`
    insert into tasks (session_id, turn_index, status, prompt, timeout_ms, queue_deadline_at, owner_boot,
                       owner_instance, attempt, lease_expires_at, started_at)
    values (${sessionId}, 0, 'running', 'p', 60000, now() + interval '1 hour', ${deadBoot}, 'gone', 1,
            now() + interval '1 hour', now())
    returning id`;

  // A flush of that session, as the event log writes it: session row (seq allocation) first...
  const flush = postgres(t.databaseUrl, { max: 1, onnotice: () => {} });
  try {
    const flushed = flush.begin(async (tx) => {
      await tx`update sessions set last_seq = last_seq where id = ${sessionId}`;
      // ...the lease runs out while the flush holds the session row, and the sweep comes...
      await t.sql`update tasks set lease_expires_at = now() - interval '1 second' where id = ${task.id}`;
      await eventually(async () => {
        const [{ waiting }] = await t.sql`
          select count(*)::int as waiting from pg_stat_activity
          where datname = current_database() and wait_event_type = 'Lock'`;
        return waiting > 0;
      });
      // ...then the task row (its seq range). The sweep waits for the session row holding nothing.
      await tx`update tasks set last_seq = coalesce(last_seq, 0) where id = ${task.id}`;
    });
    await expect(flushed).resolves.toBeUndefined();
  } finally {
    await flush.end();
  }

  const settled = await eventually(async () => {
    const [row] = await t.sql`select status, error from tasks where id = ${task.id}`;
    return row.status === "interrupted" ? row : null;
  });
  expect(settled.error).toMatchObject({ code: "GATEWAY_RESTART" });
  const events = await t.sql`select seq, type from events where session_id = ${sessionId} order by seq`;
  expect(events.map((e) => e.type)).toEqual(["task.interrupted"]);
  expect(lines.filter((l) => JSON.stringify(l).includes("deadlock"))).toEqual([]);
  expect(lines.filter((l) => l.msg === "sweep failed; next tick retries")).toEqual([]);
}, 30_000);

it("a lease whose row a flush holds at the beat is still renewed (the beat waits for that one row)", async () => {
  const beating = await startTestGateway(t.databaseUrl, {
    MOORING_HEARTBEAT_MS: "100",
    MOORING_LEASE_MS: "3000",
  });
  const holder = postgres(t.databaseUrl, { max: 1, onnotice: () => {} });
  try {
    const sessionId = await createSession(beating.url, t.workspace);
    const task = await submitOk(beating.url, sessionId, { prompt: "[sleep 4000]" });
    await waitStatus(beating.url, task.id, "running");
    let before: Date | null = null;
    // Hold the task row as a flush would, for longer than a few beats.
    await holder.begin(async (tx) => {
      const [row] = await tx`select lease_expires_at from tasks where id = ${task.id} for update`;
      before = row.lease_expires_at;
      await eventually(async () => {
        const [{ waiting }] = await t.sql`
          select count(*)::int as waiting from pg_stat_activity
          where datname = current_database() and wait_event_type = 'Lock' and query like '%update tasks set lease_expires_at%'`;
        return waiting > 0;
      }, 5_000);
    });
    const renewed = await eventually(async () => {
      const [row] = await t.sql`select lease_expires_at from tasks where id = ${task.id}`;
      return row.leaseExpiresAt > before! ? row : null;
    });
    expect(renewed.leaseExpiresAt.getTime()).toBeGreaterThan(before!.getTime());
    // The agent's sleep ends on the gateway's clock, stepped rather than waited out.
    await beating.clock.advance(4000);
    expect((await waitTask(beating.url, task.id)).status).toBe("completed");
  } finally {
    await holder.end();
    await beating.stop();
  }
}, 30_000);
