/**
 * The webhooks of the sweeper's settlements (docs/api.md, Webhooks), on real gateway processes:
 * a queued turn past its deadline (`task.expired`), and a turn whose instance was killed -9 and
 * whose lease another instance swept (`task.interrupted`, and with MOORING_RECOVERY=continue on an
 * unsaved conversation, `session.reset`). Each delivery row carries the seq of the event that
 * caused it: the outbox trigger writes it in the transaction that commits the change.
 */
import { expect, it } from "vitest";
import type { TestDatabase } from "../support/db.js";
import { eventually } from "../support/gateway.js";
import { exitedWithOutput, gatewayEnv, Processes, useProcessSuite } from "../support/lifecycle.js";
import { createSession, submitPrompt, waitStatus, waitTerminal } from "../support/turns.js";
import { type Receiver, startReceiver } from "../support/webhook-receiver.js";

const SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
let db: TestDatabase;
let workspace: string;
const procs = new Processes();
useProcessSuite("wh-events-", procs, (d, w) => {
  db = d;
  workspace = w;
});

const env = (receiver: Receiver, extra: Record<string, string>) =>
  gatewayEnv(db.url, {
    MOORING_WEBHOOKS: JSON.stringify([{ url: receiver.url, secret: SECRET }]),
    MOORING_WEBHOOK_POLL_MS: "50",
    ...extra,
  });

/** Each delivery of the session matches one event row of the same type and seq. */
async function deliveriesMatchEvents(sessionId: string, types: string[]): Promise<void> {
  const rows = await db.sql<{ eventType: string; seq: number; eventSeq: number | null }[]>`
    select d.event_type, d.seq, e.seq as event_seq from webhook_deliveries d
    left join events e on e.session_id = d.session_id and e.seq = d.seq and e.type = d.event_type
    where d.session_id = ${sessionId} and d.event_type = any(${types}::text[]) order by d.seq`;
  expect(rows.map((r) => r.eventType).sort()).toEqual([...types].sort());
  for (const row of rows) expect(row.eventSeq).toBe(row.seq);
}

it("a queued turn past its queue deadline: task.expired arrives signed, once, with its error code", async () => {
  const receiver = await startReceiver(SECRET);
  try {
    const gw = await procs.spawn(env(receiver, { MOORING_MAX_ACTIVE: "1", MOORING_QUEUE_TIMEOUT_MS: "400" }));
    await gw.waitReady();
    const busy = await createSession(gw.url, workspace);
    const waiting = await createSession(gw.url, workspace);
    const running = await submitPrompt(gw.url, busy, "[sleep 4000]");
    await waitStatus(gw.url, running.id, "running");
    const queued = await submitPrompt(gw.url, waiting, "hello");
    expect((await waitTerminal(gw.url, queued.id)).status).toBe("expired");
    const got = await eventually(async () => receiver.unique.find((r) => r.body.type === "task.expired"));
    expect(got.body.data).toMatchObject({
      tenant: "default",
      sessionId: waiting,
      taskId: queued.id,
      status: "expired",
      error: { code: "GATEWAY_BUSY" },
    });
    expect(receiver.badSignatures).toBe(0);
    expect(receiver.unique.filter((r) => r.body.type === "task.expired")).toHaveLength(1);
    await deliveriesMatchEvents(waiting, ["task.expired"]);
  } finally {
    await receiver.close();
  }
});

it("an instance killed -9 mid-turn: the survivor's sweep sends task.interrupted and, unsaved, session.reset", async () => {
  const receiver = await startReceiver(SECRET);
  try {
    const extra = { MOORING_RECOVERY: "continue" };
    const a = await procs.spawn(env(receiver, { ...extra, MOORING_INSTANCE_ID: "wh-ev-a" }));
    await a.waitReady();
    const sessionId = await createSession(a.url, workspace);
    const task = await submitPrompt(a.url, sessionId, "[sleep 30000] [deltas 2]");
    // Running on a, its agent conversation started but no assistant message saved: unsaved.
    await eventually(async () => {
      const rows = await db.sql`
        select 1 from sessions s join tasks t on t.session_id = s.id
        where t.id = ${task.id} and t.status = 'running' and s.agent_session_id is not null
          and s.turn_count > 0 and s.last_assistant_message_id is null`;
      return rows.length === 1;
    });
    // b starts only now, so the turn is a's; b's sweep takes it over once a's lease expires.
    const b = await procs.spawn(env(receiver, { ...extra, MOORING_INSTANCE_ID: "wh-ev-b" }));
    await b.waitReady();
    a.kill("SIGKILL");
    await exitedWithOutput(a);

    expect(await waitTerminal(b.url, task.id)).toMatchObject({
      status: "interrupted",
      error: { code: "GATEWAY_RESTART" },
    });
    await eventually(async () =>
      ["task.interrupted", "session.reset"].every((t) => receiver.unique.some((r) => r.body.type === t)),
    );
    expect(receiver.badSignatures).toBe(0);
    const interrupted = receiver.unique.filter((r) => r.body.type === "task.interrupted");
    const reset = receiver.unique.filter((r) => r.body.type === "session.reset");
    expect(interrupted).toHaveLength(1);
    expect(reset).toHaveLength(1);
    expect(interrupted[0].body.data).toMatchObject({
      sessionId,
      taskId: task.id,
      status: "interrupted",
      error: { code: "GATEWAY_RESTART" },
    });
    expect(reset[0].body.data).toMatchObject({ sessionId, taskId: task.id });
    // The reset follows the interruption in the session's order.
    expect(reset[0].body.data.seq).toBeGreaterThan(interrupted[0].body.data.seq as number);
    await deliveriesMatchEvents(sessionId, ["task.interrupted", "session.reset"]);
  } finally {
    await receiver.close();
  }
}, 120_000);
