/**
 * kill -9 of the gateway mid-turn, then a new gateway on the same database behind the same
 * address (a proxy, since the new process gets a new port): a client run yields every committed
 * event exactly once, seqs strictly increasing by one, then `task.interrupted` (GATEWAY_RESTART),
 * then ends, with exactly one `restart` state notice. Over WebSocket, SSE and polling.
 */
import { expect, it } from "vitest";
import { type MooringEvent, MooringClient, type RunItem, type StateChange } from "../../src/client/index.js";
import type { TestDatabase } from "../support/db.js";
import { exitedWithOutput, gatewayEnv, Processes, useProcessSuite } from "../support/lifecycle.js";
import { TcpProxy } from "../support/tcp-proxy.js";

let db: TestDatabase;
let workspace: string;
const procs = new Processes();
useProcessSuite("client-restart-", procs, (d, w) => {
  db = d;
  workspace = w;
});

for (const transport of ["ws", "sse", "poll"] as const) {
  it(`${transport}: every committed event once, then task.interrupted, and one restart notice`, async () => {
    const env = gatewayEnv(db.url, { MOORING_INSTANCE_ID: `client-restart-${transport}` });
    const first = await procs.spawn(env);
    await first.waitReady();
    const proxy = await TcpProxy.start(first.url);
    try {
      const client = new MooringClient({
        url: proxy.url,
        transport,
        backoffBaseMs: 100,
        backoffMaxMs: 500,
        longPollMs: 2000,
        readyTimeoutMs: 30_000,
      });
      const session = await client.sessions.create({ workspace, agent: "simulated" });
      const run = await client.turns.submit(session.id, { prompt: "[deltas 5][hang]" });
      const states: StateChange[] = [];
      run.on("state", (s) => states.push(s));
      // Deltas may be coalesced into fewer events: the first one means the turn is streaming.
      const streamed = new Promise<void>((resolve) =>
        run.on("event", (e) => {
          if (e.type === "message.delta") resolve();
        }),
      );
      const items: RunItem[] = [];
      const consumed = (async () => {
        for await (const item of run) items.push(item);
      })();
      await streamed;

      first.kill("SIGKILL");
      expect(await exitedWithOutput(first)).toBe("SIGKILL");
      const second = await procs.spawn(env);
      proxy.setTarget(second.url);
      await consumed;
      const task = await run.done();

      expect(task.status).toBe("interrupted");
      expect(task.error?.code).toBe("GATEWAY_RESTART");
      const log = await db.sql<{ seq: number; type: string }[]>`
        select seq, type from events where task_id = ${task.id} order by seq`;
      const events = items as MooringEvent[];
      expect(events.map((e) => e.seq)).toEqual(log.map((e) => e.seq));
      expect(events.map((e) => e.type)).toEqual(log.map((e) => e.type));
      for (let i = 1; i < events.length; i++) expect(events[i].seq).toBe(events[i - 1].seq + 1);
      expect(events.at(-1)?.type).toBe("task.interrupted");
      expect(states.filter((s) => s.state === "restart")).toHaveLength(1);
      expect(states.at(-1)?.state).toBe("done");
    } finally {
      await proxy.close();
    }
  });
}

it("followContinuation: after a restart with MOORING_RECOVERY=continue the run follows into the continuation", async () => {
  const env = gatewayEnv(db.url, { MOORING_INSTANCE_ID: "client-continue", MOORING_RECOVERY: "continue" });
  const first = await procs.spawn(env);
  await first.waitReady();
  const proxy = await TcpProxy.start(first.url);
  try {
    const client = new MooringClient({ url: proxy.url, backoffBaseMs: 100, backoffMaxMs: 500 });
    const session = await client.sessions.create({ workspace, agent: "simulated" });
    // A finished turn saves the conversation, so the interrupted one can be continued.
    await (await client.turns.submit(session.id, { prompt: "hello" })).done();
    const run = await client.turns.submit(session.id, {
      prompt: "[deltas 2][hang]",
      followContinuation: true,
    });
    const interruptedId = run.taskId;
    const streamed = new Promise<void>((resolve) =>
      run.on("event", (e) => e.type === "message.delta" && resolve()),
    );
    const items: RunItem[] = [];
    const consumed = (async () => {
      for await (const item of run) items.push(item);
    })();
    await streamed;
    first.kill("SIGKILL");
    await exitedWithOutput(first);
    const second = await procs.spawn(env);
    proxy.setTarget(second.url);
    await consumed;
    const task = await run.done();
    expect(task.status).toBe("completed");
    expect(task.continuesTaskId).toBe(interruptedId);
    expect(run.taskId).toBe(task.id);
    const events = items as MooringEvent[];
    const types = events.map((e) => `${e.taskId === interruptedId ? "old" : "new"}:${e.type}`);
    expect(types).toContain("old:task.interrupted");
    expect(types.indexOf("old:task.interrupted")).toBeLessThan(types.indexOf("new:task.queued"));
    expect(types.at(-1)).toBe("new:task.completed");
    for (let i = 1; i < events.length; i++) expect(events[i].seq).toBeGreaterThan(events[i - 1].seq);
  } finally {
    await proxy.close();
  }
});
