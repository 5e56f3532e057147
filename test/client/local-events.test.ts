/**
 * A run that follows through a local event source (client/stream.ts, `localEvents`: an `/acp`
 * connection's client inside the gateway), against a scripted source: no socket is opened, a
 * consumer slower than the source never lets the buffer pass its bound (the stream unsubscribes
 * and subscribes again from its cursor once drained) and takes every event once, in order; a
 * RESYNC_REQUIRED refusal is one resync item, then the run goes on from the oldest kept seq.
 */
import { expect, it } from "vitest";
import {
  isResyncItem,
  type LocalEventSource,
  MooringClient,
  type MooringEvent,
  type RunItem,
} from "../../src/client/index.js";

const SESSION = "11111111-1111-4111-8111-111111111111";
const TASK = "22222222-2222-4222-8222-222222222222";

const eventAt = (seq: number, last: number): MooringEvent =>
  ({
    sessionId: SESSION,
    seq,
    taskId: TASK,
    type: seq === last ? "task.completed" : "message.delta",
    at: new Date(0).toISOString(),
    data: seq === last ? { result: { text: "done" } } : { text: String(seq) },
  }) as MooringEvent;

const running = {
  id: TASK,
  sessionId: SESSION,
  status: "running",
  firstSeq: 1,
  lastSeq: 0,
  queueDeadlineAt: new Date(Date.now() + 60_000).toISOString(),
  deadlineAt: new Date(Date.now() + 60_000).toISOString(),
};

/** Answers GET /v1/tasks/:id with the running task; counts what else it is asked. */
function gateway() {
  const asked: string[] = [];
  const fetch = async (input: string) => {
    asked.push(input);
    return new Response(JSON.stringify(running), {
      status: 200,
      headers: { "content-type": "application/json" },
    });
  };
  return { asked, fetch };
}

/** A feed of events 1..last, held back until `release`: each subscribe replays from its cursor in one run. */
function source(
  last: number,
  refuseFirst?: { code: string; status: number; details: Record<string, unknown> },
) {
  const subscribes: number[] = [];
  let open = 0;
  const live = new Set<() => void>();
  const src: LocalEventSource = {
    bootId: "boot-1",
    async subscribe(sessionId, afterSeq, onEvents) {
      expect(sessionId).toBe(SESSION);
      subscribes.push(afterSeq);
      if (refuseFirst && subscribes.length === 1) throw { message: "pruned", ...refuseFirst };
      let active = true;
      open++;
      const from = Math.max(afterSeq + 1, refuseFirst ? Number(refuseFirst.details.oldestSeq) : 1);
      const deliver = () => {
        if (!active) return;
        const run: MooringEvent[] = [];
        for (let seq = from; seq <= last; seq++) run.push(eventAt(seq, last));
        if (run.length > 0) onEvents(run);
      };
      live.add(deliver);
      queueMicrotask(deliver);
      return () => {
        if (!active) return;
        active = false;
        open--;
        live.delete(deliver);
      };
    },
  };
  return {
    src,
    subscribes,
    get open() {
      return open;
    },
  };
}

it("streams through the local source with no socket; a slow consumer keeps the bound and takes every event once", async () => {
  const { fetch, asked } = gateway();
  const feed = source(40);
  const webSocket = () => {
    throw new Error("no socket may be opened");
  };
  const c = new MooringClient({
    url: "http://gateway.invalid",
    fetch,
    webSocket: webSocket as never,
    localEvents: feed.src,
    maxBufferedEvents: 4,
  });
  const run = c.tasks.follow(TASK);
  const seqs: number[] = [];
  for await (const item of run) {
    const e = item as MooringEvent;
    seqs.push(e.seq);
    await new Promise((resolve) => setImmediate(resolve));
  }
  expect(seqs).toEqual(Array.from({ length: 40 }, (_, i) => i + 1));
  // Paused at the bound and resumed from the cursor each time, never from an older seq.
  expect(feed.subscribes.length).toBeGreaterThan(2);
  expect(feed.subscribes).toEqual([...feed.subscribes].sort((a, b) => a - b));
  expect(feed.open).toBe(0);
  // The bound held: the buffer never grew past it however far ahead the source was.
  expect(
    (run as unknown as { follower: { buffer: { peak: { events: number } } } }).follower.buffer.peak.events,
  ).toBe(4);
  expect((await run.done()).status).toBe("completed");
  expect(asked.every((url) => url.includes(`/v1/tasks/${TASK}`))).toBe(true);
});

it("RESYNC_REQUIRED from the source is one resync item, then the events from the oldest kept seq", async () => {
  const { fetch } = gateway();
  const feed = source(12, { code: "RESYNC_REQUIRED", status: 409, details: { oldestSeq: 9 } });
  const c = new MooringClient({ url: "http://gateway.invalid", fetch, localEvents: feed.src });
  const items: RunItem[] = [];
  for await (const item of c.tasks.follow(TASK)) items.push(item);
  expect(isResyncItem(items[0])).toBe(true);
  expect(items[0]).toMatchObject({ fromSeq: 9 });
  expect(items.slice(1).map((i) => (i as MooringEvent).seq)).toEqual([9, 10, 11, 12]);
  expect(feed.subscribes).toEqual([0, 8]);
});
