/**
 * The client SDK (`mooring/client`) against a real in-process gateway, through a TCP
 * proxy that cuts, stalls, refuses and drops: every event exactly once and in order whatever the
 * connection does; the surface (sessions, turns, tasks, gate, errors, pages).
 */
import { rm } from "node:fs/promises";
import { afterAll, describe, expect, it } from "vitest";
import { claimTestDatabase, type TestDatabase } from "../support/db.js";
import { useGateway } from "../support/use-gateway.js";
import {
  GatewayBusyError,
  isResyncItem,
  type MooringEvent,
  MooringClient,
  type MooringClientOptions,
  type RunItem,
  SessionNotFoundError,
  type StateChange,
  UnauthorizedError,
} from "../../src/client/index.js";
import type { Gateway } from "../../src/gateway.js";
import { FakeClock, TestClock } from "../support/fake-clock.js";
import { call, eventually, startTestGateway } from "../support/gateway.js";
import { parseExposition } from "../support/prometheus.js";
import { TcpProxy } from "../support/tcp-proxy.js";

const PING_MS = 400;

const gt = useGateway({
  env: {
    MOORING_WS_PING_MS: String(PING_MS),
    MOORING_SSE_HEARTBEAT_MS: String(PING_MS),
    MOORING_MAX_ACTIVE: "20",
    MOORING_MAX_QUEUED: "50",
  },
  workspace: true,
});
const proxies: TcpProxy[] = [];

afterAll(async () => {
  await Promise.all(proxies.map((p) => p.close()));
  await rm(gt.workspace, { recursive: true, force: true });
});

async function proxy(): Promise<TcpProxy> {
  const p = await TcpProxy.start(gt.url);
  proxies.push(p);
  return p;
}

function client(url: string, options: Partial<MooringClientOptions> = {}): MooringClient {
  return new MooringClient({ url, pingMs: PING_MS, backoffBaseMs: 50, backoffMaxMs: 500, ...options });
}

const isEvent = (item: RunItem): item is MooringEvent => !isResyncItem(item);

/** Every event of the task in the log, in seq order. */
async function logOf(taskId: string) {
  return gt.sql<
    { seq: number; type: string }[]
  >`select seq, type from events where task_id = ${taskId} order by seq`;
}

async function collect(run: AsyncIterable<RunItem>): Promise<RunItem[]> {
  const items: RunItem[] = [];
  for await (const item of run) items.push(item);
  return items;
}

function expectExactlyTheLog(items: RunItem[], log: { seq: number; type: string }[]) {
  const events = items.filter(isEvent);
  expect(events.map((e) => e.seq)).toEqual(log.map((e) => e.seq));
  expect(events.map((e) => e.type)).toEqual(log.map((e) => e.type));
}

describe("the surface", () => {
  it("creates a session, submits a turn, iterates its events and resolves done() and text()", async () => {
    const c = client(gt.url);
    const session = await c.sessions.create({ workspace: gt.workspace, agent: "simulated", title: "sdk" });
    expect(session).toMatchObject({ agent: "simulated", status: "idle", title: "sdk" });
    const run = await c.turns.submit(session.id, { prompt: "[deltas 5][tool 3000][tokens 900]" });
    const texts: string[] = [];
    const tools: string[] = [];
    const usage: unknown[] = [];
    const states: StateChange[] = [];
    run
      .on("text", (t) => texts.push(t))
      .on("tool", (e) => tools.push(e.type))
      .on("usage", (u) => usage.push(u))
      .on("state", (s) => states.push(s));
    const items = await collect(run);
    const task = await run.done();
    expect(task.status).toBe("completed");
    expectExactlyTheLog(items, await logOf(task.id));
    expect(items.at(-1)).toMatchObject({ type: "task.completed" });
    expect(texts.join("")).toBe(task.result?.text);
    expect(await run.text()).toBe(task.result?.text);
    expect(tools).toEqual(["tool.call", "tool.result"]);
    expect(usage).toHaveLength(1);
    expect(states.map((s) => s.state)).toEqual(["connecting", "streaming", "settling", "done"]);
    for (const s of states) expect(s.reason).toBeTruthy();
  });

  it("gets, lists over pages, archives, reads the gate, and throws one class per code", async () => {
    const c = client(gt.url);
    const made = [];
    for (let i = 0; i < 3; i++)
      made.push(await c.sessions.create({ workspace: gt.workspace, agent: "simulated" }));
    const got = await c.sessions.get(made[0].id);
    expect(got.turns).toEqual([]);
    const run = await c.turns.submit(made[0].id, { prompt: "a" });
    await run.done();
    const run2 = await c.turns.submit(made[0].id, { prompt: "b" });
    await run2.done();
    const tasks = [];
    for await (const t of c.tasks.list({ sessionId: made[0].id, limit: 1 })) tasks.push(t.id);
    expect(tasks).toEqual([run2.taskId, run.taskId]);
    const ids = [];
    for await (const s of c.sessions.list({ limit: 2 })) ids.push(s.id);
    expect(ids).toEqual(expect.arrayContaining(made.map((s) => s.id)));
    expect(await c.gate()).toMatchObject({ maxActive: 20, maxQueued: 50 });
    expect((await c.tasks.get(run.taskId)).status).toBe("completed");
    expect((await c.tasks.cancel(run.taskId)).status).toBe("completed");
    expect((await c.sessions.archive(made[2].id)).status).toBe("archived");
    const missing = await c.sessions.get("00000000-0000-0000-0000-000000000000").catch((e) => e);
    expect(missing).toBeInstanceOf(SessionNotFoundError);
    expect(missing).toMatchObject({ code: "SESSION_NOT_FOUND", status: 404 });
  });

  it("run.cancel() cancels and resolves with the cancelled task", async () => {
    const c = client(gt.url);
    const session = await c.sessions.create({ workspace: gt.workspace, agent: "simulated" });
    const run = await c.turns.submit(session.id, { prompt: "[hang]" });
    const started = new Promise<void>((resolve) =>
      run.on("event", (e) => {
        if (e.type === "task.started") resolve();
      }),
    );
    await started;
    const task = await run.cancel();
    expect(task.status).toBe("cancelled");
  });

  it("GATEWAY_BUSY arrives as GatewayBusyError with retryAfterMs when retrying would outlast readyTimeoutMs", async () => {
    const busy = await gatewayOfItsOwn({ MOORING_MAX_ACTIVE: "1", MOORING_MAX_QUEUED: "0" });
    try {
      const c = client(busy.url, { readyTimeoutMs: 0 });
      const session = await c.sessions.create({ workspace: gt.workspace, agent: "simulated" });
      const other = await c.sessions.create({ workspace: gt.workspace, agent: "simulated" });
      const first = await c.turns.submit(session.id, { prompt: "[hang]" });
      await eventually(async () => (await c.tasks.get(first.taskId)).status === "running");
      const err = await c.turns.submit(other.id, { prompt: "x" }).catch((e) => e);
      expect(err).toBeInstanceOf(GatewayBusyError);
      expect(err.retryAfterMs).toBeGreaterThan(0);
      await first.cancel();
    } finally {
      await busy.stop();
      await busy.db.drop();
    }
  });
});

/**
 * A gateway on a database of its own: the gate's limits count every task in a database, and the
 * other tests of this file leave tasks behind.
 */
async function gatewayOfItsOwn(env: Record<string, string>): Promise<Gateway & { db: TestDatabase }> {
  const own = await claimTestDatabase();
  return Object.assign(await startTestGateway(own.url, env), { db: own });
}

/** Resolves with the first state change that `match` accepts. */
function stateWhere(
  run: { on(kind: "state", h: (s: StateChange) => void): unknown },
  match: (s: StateChange) => boolean,
) {
  return new Promise<StateChange>((resolve) => run.on("state", (s) => match(s) && resolve(s)));
}

/**
 * Lets a turn waiting at its `[input]` go on (the simulated agent echoes the input as text): the
 * test decides when the turn continues, instead of a sleep long enough for what it watches.
 */
async function goOn(taskId: string, base = gt.url): Promise<void> {
  expect((await call(base, "POST", `/v1/tasks/${taskId}/input`, { text: "go on" })).status).toBe(202);
}

const longTurn = (rounds: number, deltas: number, sleepMs: number) =>
  Array.from({ length: rounds }, () => `[deltas ${deltas}][sleep ${sleepMs}]`).join("");

describe("recovery through a proxy", () => {
  for (const transport of ["ws", "sse"] as const) {
    it(`${transport}: cut every 250 ms during a long streamed turn, the joined deltas equal the final message`, async () => {
      const p = await proxy();
      const c = client(p.url, { transport });
      const session = await c.sessions.create({ workspace: gt.workspace, agent: "simulated" });
      const run = await c.turns.submit(session.id, { prompt: longTurn(8, 30, 150) });
      const states: StateChange[] = [];
      run.on("state", (st) => states.push(st));
      const cutter = setInterval(() => p.cutAll(), 250);
      let items: RunItem[];
      try {
        items = await collect(run);
      } finally {
        clearInterval(cutter);
      }
      const task = await run.done();
      expect(task.status).toBe("completed");
      expectExactlyTheLog(items, await logOf(task.id));
      const deltas = items.filter(isEvent).filter((e) => e.type === "message.delta");
      expect(deltas.map((e) => (e.data as { text: string }).text).join("")).toBe(task.result?.text);
      expect(states.filter((st) => st.state === "reconnecting").length).toBeGreaterThan(0);
    });

    it(`${transport}: a stream that ends cleanly before the terminal event does not end the iterator`, async () => {
      const p = await proxy();
      const c = client(p.url, { transport });
      const session = await c.sessions.create({ workspace: gt.workspace, agent: "simulated" });
      const run = await c.turns.submit(session.id, { prompt: "[deltas 2][input][deltas 2]" });
      const streaming = stateWhere(run, (st) => st.state === "streaming");
      const reconnecting = stateWhere(run, (st) => st.state === "reconnecting");
      const consumed = collect(run);
      await streaming;
      p.endStreamsCleanly();
      expect((await reconnecting).reason).toMatch(/ended|closed \(1000/);
      await goOn(run.taskId);
      const items = await consumed;
      const task = await run.done();
      expect(task.status).toBe("completed");
      expectExactlyTheLog(items, await logOf(task.id));
    });
  }

  for (const transport of ["ws", "sse"] as const) {
    it(`${transport}: a proxy that stops forwarding without closing is noticed by the liveness check (2 × ping + 5 s), and the stream resumes`, async () => {
      const p = await proxy();
      // The client's clock runs in real time and the test steps it over the silence: the stall is
      // noticed at a time of that clock, whatever the machine's load.
      const clock = new TestClock();
      const c = client(p.url, { transport, clock });
      const session = await c.sessions.create({ workspace: gt.workspace, agent: "simulated" });
      // The turn waits for input meanwhile: only the client's own liveness check can end the stream.
      const run = await c.turns.submit(session.id, { prompt: "[deltas 2][input][deltas 3]" });
      const streaming = stateWhere(run, (st) => st.state === "streaming");
      const reconnecting = stateWhere(run, (st) => st.state === "reconnecting");
      const consumed = collect(run);
      await streaming;
      p.stallAll();
      // The client's clock jumps over the silence its liveness check allows; the turn waits for
      // input and the proxy forwards nothing, so only that check can notice (the reason says which).
      // No bound on when: this clock also follows real time, which a loaded machine stretches.
      await clock.advance(2 * PING_MS + 5000);
      const noticed = await reconnecting;
      expect(noticed.reason).toMatch(transport === "ws" ? /ping/ : /no data/);
      // The stalled connections go (the REST one kept alive too, which the settling read would
      // otherwise wait on until its own timeout).
      p.cutStalled();
      await goOn(run.taskId);
      const items = await consumed;
      expectExactlyTheLog(items, await logOf((await run.done()).id));
    });
  }

  for (const transport of ["ws", "sse", "poll"] as const) {
    it(`${transport}: a consumer taking 50 ms per event over large tool results: no 4008, a bounded buffer, every event once`, async () => {
      const p = await proxy();
      const c = client(p.url, { transport, maxBufferedEvents: 8, maxBufferedBytes: 16 * 1024 });
      const session = await c.sessions.create({ workspace: gt.workspace, agent: "simulated" });
      const run = await c.turns.submit(session.id, { prompt: `${"[tool 300000]".repeat(12)}[deltas 10]` });
      const states: StateChange[] = [];
      run.on("state", (st) => states.push(st));
      const items: RunItem[] = [];
      for await (const item of run) {
        items.push(item);
        // The slow consumer itself: far slower than the agent writes, so the buffer bound matters.
        await new Promise((r) => setTimeout(r, 50));
      }
      const task = await run.done();
      expectExactlyTheLog(items, await logOf(task.id));
      expect(states.map((st) => st.reason).join(" ")).not.toMatch(/4008/);
      expect(states.filter((st) => st.state === "reconnecting")).toEqual([]);
      expect(run.peakBuffered.events).toBeLessThanOrEqual(8);
      expect(run.peakBuffered.bytes).toBeLessThanOrEqual(16 * 1024 + 4096);
    });
  }

  it("a close with 4008 reconnects at once from the cursor and never reaches user code", async () => {
    const p = await proxy();
    // A backoff this long would outlast the test: only an immediate reconnect finishes in time.
    const c = client(p.url, { backoffBaseMs: 60_000, backoffMaxMs: 60_000 });
    const session = await c.sessions.create({ workspace: gt.workspace, agent: "simulated" });
    const run = await c.turns.submit(session.id, { prompt: "[deltas 2][input][deltas 2]" });
    const streaming = stateWhere(run, (st) => st.state === "streaming");
    const reconnecting = stateWhere(run, (st) => st.state === "reconnecting");
    const consumed = collect(run);
    await streaming;
    p.closeWebSockets(4008);
    expect((await reconnecting).reason).toMatch(/4008/);
    await goOn(run.taskId);
    const items = await consumed;
    expectExactlyTheLog(items, await logOf((await run.done()).id));
  }, 20_000);

  it("the proxy drops the answer of POST …/turns: the retry with the same key makes exactly one task", async () => {
    const p = await proxy();
    const c = client(p.url);
    const session = await c.sessions.create({ workspace: gt.workspace, agent: "simulated" });
    p.dropAnswerTo((r) => r.startsWith("POST /v1/sessions/") && r.endsWith("/turns"));
    const run = await c.turns.submit(session.id, { prompt: "[deltas 3]" });
    const task = await run.done();
    expect(task.status).toBe("completed");
    expect(p.requests.filter((r) => r.endsWith("/turns"))).toHaveLength(2);
    const [{ n }] = await gt.sql<
      { n: number }[]
    >`select count(*)::int as n from tasks where session_id = ${session.id}`;
    expect(n).toBe(1);
  });

  it("streaming blocked, REST allowed: done() resolves through long-polling with no more requests than state changes + 2", async () => {
    const p = await proxy();
    const c = client(p.url);
    const session = await c.sessions.create({ workspace: gt.workspace, agent: "simulated" });
    p.blockStreams = true;
    const before = p.requests.length;
    const run = await c.turns.submit(session.id, { prompt: "[deltas 2][sleep 1500][deltas 2]" });
    const states: StateChange[] = [];
    run.on("state", (st) => states.push(st));
    const items = await collect(run);
    const task = await run.done();
    expect(task.status).toBe("completed");
    expectExactlyTheLog(items, await logOf(task.id));
    expect(states.map((st) => st.state)).toContain("polling");
    // The submit itself is not part of following.
    const requests = p.requests.slice(before + 1).filter((r) => !r.startsWith("GET /v1/ws"));
    expect(requests.length).toBeLessThanOrEqual(states.length + 2);
  });

  it("polling goes back to streaming once streams get through again (after streamRetryMs)", async () => {
    const p = await proxy();
    const c = client(p.url, { streamRetryMs: 1000, longPollMs: 300 });
    const session = await c.sessions.create({ workspace: gt.workspace, agent: "simulated" });
    p.blockStreams = true;
    // The turn waits for input until the client streams again.
    const run = await c.turns.submit(session.id, { prompt: "[deltas 2][input][deltas 2]" });
    const polling = stateWhere(run, (st) => st.state === "polling");
    const consumed = collect(run);
    await polling;
    p.blockStreams = false;
    const back = await stateWhere(run, (st) => st.state === "streaming");
    expect(back.reason).toMatch(/WebSocket/);
    await goOn(run.taskId);
    const items = await consumed;
    expectExactlyTheLog(items, await logOf((await run.done()).id));
  });

  for (const transport of ["ws", "sse", "poll"] as const) {
    it(`${transport}: an aborted signal closes every socket by itself and does not cancel the task`, async () => {
      const p = await proxy();
      // The client's clock stands still: no timer of the client (ping, idle check, poll pause,
      // backoff) ever fires, so every close the proxy sees was made by the abort itself, at once.
      // (A bound in milliseconds measured the machine's load as much as the client.)
      const c = client(p.url, { transport, clock: new FakeClock() });
      const session = await c.sessions.create({ workspace: gt.workspace, agent: "simulated" });
      const controller = new AbortController();
      const run = await c.turns.submit(session.id, { prompt: "[hang]", signal: controller.signal });
      const following =
        transport === "poll"
          ? stateWhere(run, (st) => st.state === "polling")
          : stateWhere(run, (st) => st.state === "streaming");
      const consumed = collect(run).catch((e) => e);
      await following;
      await eventually(async () => p.busy > 0);
      controller.abort();
      await p.whenQuiet();
      expect((await consumed).name).toBe("AbortError");
      await expect(run.done()).rejects.toMatchObject({ name: "AbortError" });
      expect((await c.tasks.get(run.taskId)).status).toBe("running");
      await c.tasks.cancel(run.taskId);
    });
  }
});

describe("tokens and retries", () => {
  it("sends the token on REST, the socket and SSE; without it, UnauthorizedError", async () => {
    const guarded = await startTestGateway(gt.databaseUrl, { MOORING_API_TOKENS: "sdk-secret" });
    try {
      const anonymous = await client(guarded.url)
        .gate()
        .catch((e) => e);
      expect(anonymous).toBeInstanceOf(UnauthorizedError);
      for (const transport of ["ws", "sse", "poll"] as const) {
        const c = client(guarded.url, { token: "sdk-secret", transport });
        const session = await c.sessions.create({ workspace: gt.workspace, agent: "simulated" });
        const run = await c.turns.submit(session.id, { prompt: "[deltas 2]" });
        const items = await collect(run);
        expect((await run.done()).status).toBe("completed");
        expectExactlyTheLog(items, await logOf(run.taskId));
      }
    } finally {
      await guarded.stop();
    }
  });

  it("a 429 on submit is retried after Retry-After with the same key while readyTimeoutMs allows", async () => {
    const busy = await gatewayOfItsOwn({ MOORING_MAX_ACTIVE: "1", MOORING_MAX_QUEUED: "0" });
    try {
      // The client waits out Retry-After on its clock, which the test steps once the slot is free.
      const clock = new TestClock();
      const c = client(busy.url, { readyTimeoutMs: 20_000, clock });
      const one = await c.sessions.create({ workspace: gt.workspace, agent: "simulated" });
      const two = await c.sessions.create({ workspace: gt.workspace, agent: "simulated" });
      const blocker = await c.turns.submit(one.id, { prompt: "[hang]" });
      await eventually(async () => (await c.tasks.get(blocker.taskId)).status === "running");
      const waiting = c.turns.submit(two.id, { prompt: "[deltas 1]" });
      // Refused once (the gateway counts it), then the slot frees while the client waits.
      const refusals = async () =>
        parseExposition(await (await fetch(`${busy.url}/metrics`)).text()).value(
          "mooring_submit_refused_total",
          {
            code: "GATEWAY_BUSY",
          },
        ) ?? 0;
      await eventually(async () => (await refusals()) >= 1);
      await c.tasks.cancel(blocker.taskId);
      await eventually(async () => (await c.tasks.get(blocker.taskId)).status === "cancelled");
      await stepUntilSettled(clock, waiting);
      const run = await waiting;
      expect((await run.done()).status).toBe("completed");
      const [{ n }] = await busy.db.sql<
        { n: number }[]
      >`select count(*)::int as n from tasks where session_id = ${two.id}`;
      expect(n).toBe(1);
    } finally {
      await busy.stop();
      await busy.db.drop();
    }
  });
});

describe("cursors and retention", () => {
  it("following from a saved cursor yields only the events after it; a terminal task yields its tail and ends", async () => {
    const c = client(gt.url);
    const session = await c.sessions.create({ workspace: gt.workspace, agent: "simulated" });
    const run = await c.turns.submit(session.id, { prompt: "[deltas 6]" });
    const all = (await collect(run)).filter(isEvent);
    const saved = all[3].seq;
    const later = c.tasks.follow(run.taskId, { afterSeq: saved });
    const tail = (await collect(later)).filter(isEvent);
    expect(tail.map((e) => e.seq)).toEqual(all.slice(4).map((e) => e.seq));
    expect((await later.done()).status).toBe("completed");
    const none = c.tasks.follow(run.taskId, { afterSeq: all.at(-1)!.seq });
    expect(await collect(none)).toEqual([]);
  });

  it("retention shorter than the cursor: one resync item, then live events, and done() resolves", async () => {
    const short = await startTestGateway(gt.databaseUrl, {
      MOORING_EVENT_RETENTION: "5",
      MOORING_SWEEP_MS: "100",
    });
    try {
      const c = client(short.url);
      const session = await c.sessions.create({ workspace: gt.workspace, agent: "simulated" });
      // Two bursts of deltas, each flushed as its own events (a burst is written as a few events).
      const run = await c.turns.submit(session.id, { prompt: "[deltas 30][input][deltas 3]" });
      const taskId = run.taskId;
      await eventually(async () => (await c.tasks.get(taskId)).status === "running");
      await goOn(taskId, short.url);
      await run.done().catch(() => {});
      await eventually(async () => {
        const [row] = await gt.sql<
          { prunedSeq: number }[]
        >`select pruned_seq from sessions where id = ${session.id}`;
        return row.prunedSeq > 1;
      });
      const later = c.tasks.follow(taskId, { afterSeq: 0 });
      const items = await collect(later);
      const task = await later.done();
      expect(task.status).toBe("completed");
      expect(items.filter((i) => i.type === "resync")).toHaveLength(1);
      expect(items[0]).toMatchObject({ type: "resync", task: { id: taskId } });
      const events = items.filter(isEvent);
      expect(events.length).toBeGreaterThan(0);
      expect(events.at(-1)!.type).toBe("task.completed");
      const fromSeq = (items[0] as { fromSeq: number }).fromSeq;
      expect(events.map((e) => e.seq)).toEqual(Array.from({ length: events.length }, (_, i) => fromSeq + i));
    } finally {
      await short.stop();
    }
  });
});

/** Steps `clock` a second at a time, each once the client waits on it, until `settled` settles. */
async function stepUntilSettled(clock: TestClock, settled: Promise<unknown>): Promise<void> {
  let done = false;
  const end = () => {
    done = true;
  };
  settled.then(end, end);
  for (let i = 0; i < 30 && !done; i++) {
    await eventually(async () => done || clock.pending().length > 0);
    if (!done) await clock.advance(1000);
  }
}
