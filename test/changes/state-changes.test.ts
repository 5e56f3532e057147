/**
 * Each state-change builder (domain/committer.ts) driven directly against a migrated database, not
 * through HTTP: what its statements wrote (rows, events) and what it declared (its effects, and what
 * the Committer did with them: the events published, the change bus told).
 */
import { randomUUID } from "node:crypto";
import { pino } from "pino";
import { expect, it } from "vitest";
import { loadConfig } from "../../src/config.js";
import type { Tx } from "../../src/db/client.js";
import { type AdmissionRequest, AdmissionQueue } from "../../src/domain/admission.js";
import { admitChange } from "../../src/domain/changes/admit.js";
import { announcePositionsChange } from "../../src/domain/changes/announce-positions.js";
import { archiveSessionIn } from "../../src/domain/changes/archive.js";
import { cancelTaskIn } from "../../src/domain/changes/cancel.js";
import { claimChange } from "../../src/domain/changes/claim.js";
import { Committer, type Effects, type StateChange, type Statements } from "../../src/domain/committer.js";
import { Recovery } from "../../src/domain/recovery.js";
import type { Runtime } from "../../src/domain/runtime.js";
import { tracingOff } from "../../src/tracing/tracer.js";
import { Sweeper } from "../../src/domain/sweeper.js";
import { TenantDirectory } from "../../src/domain/tenants.js";
import { settleWithContinuationIn } from "../../src/domain/turn-end.js";
import { MooringError } from "../../src/errors.js";
import { noMetrics } from "../../src/metrics/reporter.js";
import type { StoredEvent } from "../../src/sql/event-append.js";
import { gateIsQueueFull } from "../../src/sql/gate-check.js";
import { sessionIsBusy } from "../../src/sql/session-busy.js";
import type { TaskRow } from "../../src/sql/task-row.js";
import { ChangeBus, type ChangeBusEvents } from "../../src/stream/change-bus.js";
import { testEnv } from "../support/gateway.js";
import { addOwnedTask, addSession, addTask, taskById, useSqlTestDatabase } from "../support/sql-fixtures.js";
import { realClock } from "../../src/clock.js";

const testDb = useSqlTestDatabase();

/** A runtime whose committed events and change-bus hints are recorded. */
function runtime(env: Record<string, string> = {}) {
  const config = loadConfig(testEnv(testDb.url, env));
  const log = pino({ level: "silent" });
  const db = testDb.database;
  const published: StoredEvent[] = [];
  const bus = new ChangeBus();
  const hints: [keyof ChangeBusEvents, ...unknown[]][] = [];
  for (const name of ["session", "claimed", "queueMoved", "cancel", "archived", "gate"] as const) {
    bus.on(name, (...args: unknown[]) => void hints.push([name, ...args]));
  }
  const committer = new Committer(
    db,
    bus,
    log,
    { publish: (events) => published.push(...events) },
    noMetrics,
    { flushMs: config.eventFlushMs, flushMax: config.eventFlushMax, lanes: 1 },
  );
  const rt: Runtime = {
    config,
    db,
    log,
    bus,
    // Never flushed here: no builder under test writes through the event log.
    eventLog: committer.eventLog,
    committer,
    identity: { instanceId: "state-changes", bootId: randomUUID(), host: "h", pid: 1, version: "0" },
    metrics: noMetrics,
    tenants: TenantDirectory.fromConfig(config),
    clock: realClock,
    tracer: tracingOff,
  };
  const hinted = (name: keyof ChangeBusEvents) => hints.filter((h) => h[0] === name).map((h) => h.slice(1));
  return { rt, published, hinted };
}

/** `change` as sent, with the effects its outcome declared kept aside. */
function recorded<S extends Statements, T>(change: StateChange<S, T>) {
  const seen: { effects?: Effects } = {};
  const wrapped: StateChange<S, T> = {
    statements: (q) => change.statements(q),
    outcome: (answers) => {
      const out = change.outcome(answers);
      seen.effects = out.effects;
      return out;
    },
  };
  return { change: wrapped, seen };
}

/** An interactive change run by the Committer, answering its value and declared effects. */
async function transacted<T>(rt: Runtime, run: (tx: Tx) => Promise<{ value: T; effects: Effects }>) {
  let effects: Effects = {};
  const value = await rt.committer.transaction(async (tx) => {
    const out = await run(tx);
    effects = out.effects;
    return out;
  });
  return { value, effects };
}

/** Everything a refused change could have written. */
async function written() {
  const [row] = await testDb.sql<{ tasks: number; events: number; seqs: number }[]>`
    select (select count(*)::int from tasks) as tasks, (select count(*)::int from events) as events,
           (select coalesce(sum(last_seq), 0)::int from sessions) as seqs`;
  return row;
}

function request(sessionId: string, extra: Partial<AdmissionRequest> = {}): AdmissionRequest {
  return {
    sessionId,
    prompt: "hello",
    idempotencyKey: null,
    loadClass: null,
    timeoutMs: 60_000,
    ifBusy: "enqueue",
    ...extra,
  };
}

const claimLimit = (n: number) => ({ claimLimit: () => n });
const types = (events: StoredEvent[] | undefined) => (events ?? []).map((e) => e.type);
const ids = (rows: TaskRow[] | undefined) => (rows ?? []).map((r) => r.id).sort();

async function eventsOf(sessionId: string) {
  return testDb.sql<{ seq: number; type: string; taskId: string | null; data: any }[]>`
    select seq, type, task_id, data from events where session_id = ${sessionId} order by seq`;
}

// The committer's answers

it("commit: a change's answers come back typed in the shape its statements were built in", async () => {
  const { rt } = runtime();
  const order: number[] = [];
  const answered = (q: Tx, n: number) => {
    order.push(n);
    return q<{ n: number }[]>`select ${n}::int as n`;
  };
  const value = await rt.committer.commit({
    statements: (q) => ({
      first: answered(q, 1),
      list: [answered(q, 2), answered(q, 3)],
      submits: [{ a: answered(q, 4), b: answered(q, 5) }],
    }),
    outcome: (answers) => ({
      value: {
        first: answers.first[0].n,
        list: answers.list.map((rows) => rows[0].n),
        submits: answers.submits.map(({ a, b }) => [a[0].n, b[0].n]),
      },
      effects: {},
    }),
  });
  expect(value).toEqual({ first: 1, list: [2, 3], submits: [[4, 5]] });
  expect(order).toEqual([1, 2, 3, 4, 5]);
});

// Admission (domain/changes/admit.ts)

it("admission: an enqueue into a free slot is queued and started in one change", async () => {
  const { rt, published, hinted } = runtime({ MOORING_MAX_ACTIVE: "1" });
  const session = await addSession(testDb.sql);
  const id = randomUUID();
  const { change, seen } = recorded(admitChange(rt, [{ id, request: request(session) }], 1));
  const [admitted] = await rt.committer.commit(change);

  expect(admitted.created?.id).toBe(id);
  expect(admitted.created?.status).toBe("running");
  const row = await taskById(testDb.sql, id);
  expect({ status: row.status, ownerBoot: row.ownerBoot }).toEqual({
    status: "running",
    ownerBoot: rt.identity.bootId,
  });
  expect((await eventsOf(session)).map((e) => [e.seq, e.type, e.taskId])).toEqual([
    [1, "task.queued", id],
    [2, "task.started", id],
  ]);
  // Declared: both events, their head for the notification, the gate, the claimed turn.
  expect(types(seen.effects?.events)).toEqual(["task.queued", "task.started"]);
  expect(seen.effects?.notify).toEqual({ when: "afterCommit", heads: new Map([[session, 2]]), gate: true });
  expect(ids(seen.effects?.claimed)).toEqual([id]);
  expect(seen.effects?.queueMoved).toBe(true);
  // Applied: the events published, the worker told of its claim.
  expect(types(published)).toEqual(["task.queued", "task.started"]);
  expect(hinted("claimed").map(([rows]) => ids(rows as TaskRow[]))).toEqual([[id]]);
});

it("admission: with no slot to claim, the enqueued turn stays queued and nothing is claimed", async () => {
  const { rt, published, hinted } = runtime();
  const session = await addSession(testDb.sql);
  const id = randomUUID();
  const { change, seen } = recorded(admitChange(rt, [{ id, request: request(session) }], 0));
  const [admitted] = await rt.committer.commit(change);

  expect(admitted.created?.status).toBe("queued");
  expect((await taskById(testDb.sql, id)).status).toBe("queued");
  expect((await eventsOf(session)).map((e) => e.type)).toEqual(["task.queued"]);
  expect(types(seen.effects?.events)).toEqual(["task.queued"]);
  expect(seen.effects?.claimed).toEqual([]);
  expect(seen.effects?.notify?.gate).toBe(true);
  expect(seen.effects?.queueMoved).toBe(true);
  expect(types(published)).toEqual(["task.queued"]);
  expect(hinted("claimed")).toEqual([]);
});

it("admission: ifBusy=reject on a busy session is refused SESSION_BUSY with nothing written", async () => {
  const { rt, published } = runtime();
  const session = await addSession(testDb.sql);
  await addTask(testDb.sql, session, { status: "running" });
  const before = await written();
  const queue = new AdmissionQueue(rt, claimLimit(1));

  // Refused in SQL: the submit rolls back to its savepoint, answered from the committed batch.
  const [direct] = await rt.committer.commit(
    admitChange(rt, [{ id: randomUUID(), request: request(session, { ifBusy: "reject" }) }], 1),
  );
  expect(direct.refused).toSatisfy(sessionIsBusy);
  const admitted = queue.admit(request(session, { ifBusy: "reject" }));
  await expect(admitted).rejects.toSatisfy(
    (err) => err instanceof MooringError && err.code === "SESSION_BUSY",
  );

  expect(await written()).toEqual(before);
  expect(published).toEqual([]);
});

it("admission: ifBusy=interrupt makes the running turn cancelling and declares its cancel", async () => {
  const { rt, hinted } = runtime();
  const session = await addSession(testDb.sql);
  const running = await addTask(testDb.sql, session, { status: "running" });
  const id = randomUUID();
  const { change, seen } = recorded(
    admitChange(rt, [{ id, request: request(session, { ifBusy: "interrupt" }) }], 1),
  );
  const [admitted] = await rt.committer.commit(change);

  expect(admitted.interrupted?.id).toBe(running.id);
  expect((await taskById(testDb.sql, running.id)).status).toBe("cancelling");
  // The new turn jumps the queue but waits for its session's running turn to end.
  const created = await taskById(testDb.sql, id);
  expect({ status: created.status, jumpsQueue: created.jumpsQueue }).toEqual({
    status: "queued",
    jumpsQueue: true,
  });
  expect(seen.effects?.cancel).toEqual([running.id]);
  // Its owner elsewhere hears it after the commit (the statement itself notifies nothing).
  expect(seen.effects?.notify?.cancel).toEqual([running.id]);
  expect(hinted("cancel")).toEqual([[running.id]]);
});

it("admission: a repeated idempotency key answers the existing task and writes nothing", async () => {
  const { rt, published } = runtime();
  const session = await addSession(testDb.sql);
  const earlier = await addTask(testDb.sql, session, { idempotencyKey: "k-1" });
  const before = await written();
  const { change, seen } = recorded(
    admitChange(rt, [{ id: randomUUID(), request: request(session, { idempotencyKey: "k-1" }) }], 0),
  );
  const [admitted] = await rt.committer.commit(change);

  expect(admitted.created).toBeNull();
  expect(admitted.existing?.id).toBe(earlier.id);
  expect(await written()).toEqual(before);
  expect(seen.effects?.events).toEqual([]);
  expect(seen.effects?.queueMoved).toBe(false);
  expect(published).toEqual([]);
});

it("admission: two submits with one key in a batch make one task, the second answered with it", async () => {
  const { rt } = runtime();
  const session = await addSession(testDb.sql);
  const [first, second] = [randomUUID(), randomUUID()];
  const keyed = request(session, { idempotencyKey: "k-2" });
  const admitted = await rt.committer.commit(
    admitChange(
      rt,
      [
        { id: first, request: keyed },
        { id: second, request: keyed },
      ],
      0,
    ),
  );

  expect(admitted.map((a) => [a.created?.id ?? null, a.existing?.id ?? null])).toEqual([
    [first, null],
    [null, first],
  ]);
  expect((await testDb.sql`select id from tasks`).map((r) => r.id)).toEqual([first]);
});

it("admission: a submit that would overfill the queue is refused GATEWAY_BUSY with nothing written", async () => {
  const { rt, published } = runtime({ MOORING_MAX_QUEUED: "1" });
  await addTask(testDb.sql, await addSession(testDb.sql));
  const session = await addSession(testDb.sql);
  const before = await written();
  const queue = new AdmissionQueue(rt, claimLimit(0));

  const [direct] = await rt.committer.commit(
    admitChange(rt, [{ id: randomUUID(), request: request(session) }], 0),
  );
  expect(direct.refused).toSatisfy(gateIsQueueFull);
  await expect(queue.admit(request(session))).rejects.toSatisfy(
    (err) => err instanceof MooringError && err.code === "GATEWAY_BUSY",
  );

  expect(await written()).toEqual(before);
  expect(published).toEqual([]);
});

// The worker's claim (domain/changes/claim.ts)

it("claim: claims up to maxActive and declares the claimed turns", async () => {
  const { rt, published, hinted } = runtime({ MOORING_MAX_ACTIVE: "2" });
  const queued = [];
  for (let i = 0; i < 3; i++) queued.push(await addTask(testDb.sql, await addSession(testDb.sql)));
  const { change, seen } = recorded(claimChange(rt, 5));
  await rt.committer.commit(change);

  const rows = await testDb.sql<{ id: string; status: string; ownerBoot: string | null }[]>`
    select id, status, owner_boot from tasks where status = 'running'`;
  expect(rows).toHaveLength(2);
  expect(rows.every((r) => r.ownerBoot === rt.identity.bootId)).toBe(true);
  const claimed = rows.map((r) => r.id).sort();
  expect(ids(seen.effects?.claimed)).toEqual(claimed);
  expect(types(seen.effects?.events)).toEqual(["task.started", "task.started"]);
  expect(seen.effects?.notify?.gate).toBe(true);
  expect(seen.effects?.queueMoved).toBe(true);
  expect(published.map((e) => e.taskId).sort()).toEqual(claimed);
  expect(hinted("claimed").map(([r]) => ids(r as TaskRow[]))).toEqual([claimed]);
  expect(queued.filter((t) => !claimed.includes(t.id))).toHaveLength(1);
});

it("claim: takes no more than the worker's limit, and declares nothing when there is nothing to claim", async () => {
  const { rt } = runtime({ MOORING_MAX_ACTIVE: "5" });
  for (let i = 0; i < 2; i++) await addTask(testDb.sql, await addSession(testDb.sql));
  const one = recorded(claimChange(rt, 1));
  await rt.committer.commit(one.change);
  expect(one.seen.effects?.claimed).toHaveLength(1);

  await rt.committer.commit(claimChange(rt, 5));
  const none = recorded(claimChange(rt, 5));
  await rt.committer.commit(none.change);
  expect(none.seen.effects).toEqual({});
  const [{ running }] = await testDb.sql<{ running: number }[]>`
    select count(*)::int as running from tasks where status = 'running'`;
  expect(running).toBe(2);
});

// Queue-position announcements (domain/changes/announce-positions.ts)

it("positions: announces only tasks still queued, declaring the events and their head", async () => {
  const { rt, published } = runtime();
  const session = await addSession(testDb.sql);
  const running = await addTask(testDb.sql, session, { status: "running" });
  const queued = await addTask(testDb.sql, session);
  const { change, seen } = recorded(
    announcePositionsChange(session, [
      { taskId: running.id, position: 1 },
      { taskId: queued.id, position: 3 },
    ]),
  );
  await rt.committer.commit(change);

  const events = await eventsOf(session);
  expect(events.map((e) => [e.type, e.taskId, e.data.position])).toEqual([["task.position", queued.id, 3]]);
  expect(types(seen.effects?.events)).toEqual(["task.position"]);
  expect(seen.effects?.notify).toEqual({
    when: "afterCommit",
    heads: new Map([[session, events[0].seq]]),
    gate: false,
  });
  expect(published.map((e) => e.taskId)).toEqual([queued.id]);
});

// Archive (domain/changes/archive.ts) and cancel (domain/changes/cancel.ts)

it("archive: archives the session, cancels its queued turn, stops its running one", async () => {
  const { rt, published, hinted } = runtime();
  const session = await addSession(testDb.sql);
  const running = await addTask(testDb.sql, session, { status: "running" });
  const queued = await addTask(testDb.sql, session);
  const { value, effects } = await transacted(rt, (tx) => archiveSessionIn(tx, session));

  expect(value).toBe(2);
  const [{ archivedAt }] = await testDb.sql`select archived_at from sessions where id = ${session}`;
  expect(archivedAt).not.toBeNull();
  expect((await taskById(testDb.sql, queued.id)).status).toBe("cancelled");
  expect((await taskById(testDb.sql, running.id)).status).toBe("cancelling");
  expect((await eventsOf(session)).map((e) => [e.type, e.taskId])).toEqual([["task.cancelled", queued.id]]);
  expect(effects.archived).toEqual([session]);
  expect(effects.cancel).toEqual([running.id]);
  expect(types(effects.events)).toEqual(["task.cancelled"]);
  expect(types(published)).toEqual(["task.cancelled"]);
  expect(hinted("archived")).toEqual([[session]]);
  expect(hinted("cancel")).toEqual([[running.id]]);
});

it("cancel: a queued turn ends cancelled with its event; the queue moved", async () => {
  const { rt, hinted } = runtime();
  const session = await addSession(testDb.sql);
  const queued = await addTask(testDb.sql, session);
  const { value, effects } = await transacted(rt, (tx) => cancelTaskIn(tx, queued));

  const [event] = await eventsOf(session);
  expect(value?.status).toBe("cancelled");
  expect(value?.lastSeq).toBe(event.seq);
  expect((await taskById(testDb.sql, queued.id)).status).toBe("cancelled");
  expect([event.type, event.taskId]).toEqual(["task.cancelled", queued.id]);
  expect(types(effects.events)).toEqual(["task.cancelled"]);
  expect(effects.queueMoved).toBe(true);
  expect(hinted("queueMoved")).toHaveLength(1);
});

it("cancel: a running turn goes cancelling and its owner is told; a finished one is left alone", async () => {
  const { rt, hinted } = runtime();
  const session = await addSession(testDb.sql);
  const running = await addTask(testDb.sql, session, { status: "running" });
  const stopped = await transacted(rt, (tx) => cancelTaskIn(tx, running));
  expect((await taskById(testDb.sql, running.id)).status).toBe("cancelling");
  expect(stopped.effects).toEqual({
    cancel: [running.id],
    sessionsChanged: [session],
    // Other instances hear it after the commit (the committer hands these to its Notifier).
    notify: { when: "afterCommit", cancel: [running.id], heads: new Map([[session, -1]]) },
  });
  expect(hinted("cancel")).toEqual([[running.id]]);
  expect(hinted("session")).toEqual([[session, null]]);

  const done = await addTask(testDb.sql, session, { status: "completed" });
  const before = await written();
  const again = await transacted(rt, (tx) => cancelTaskIn(tx, done));
  expect(again).toEqual({ value: null, effects: {} });
  expect(await written()).toEqual(before);
});

// The sweeper (domain/sweeper.ts)

it("expire: only queued turns past their queue deadline expire, with their events", async () => {
  const { rt, published, hinted } = runtime();
  const session = await addSession(testDb.sql);
  const overdue = await addTask(testDb.sql, session, { queueDeadlineInMs: -1_000 });
  const waiting = await addTask(testDb.sql, await addSession(testDb.sql), { queueDeadlineInMs: 60_000 });
  const rows = await new Sweeper(rt, new Recovery(rt)).expireQueued();

  expect(rows.map((r) => r.id)).toEqual([overdue.id]);
  expect((await taskById(testDb.sql, overdue.id)).status).toBe("expired");
  expect((await taskById(testDb.sql, waiting.id)).status).toBe("queued");
  expect((await eventsOf(session)).map((e) => [e.type, e.taskId])).toEqual([["task.expired", overdue.id]]);
  expect(published.map((e) => [e.type, e.taskId])).toEqual([["task.expired", overdue.id]]);
  expect(hinted("queueMoved")).toHaveLength(1);
});

it("interrupt: a running turn whose lease expired is interrupted; the gate is told", async () => {
  const { rt, published, hinted } = runtime();
  const session = await addSession(testDb.sql);
  const orphan = await addTask(testDb.sql, session, { status: "running", leaseInMs: -1_000 });
  const leased = await addTask(testDb.sql, await addSession(testDb.sql), {
    status: "running",
    leaseInMs: 60_000,
  });
  const rows = await new Sweeper(rt, new Recovery(rt)).sweepLeases();

  expect(rows.map((r) => r.id)).toEqual([orphan.id]);
  expect((await taskById(testDb.sql, orphan.id)).status).toBe("interrupted");
  expect((await taskById(testDb.sql, leased.id)).status).toBe("running");
  expect(published.map((e) => [e.type, e.taskId])).toEqual([["task.interrupted", orphan.id]]);
  expect(hinted("gate")).toHaveLength(1);
  expect(hinted("queueMoved")).toHaveLength(1);
});

// The owner's settlement with a continuation (domain/turn-end.ts)

const interrupted = {
  status: "interrupted",
  error: { code: "GATEWAY_RESTART", message: "The gateway shut down before the turn finished." },
} as const;

it("settle: an interruption with MOORING_RECOVERY=continue queues the continuation in the same change", async () => {
  const { rt, published } = runtime({ MOORING_RECOVERY: "continue" });
  const { row, fence } = await addOwnedTask(testDb.sql);
  await testDb.sql`update sessions set agent_session_id = 'a-1', last_assistant_message_id = 'm-1'
    where id = ${row.sessionId}`;
  const { value, effects } = await transacted(rt, (tx) =>
    settleWithContinuationIn(tx, new Recovery(rt), row.sessionId, fence, interrupted),
  );

  expect(value?.status).toBe("interrupted");
  expect((await taskById(testDb.sql, row.id)).status).toBe("interrupted");
  const [continuation] = await testDb.sql<TaskRow[]>`select * from tasks where continues_task_id = ${row.id}`;
  expect(continuation?.status).toBe("queued");
  expect((await eventsOf(row.sessionId)).map((e) => [e.type, e.taskId])).toEqual([
    ["task.interrupted", row.id],
    ["task.queued", continuation.id],
  ]);
  expect(types(effects.events)).toEqual(["task.interrupted", "task.queued"]);
  expect(types(published)).toEqual(["task.interrupted", "task.queued"]);
});

it("settle: a fence that no longer holds writes nothing and declares nothing", async () => {
  const { rt, published } = runtime({ MOORING_RECOVERY: "continue" });
  const { row, fence } = await addOwnedTask(testDb.sql);
  const before = await written();
  const { value, effects } = await transacted(rt, (tx) =>
    settleWithContinuationIn(
      tx,
      new Recovery(rt),
      row.sessionId,
      { ...fence, attempt: fence.attempt + 1 },
      interrupted,
    ),
  );

  expect(value).toBeNull();
  expect(effects).toEqual({});
  expect((await taskById(testDb.sql, row.id)).status).toBe("running");
  expect(await written()).toEqual(before);
  expect(published).toEqual([]);
});

// The event log's flush, the committer's batching strategy (stream/event-lane.ts, flushChange)

it("flush: a turn's events and settlement go through the committer, which publishes them after the commit", async () => {
  const { rt, published, hinted } = runtime();
  const { row, fence } = await addOwnedTask(testDb.sql);
  rt.eventLog.append({
    sessionId: row.sessionId,
    taskId: row.id,
    fence,
    type: "message.delta",
    data: { text: "hi" },
  });
  const outcome = await rt.eventLog.settle({
    sessionId: row.sessionId,
    fence,
    settlement: {
      status: "completed",
      result: { text: "hi", stopReason: "end_turn", usage: null, contextPercent: null },
    },
  });

  expect(outcome.kind).toBe("settled");
  const stored = await eventsOf(row.sessionId);
  expect(stored.map((e) => [e.type, e.taskId])).toEqual([
    ["message.delta", row.id],
    ["task.completed", row.id],
  ]);
  // The terminal event says what the row says: both written from the one settlement.
  const settled = await taskById(testDb.sql, row.id);
  expect(stored[1].data).toEqual({ status: "completed", result: settled.result, error: null });
  expect(settled).toMatchObject({ status: "completed", lastSeq: stored[1].seq, error: null });
  expect(published.map((e) => [e.type, e.seq])).toEqual(stored.map((e) => [e.type, e.seq]));
  expect(hinted("session")).toContainEqual([row.sessionId, null]);
});

it("flush: a settlement whose fence no longer holds writes nothing and publishes nothing", async () => {
  const { rt, published } = runtime();
  const { row, fence } = await addOwnedTask(testDb.sql);
  const before = await written();
  const outcome = await rt.eventLog.settle({
    sessionId: row.sessionId,
    fence: { ...fence, attempt: fence.attempt + 1 },
    settlement: { status: "completed", result: null },
  });

  expect(outcome.kind).toBe("not-owner");
  expect((await taskById(testDb.sql, row.id)).status).toBe("running");
  expect(await written()).toEqual(before);
  expect(published).toEqual([]);
});
