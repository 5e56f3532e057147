import { Socket } from "node:net";
import WebSocket from "ws";
import { afterAll, describe, expect, it } from "vitest";
import { useGateway } from "../support/use-gateway.js";
import { call, eventually } from "../support/gateway.js";
import { createSession, submitPrompt, waitTask } from "../support/turns.js";
import {
  isTerminalEvent,
  range,
  seqs,
  type WsClient,
  WsClients,
  type WsEvent,
} from "../support/ws-client.js";

// Short enough for the ping test to be quick, long enough that a loaded machine delaying the test
// process's pongs by a few hundred milliseconds does not get every other test's socket dropped.
const PING_MS = 1000;
const MAX_PAYLOAD = 4096;

const gt = useGateway({
  env: {
    MOORING_WS_PING_MS: String(PING_MS),
    MOORING_WS_MAX_PAYLOAD_BYTES: String(MAX_PAYLOAD),
  },
  workspace: true,
});
const clients = new WsClients(() => gt.url);

async function logSeqs(sessionId: string): Promise<number[]> {
  const rows = await gt.sql<
    { seq: number }[]
  >`select seq from events where session_id = ${sessionId} order by seq`;
  return rows.map((r) => r.seq);
}

/** Every event of `sessionId` must come exactly once, in order, starting right after `after`. */
function expectContiguous(events: WsEvent[], after: number, through: number) {
  expect(seqs(events)).toEqual(range(after + 1, through));
}

afterAll(async () => {
  await clients.closeAll();
});

describe("connection", () => {
  it("sends hello {instanceId, bootId, version} first (no host or pid); a second connection sees the same boot", async () => {
    const a = await clients.connect();
    const first = a.received[0].message;
    expect(first).toMatchObject({
      jsonrpc: "2.0",
      method: "hello",
      params: {
        instanceId: gt.gw.identity.instanceId,
        bootId: gt.gw.identity.bootId,
        version: gt.gw.identity.version,
        pingMs: PING_MS,
      },
    });
    expect(first.params).not.toHaveProperty("host");
    expect(first.params).not.toHaveProperty("pid");
    const b = await clients.connect();
    expect((await b.hello).bootId).toBe(gt.gw.identity.bootId);
  });

  it("negotiates permessage-deflate", async () => {
    const c = await clients.connect();
    expect(c.ws.extensions).toContain("permessage-deflate");
  });

  it("answers a malformed frame with -32700 and stays open", async () => {
    const c = await clients.connect();
    const before = c.received.length;
    c.sendRaw("{not json");
    await c.until(() => c.received.length > before);
    expect(c.received[before].message).toMatchObject({ jsonrpc: "2.0", id: null, error: { code: -32700 } });
    expect(c.ws.readyState).toBe(WebSocket.OPEN);
    const gate = await c.call("gate.status");
    expect(gate).toHaveProperty("maxActive");
  });

  it("answers an unknown method with -32601 and stays open", async () => {
    const c = await clients.connect();
    const answer = await c.request("no.such.method", {});
    expect(answer.error?.code).toBe(-32601);
    expect(c.ws.readyState).toBe(WebSocket.OPEN);
    // An invalid request (no method) is -32600, also without closing.
    const before = c.received.length;
    c.sendRaw(JSON.stringify({ jsonrpc: "2.0", id: 99 }));
    await c.until(() => c.received.length > before);
    expect(c.received[before].message).toMatchObject({ id: 99, error: { code: -32600 } });
    expect(await c.call("gate.status")).toHaveProperty("maxQueued");
  });

  it("closes the socket with 1009 on a frame larger than MOORING_WS_MAX_PAYLOAD_BYTES", async () => {
    const c = await clients.connect();
    c.sendRaw(
      JSON.stringify({
        jsonrpc: "2.0",
        id: 1,
        method: "gate.status",
        params: { pad: "p".repeat(MAX_PAYLOAD * 2) },
      }),
    );
    const closed = await c.closed;
    expect(closed.code).toBe(1009);
    // A frame just under the limit is fine.
    const d = await clients.connect();
    const answer = await d.request("gate.status", { pad: "p".repeat(MAX_PAYLOAD - 200) });
    expect(answer.error?.data?.code).toBe("INVALID_REQUEST");
    expect(d.ws.readyState).toBe(WebSocket.OPEN);
  });

  it("keeps a peer that answers pings and drops one that does not after about two intervals", async () => {
    const live = await clients.connect();
    const silent = await clients.connect(gt.url, { autoPong: false });
    // On the gateway's clock, stepped one ping interval at a time.
    const openedAt = gt.clock.now();
    let after = Number.NaN;
    void silent.closed.then(() => {
      after = gt.clock.now() - openedAt;
    });
    for (let tick = 1; tick <= 3; tick++) {
      await gt.clock.advance(PING_MS);
      await live.until(() => live.pings >= tick, 20_000, `ping ${tick}`);
      // Answered after the pong it sent first: the gateway has heard the pong.
      await live.call("gate.status");
    }
    const closed = await silent.closed;
    expect(closed.code).toBe(1006); // terminated, no closing handshake
    // Silent for two intervals, dropped at the next ping tick (measured from the client's side,
    // which learns of the connection a moment after the server starts counting).
    // No upper bound: the gateway's clock also follows real time, which a loaded machine stretches;
    // that the silent peer is closed at all while the answering one stays is the check at work.
    expect(after).toBeGreaterThanOrEqual(2 * PING_MS - 50);
    // By now the answering peer has been pinged several times and is still there.
    expect(live.pings).toBeGreaterThanOrEqual(3);
    expect(live.ws.readyState).toBe(WebSocket.OPEN);
    expect(await live.call("gate.status")).toHaveProperty("active");
  });
});

describe("JSON-RPC over the socket", () => {
  it("serves every method of the spec", async () => {
    const c = await clients.connect();
    const session = await c.call("sessions.create", {
      workspace: gt.workspace,
      agent: "simulated",
      title: "rpc",
    });
    expect(session).toMatchObject({ agent: "simulated", title: "rpc", status: "idle" });
    expect((await c.call("sessions.get", { sessionId: session.id })).id).toBe(session.id);
    const listed = await c.call("sessions.list", { limit: 200 });
    expect(listed.items.map((s: any) => s.id)).toContain(session.id);

    const task = await c.call("turns.submit", { sessionId: session.id, prompt: "[deltas 2]" });
    expect(task).toMatchObject({ sessionId: session.id, turnIndex: expect.any(Number) });
    let got = await c.call("tasks.get", { taskId: task.id, waitMs: 5000 });
    while (got.status !== "completed") got = await c.call("tasks.get", { taskId: task.id, waitMs: 5000 });
    expect(got.result.text).toBe("chunk 1 chunk 2 ");
    const tasks = await c.call("tasks.list", { sessionId: session.id });
    expect(tasks.items.map((t: any) => t.id)).toEqual([task.id]);

    const hanging = await c.call("turns.submit", { sessionId: session.id, prompt: "[hang]" });
    const cancelled = await c.call("tasks.cancel", { taskId: hanging.id });
    expect(["cancelling", "cancelled"]).toContain(cancelled.status);
    expect((await waitTask(gt.url, hanging.id)).status).toBe("cancelled");

    const gate = await c.call("gate.status");
    expect(gate).toMatchObject({ maxActive: expect.any(Number), maxQueued: expect.any(Number) });

    const archived = await c.call("sessions.archive", { sessionId: session.id });
    expect(archived.status).toBe("archived");

    // Domain errors carry data.code.
    const missing = await c.request("sessions.get", { sessionId: "00000000-0000-0000-0000-000000000000" });
    expect(missing.error).toMatchObject({ code: -32004, data: { code: "SESSION_NOT_FOUND" } });
    const invalid = await c.request("turns.submit", { sessionId: session.id });
    expect(invalid.error).toMatchObject({ code: -32602, data: { code: "INVALID_REQUEST" } });
  });

  it("keeps events.subscribe to sockets: over POST /v1/rpc it is INVALID_REQUEST", async () => {
    const sessionId = await createSession(gt.url, gt.workspace);
    const res = await call(gt.url, "POST", "/v1/rpc", {
      jsonrpc: "2.0",
      id: 1,
      method: "events.subscribe",
      params: { sessionId },
    });
    expect(res.body.error.data.code).toBe("INVALID_REQUEST");
  });
});

describe("subscriptions", () => {
  it("answers {sessionId, headSeq, session} before any event of that subscription", async () => {
    const sessionId = await createSession(gt.url, gt.workspace);
    const taskId = (await submitPrompt(gt.url, sessionId, "[deltas 3] [tool 100] [tool 100] [tool 100]")).id;
    await waitTask(gt.url, taskId);
    const head = (await logSeqs(sessionId)).at(-1)!;
    const c = await clients.connect();
    const before = c.received.length;
    const result = await c.call("events.subscribe", { sessionId, afterSeq: 0 });
    expect(result.sessionId).toBe(sessionId);
    expect(result.headSeq).toBe(head);
    expect(result.session).toMatchObject({ id: sessionId, lastSeq: head });
    await c.until(() => c.eventsOf(sessionId).length >= head);
    const answerIndex = c.received.findIndex(
      (r, i) => i >= before && r.message.id !== undefined && r.message.result,
    );
    const firstEventIndex = c.received.findIndex(
      (r) => (Array.isArray(r.message) ? r.message[0] : r.message).method === "event",
    );
    expect(answerIndex).toBeGreaterThanOrEqual(0);
    expect(firstEventIndex).toBeGreaterThan(answerIndex);
    expectContiguous(c.eventsOf(sessionId), 0, head);
    // The replay is batched: far fewer frames than events.
    expect(c.received.length - answerIndex - 1).toBeLessThan(head);
  });

  it("answers first even while a turn is writing events during the subscribe", async () => {
    const sessionId = await createSession(gt.url, gt.workspace);
    const taskId = (await submitPrompt(gt.url, sessionId, `${"[deltas 5] [sleep 5] ".repeat(40)}`)).id;
    const c = await clients.connect();
    const result = await c.call("events.subscribe", { sessionId });
    const answerAt = c.received.findIndex((r) => r.message.result?.headSeq !== undefined);
    await c.waitForTerminal(sessionId, taskId);
    const eventFrames = c.received
      .map((r, i) => ({ i, m: Array.isArray(r.message) ? r.message[0] : r.message }))
      .filter((x) => x.m.method === "event");
    expect(eventFrames[0].i).toBeGreaterThan(answerAt);
    expect(result.headSeq).toBeGreaterThanOrEqual(1);
    expectContiguous(c.eventsOf(sessionId), 0, (await logSeqs(sessionId)).at(-1)!);
  });

  it("serves several subscriptions on one socket, each complete and in order", async () => {
    const a = await createSession(gt.url, gt.workspace);
    const b = await createSession(gt.url, gt.workspace);
    const c = await clients.connect();
    await c.call("events.subscribe", { sessionId: a });
    await c.call("events.subscribe", { sessionId: b });
    const ta = (await submitPrompt(gt.url, a, "[deltas 20] [tool 3000] [sleep 30] [deltas 20]")).id;
    const tb = (await submitPrompt(gt.url, b, "[deltas 10] [sleep 10] [tool 50] [deltas 10]")).id;
    await c.waitForTerminal(a, ta);
    await c.waitForTerminal(b, tb);
    expectContiguous(c.eventsOf(a), 0, (await logSeqs(a)).at(-1)!);
    expectContiguous(c.eventsOf(b), 0, (await logSeqs(b)).at(-1)!);
    expect(c.eventsOf(a).at(-1)!.type).toBe("task.completed");
    expect(c.eventsOf(b).at(-1)!.type).toBe("task.completed");
  });

  it("stops delivery after events.unsubscribe", async () => {
    const sessionId = await createSession(gt.url, gt.workspace);
    const quitter = await clients.connect();
    const witness = await clients.connect();
    await quitter.call("events.subscribe", { sessionId });
    await witness.call("events.subscribe", { sessionId });
    const first = (await submitPrompt(gt.url, sessionId, "[deltas 2]")).id;
    await quitter.waitForTerminal(sessionId, first);
    expect(await quitter.call("events.unsubscribe", { sessionId })).toEqual({
      sessionId,
      unsubscribed: true,
    });
    const second = (await submitPrompt(gt.url, sessionId, "[deltas 5] [tool 10]")).id;
    await witness.waitForTerminal(sessionId, second);
    // A round trip after the turn ended: anything still in flight for the quitter would be ahead of it.
    await quitter.call("gate.status");
    expect(quitter.eventsOf(sessionId).filter((e) => e.taskId === second)).toEqual([]);
    expect(witness.eventsOf(sessionId).filter((e) => e.taskId === second).length).toBeGreaterThan(3);
    expect(await quitter.call("events.unsubscribe", { sessionId })).toEqual({
      sessionId,
      unsubscribed: false,
    });
  });

  it("replays from Postgres then goes live with no gap or duplicate at the seam", async () => {
    const sessionId = await createSession(gt.url, gt.workspace);
    const taskId = (await submitPrompt(gt.url, sessionId, "[deltas 3] [sleep 15] ".repeat(40))).id;
    // Wait until the running turn has written a good part of its log, then start in its middle.
    const head = await eventually(async () => {
      const [row] = await gt.sql<
        { lastSeq: number }[]
      >`select last_seq from sessions where id = ${sessionId}`;
      return row.lastSeq >= 20 ? row.lastSeq : null;
    });
    const after = Math.floor(head / 2);
    const c = await clients.connect();
    const result = await c.call("events.subscribe", { sessionId, afterSeq: after });
    expect(result.headSeq).toBeGreaterThanOrEqual(head);
    const terminal = await c.waitForTerminal(sessionId, taskId);
    expect(terminal.type).toBe("task.completed");
    const all = await logSeqs(sessionId);
    expect(all).toEqual(range(1, all.length));
    expectContiguous(c.eventsOf(sessionId), after, all.at(-1)!);
    // Live events arrived after the subscribe answer, i.e. the turn was still running at the seam.
    expect(all.at(-1)!).toBeGreaterThan(result.headSeq);
  });

  it("answers RESYNC_REQUIRED for a cursor older than the retained log", async () => {
    const sessionId = await createSession(gt.url, gt.workspace);
    const taskId = (await submitPrompt(gt.url, sessionId, "[deltas 4] [tool 10] [tool 10]")).id;
    await waitTask(gt.url, taskId);
    const all = await logSeqs(sessionId);
    // Simulate pruning: the first 3 events are gone.
    await gt.sql`update sessions set pruned_seq = 3 where id = ${sessionId}`;
    await gt.sql`delete from events where session_id = ${sessionId} and seq <= 3`;
    const c = await clients.connect();
    const stale = await c.request("events.subscribe", { sessionId, afterSeq: 1 });
    expect(stale.error).toMatchObject({ code: -32010, data: { code: "RESYNC_REQUIRED" } });
    const fromZero = await c.request("events.subscribe", { sessionId });
    expect(fromZero.error?.data?.code).toBe("RESYNC_REQUIRED");
    // The socket stays usable and a cursor at the retention edge is served.
    const ok = await c.call("events.subscribe", { sessionId, afterSeq: 3 });
    expect(ok.headSeq).toBe(all.at(-1));
    await c.until(() => c.eventsOf(sessionId).length >= all.length - 3);
    expectContiguous(c.eventsOf(sessionId), 3, all.at(-1)!);
  });

  it("drops unknown sessions with SESSION_NOT_FOUND", async () => {
    const c = await clients.connect();
    const answer = await c.request("events.subscribe", { sessionId: "00000000-0000-0000-0000-000000000001" });
    expect(answer.error?.data?.code).toBe("SESSION_NOT_FOUND");
  });
});

describe("slow consumers", () => {
  const MAX_BUFFERED = 2 * 1024 * 1024;
  /** Called with the gateway's log records. */
  let onLog: (record: Record<string, any>) => void = () => {};
  // A database and gateway of its own: the main gateway's sessions stay out of these counts.
  const own = useGateway({
    // A stalled reader does not answer pings either: keep the ping drop out of this test.
    env: { MOORING_WS_MAX_BUFFERED_BYTES: String(MAX_BUFFERED), MOORING_WS_PING_MS: "10000" },
    gateway: { logLevel: "info", onLog: (record) => onLog(record) },
  });

  /** The gateway's end of a client's TCP connection (same process). */
  function serverSide(client: WsClient): Socket {
    const port = Number(new URL(own.url).port);
    const handles = (process as unknown as { _getActiveHandles(): unknown[] })._getActiveHandles();
    const found = handles.find(
      (h): h is Socket =>
        h instanceof Socket && h.localPort === port && h.remotePort === client.socket.localPort,
    );
    if (!found) throw new Error("server side of the socket not found");
    return found;
  }

  it("closes a client that stops reading with 4008; others keep everything; memory stays flat", async () => {
    const base = own.url;
    const sessionId = await createSession(base, gt.workspace);
    // Each [tool 2048] is two events, the result carrying a 2 KiB preview: ~20 MiB per turn, far
    // more than the kernel's socket buffers take for a reader that stopped. The agent emits in
    // bursts of 32 tool calls (64 events, one log flush).
    const prompt = `${"[tool 2048]".repeat(32)}[sleep 1]`.repeat(250);

    const fast = await clients.connect(base);
    const slow = await clients.connect(base, { perMessageDeflate: false });
    await fast.call("events.subscribe", { sessionId });
    await slow.call("events.subscribe", { sessionId });
    const held = serverSide(slow);
    slow.socket.pause();
    // The moment the gateway gives up on the stalled reader, it reads again: the 4008 close frame
    // is queued behind what it had not read, and the gateway cuts the TCP connection a second later.
    let gaveUp = false;
    onLog = (record) => {
      if (record.msg === "closing a websocket client too slow to read (4008)" && !gaveUp) {
        gaveUp = true;
        slow.socket.resume();
      }
    };
    // What the gateway holds for the stalled reader (bytes the kernel would not take), sampled.
    let peakHeld = 0;
    const sampler = setInterval(() => {
      peakHeld = Math.max(peakHeld, held.writableLength);
    }, 5);
    const taskId = (await submitPrompt(base, sessionId, prompt)).id;
    const terminal = await fast.waitForTerminal(sessionId, taskId, 60_000);
    clearInterval(sampler);
    peakHeld = Math.max(peakHeld, held.writableLength);

    // The reader that kept up got every event of the turn once, in order.
    expect(terminal.type).toBe("task.completed");
    const [{ lastSeq }] = await own.sql<
      { lastSeq: number }[]
    >`select last_seq from sessions where id = ${sessionId}`;
    expectContiguous(fast.eventsOf(sessionId), 0, lastSeq);
    expect(fast.decodedBytes).toBeGreaterThan(16 * 1024 * 1024);

    console.log(
      `slow consumer: gateway held at most ${(peakHeld / 1048576).toFixed(2)} MiB for the stalled reader ` +
        `(turn ${(fast.decodedBytes / 1048576).toFixed(1)} MiB, bound ${(MAX_BUFFERED / 1048576).toFixed(0)} MiB)`,
    );
    // Memory stays flat: at most the bound plus the frame that crossed it, not the turn.
    expect(peakHeld).toBeLessThan(MAX_BUFFERED + 2 * 1024 * 1024);

    // The gateway gave up on the stalled reader during the turn; it found a prefix of the log and
    // then the 4008 close.
    expect(gaveUp).toBe(true);
    const closed = await Promise.race([
      slow.closed,
      fast.until(() => false, 5_000, "the 4008 close of the stalled reader").then(() => null),
    ]);
    expect(closed?.code).toBe(4008);
    const got = slow.eventsOf(sessionId);
    expect(got.length).toBeLessThan(lastSeq);
    expectContiguous(got, 0, got.length);

    // It resumes with its last seq and gets exactly the rest.
    const again = await clients.connect(base);
    const resumeFrom = got.at(-1)?.seq ?? 0;
    await again.call("events.subscribe", { sessionId, afterSeq: resumeFrom });
    await again.waitForTerminal(sessionId, taskId, 30_000);
    expectContiguous(again.eventsOf(sessionId), resumeFrom, lastSeq);

    // A reader that keeps up is never closed, even by a replay of the whole log (500-event pages
    // of ~1 MiB, handed over faster than permessage-deflate compresses them).
    const replay = await clients.connect(base);
    await replay.call("events.subscribe", { sessionId, afterSeq: 0 });
    await replay.waitForTerminal(sessionId, taskId, 30_000);
    expectContiguous(replay.eventsOf(sessionId), 0, lastSeq);
    expect(replay.closeEvent).toBeNull();
    expect(again.closeEvent).toBeNull();
  });
});

describe("events are committed first", () => {
  it("every event a subscriber sees is already in the log", async () => {
    const sessionId = await createSession(gt.url, gt.workspace);
    const c = await clients.connect();
    await c.call("events.subscribe", { sessionId });
    const checks: Promise<boolean>[] = [];
    c.ws.on("message", () => {
      for (const e of c.eventsOf(sessionId)) {
        if ((e as WsEvent & { checked?: boolean }).checked) continue;
        (e as WsEvent & { checked?: boolean }).checked = true;
        checks.push(
          gt.sql`select 1 from events where session_id = ${sessionId} and seq = ${e.seq}`.then(
            (r) => r.length === 1,
          ),
        );
      }
    });
    const taskId = (
      await submitPrompt(gt.url, sessionId, "[deltas 10] [tool 10] [sleep 10] [deltas 10] [tool 10]")
    ).id;
    await c.waitForTerminal(sessionId, taskId);
    const results = await Promise.all(checks);
    expect(results.length).toBeGreaterThan(0);
    expect(results.every(Boolean)).toBe(true);
    expect(c.eventsOf(sessionId).every((e) => !isTerminalEvent(e) || e.taskId === taskId)).toBe(true);
  });
});
