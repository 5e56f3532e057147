/**
 * Fan-out across instances (docs/api.md, Streaming): two real gateway processes on one database. A
 * subscriber on A receives, exactly once and in order, the events of a turn running on B; when
 * A's LISTEN connection is killed, it reconnects and catches up, so delivery goes on.
 *
 * A runs with a 30 s polling backstop, so timely delivery to it can only come through its LISTEN
 * connection: these tests prove the notification path, not the backstop.
 */
import { afterAll, beforeAll, expect, it } from "vitest";
import { eventually, type GatewayProcess } from "../support/gateway.js";
import { createSession } from "../support/turns.js";
import { range, seqs, type WsClient, WsClients, type WsEvent } from "../support/ws-client.js";
import { useProcessGateway } from "../support/use-gateway.js";

const suite = useProcessGateway({ env: { LOG_LEVEL: "info" }, workspace: true });
let a: GatewayProcess;
let b: GatewayProcess;
const ids = { a: `multi-a-${process.pid}`, b: `multi-b-${process.pid}` };
const clients = new WsClients(() => a.url);

async function logOf(sessionId: string): Promise<{ seq: number; type: string }[]> {
  return suite.sql<{ seq: number; type: string }[]>`
    select seq, type from events where session_id = ${sessionId} order by seq`;
}

async function listenBackends(instanceId: string): Promise<number[]> {
  const rows = await suite.sql<{ pid: number }[]>`
    select pid from pg_stat_activity where application_name like ${`mooring-listen:%${instanceId}%`}`;
  return rows.map((r) => r.pid);
}

/** Time at which `client` got the terminal event of `taskId`. */
async function terminalAt(
  client: WsClient,
  sessionId: string,
  taskId: string,
  timeoutMs = 15_000,
): Promise<number> {
  await client.waitForTerminal(sessionId, taskId, timeoutMs);
  return Date.now();
}

beforeAll(async () => {
  [a, b] = await Promise.all([
    suite.spawn({ MOORING_INSTANCE_ID: ids.a, MOORING_POLL_MS: "30000" }),
    suite.spawn({ MOORING_INSTANCE_ID: ids.b }),
  ]);
  await Promise.all([a.waitReady(), b.waitReady()]);
});

afterAll(() => clients.closeAll());

function expectWholeLog(events: WsEvent[], log: { seq: number; type: string }[], after = 0) {
  const tail = log.filter((e) => e.seq > after);
  expect(events.map((e) => [e.seq, e.type])).toEqual(tail.map((e) => [e.seq, e.type]));
}

it("a subscriber on A gets every event of a turn running on B, once and in order", async () => {
  const hello = await clients.connect(a.url);
  expect((await hello.hello).instanceId).toBe(ids.a);
  const sessionId = await createSession(a.url, suite.workspace);
  const onA = await clients.connect(a.url);
  const onB = await clients.connect(b.url);
  await onA.call("events.subscribe", { sessionId });
  await onB.call("events.subscribe", { sessionId });

  const task = await onB.call("turns.submit", {
    sessionId,
    prompt: "[deltas 20] [tool 3000] [sleep 100] [deltas 20] [tool 100] [sleep 100] [tool 100] [deltas 5]",
  });
  const bDone = await terminalAt(onB, sessionId, task.id);
  const aDone = await terminalAt(onA, sessionId, task.id);
  const [row] = await suite.sql<{ ownerInstance: string; status: string }[]>`
    select owner_instance, status from tasks where id = ${task.id}`;
  expect(row).toEqual({ ownerInstance: ids.b, status: "completed" });

  const log = await logOf(sessionId);
  expect(seqs(log)).toEqual(range(1, log.length));
  expectWholeLog(onA.eventsOf(sessionId), log);
  expectWholeLog(onB.eventsOf(sessionId), log);
  expect(aDone - bDone).toBeLessThan(2000);
});

it("after A's LISTEN connection is killed, A reconnects and its subscriber still gets every event", async () => {
  const sessionId = await createSession(b.url, suite.workspace);
  const onA = await clients.connect(a.url);
  const onB = await clients.connect(b.url);
  await onA.call("events.subscribe", { sessionId });
  await onB.call("events.subscribe", { sessionId });

  // A warm-up turn proves the path works before the cut.
  const warm = await onB.call("turns.submit", { sessionId, prompt: "[deltas 3]" });
  await terminalAt(onA, sessionId, warm.id);

  const before = await listenBackends(ids.a);
  expect(before).toHaveLength(1);
  const [killed] = await suite.sql<{ ok: boolean }[]>`select pg_terminate_backend(${before[0]}) as ok`;
  expect(killed.ok).toBe(true);

  // Straight away, before A has necessarily noticed: a turn on B.
  const task = await onB.call("turns.submit", {
    sessionId,
    prompt: "[deltas 10] [tool 500] [sleep 200] [deltas 10] [tool 500] [sleep 200] [deltas 10]",
  });
  const bDone = await terminalAt(onB, sessionId, task.id);
  const aDone = await terminalAt(onA, sessionId, task.id);
  const log = await logOf(sessionId);
  expect(seqs(log)).toEqual(range(1, log.length));
  expectWholeLog(onA.eventsOf(sessionId), log);
  expectWholeLog(onB.eventsOf(sessionId), log);
  // Within a couple of seconds (A's poll is 30 s: this is the reconnected listener).
  expect(aDone - bDone).toBeLessThan(2000);

  // A listens again on a new backend.
  const after = await eventually(async () => {
    const pids = await listenBackends(ids.a);
    return pids.length === 1 && pids[0] !== before[0] ? pids : null;
  }, 5000);
  expect(after[0]).not.toBe(before[0]);

  // And a later turn flows as before.
  const next = await onB.call("turns.submit", { sessionId, prompt: "[deltas 5] [tool 10]" });
  const nextB = await terminalAt(onB, sessionId, next.id);
  const nextA = await terminalAt(onA, sessionId, next.id);
  expect(nextA - nextB).toBeLessThan(1000);
  expectWholeLog(onA.eventsOf(sessionId), await logOf(sessionId));
});
