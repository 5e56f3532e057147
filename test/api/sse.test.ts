import { connect } from "node:net";
import { afterAll, describe, expect, it } from "vitest";
import { useGateway } from "../support/use-gateway.js";
import { createSession, submitPrompt, waitTask } from "../support/turns.js";
import { range } from "../support/ws-client.js";

const HEARTBEAT_MS = 100;

const t = useGateway({ env: { MOORING_SSE_HEARTBEAT_MS: String(HEARTBEAT_MS) }, workspace: true });
const streams: SseStream[] = [];

interface SseRecord {
  id?: string;
  data?: string;
  retry?: string;
  comments: string[];
}

/** A minimal SSE client over fetch: parses records as they arrive and lets a test wait for one. */
class SseStream {
  readonly records: SseRecord[] = [];
  raw = "";
  status = 0;
  headers: Headers | null = null;
  ended = false;
  private readonly abort = new AbortController();
  private waiters: (() => void)[] = [];
  private buffer = "";

  static async open(url: string, headers: Record<string, string> = {}): Promise<SseStream> {
    const stream = new SseStream();
    streams.push(stream);
    const res = await fetch(url, { headers, signal: stream.abort.signal });
    stream.status = res.status;
    stream.headers = res.headers;
    if (res.ok && res.body) void stream.pump(res.body);
    else {
      stream.raw = await res.text();
      stream.ended = true;
    }
    return stream;
  }

  private async pump(body: ReadableStream<Uint8Array>): Promise<void> {
    const decoder = new TextDecoder();
    try {
      for await (const chunk of body) {
        const text = decoder.decode(chunk, { stream: true });
        this.raw += text;
        this.buffer += text;
        let end = this.buffer.indexOf("\n\n");
        while (end >= 0) {
          this.records.push(parseRecord(this.buffer.slice(0, end)));
          this.buffer = this.buffer.slice(end + 2);
          end = this.buffer.indexOf("\n\n");
        }
        this.wake();
      }
    } catch {
      // aborted
    }
    this.ended = true;
    this.wake();
  }

  /** Events (records with data), parsed. */
  get events(): any[] {
    return this.records.filter((r) => r.data !== undefined).map((r) => JSON.parse(r.data!));
  }

  async until(match: () => boolean, timeoutMs = 20_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!match()) {
      if (this.ended) throw new Error(`stream ended before the condition held:\n${this.raw.slice(-500)}`);
      if (Date.now() > deadline) throw new Error(`condition not met in ${timeoutMs} ms`);
      // Woken by the next data, or after 200 ms to look at the deadline again.
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, 200);
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  waitForTerminal(taskId: string): Promise<void> {
    return this.until(() =>
      this.events.some(
        (e) => e.taskId === taskId && /^task\.(completed|failed|cancelled|interrupted|expired)$/.test(e.type),
      ),
    );
  }

  close(): void {
    this.abort.abort();
  }

  private wake(): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const w of waiters) w();
  }
}

function parseRecord(block: string): SseRecord {
  const record: SseRecord = { comments: [] };
  for (const line of block.split("\n")) {
    if (line.startsWith(":")) record.comments.push(line.slice(1).trim());
    else {
      const i = line.indexOf(":");
      const field = i < 0 ? line : line.slice(0, i);
      const value = i < 0 ? "" : line.slice(i + 1).replace(/^ /, "");
      if (field === "id") record.id = value;
      else if (field === "data") record.data = record.data === undefined ? value : `${record.data}\n${value}`;
      else if (field === "retry") record.retry = value;
    }
  }
  return record;
}

async function logSeqs(sessionId: string): Promise<number[]> {
  const rows = await t.sql<
    { seq: number }[]
  >`select seq from events where session_id = ${sessionId} order by seq`;
  return rows.map((r) => r.seq);
}

const eventsUrl = (sessionId: string, query = "") => `${t.url}/v1/sessions/${sessionId}/events${query}`;

afterAll(async () => {
  for (const s of streams) s.close();
});

describe("SSE", () => {
  it("starts with retry:, then records with id: seq and the event as data, replayed then live", async () => {
    const sessionId = await createSession(t.url, t.workspace);
    const done = (await submitPrompt(t.url, sessionId, "[deltas 3] [tool 100]")).id;
    await waitTask(t.url, done);
    const stream = await SseStream.open(eventsUrl(sessionId));
    expect(stream.status).toBe(200);
    expect(stream.headers?.get("content-type")).toMatch(/^text\/event-stream/);
    expect(stream.headers?.get("cache-control")).toContain("no-cache");
    const replayed = (await logSeqs(sessionId)).length;
    await stream.until(() => stream.events.length >= replayed);
    expect(stream.raw.startsWith("retry: ")).toBe(true);
    expect(stream.records[0]).toEqual({ retry: expect.stringMatching(/^\d+$/), comments: [] });

    const live = (await submitPrompt(t.url, sessionId, "[deltas 5] [sleep 50] [tool 3000] [deltas 5]")).id;
    await stream.waitForTerminal(live);
    const all = await logSeqs(sessionId);
    const withData = stream.records.filter((r) => r.data !== undefined);
    expect(withData.map((r) => Number(r.id))).toEqual(all);
    for (const r of withData) {
      const event = JSON.parse(r.data!);
      expect(event.seq).toBe(Number(r.id));
      expect(event).toMatchObject({ sessionId, type: expect.any(String), at: expect.any(String) });
      expect(Object.keys(event).sort()).toEqual(["at", "data", "seq", "sessionId", "taskId", "type"]);
    }
    expect(stream.events.at(-1).type).toBe("task.completed");
  });

  it("sends heartbeat comments on an idle stream", async () => {
    const sessionId = await createSession(t.url, t.workspace);
    const stream = await SseStream.open(eventsUrl(sessionId));
    await stream.until(() => stream.records.filter((r) => r.comments.includes("ping")).length >= 2, 5000);
    expect(stream.events).toEqual([]);
    // Heartbeats are comment-only records: no id, no data.
    for (const r of stream.records.slice(1)) expect(r).toEqual({ comments: ["ping"] });
  });

  it("resumes with Last-Event-ID: exactly the missing events, then live", async () => {
    const sessionId = await createSession(t.url, t.workspace);
    const first = await SseStream.open(eventsUrl(sessionId));
    const taskId = (
      await submitPrompt(
        t.url,
        sessionId,
        "[deltas 5] [tool 200] [sleep 200] [deltas 5] [tool 200] [sleep 200] [deltas 5]",
      )
    ).id;
    await first.until(() => first.events.some((e) => e.type === "tool.result"));
    first.close();
    const lastId = first.records.filter((r) => r.id !== undefined).at(-1)!.id!;
    const seen = first.events;
    expect(seen.map((e) => e.seq)).toEqual(range(1, Number(lastId)));

    const second = await SseStream.open(eventsUrl(sessionId), { "last-event-id": lastId });
    await second.waitForTerminal(taskId);
    const all = await logSeqs(sessionId);
    expect(second.events.map((e) => e.seq)).toEqual(range(Number(lastId) + 1, all.length));
    expect([...seen, ...second.events].map((e) => e.seq)).toEqual(all);
  });

  it("resumes with afterSeq, and the later of afterSeq and Last-Event-ID wins", async () => {
    const sessionId = await createSession(t.url, t.workspace);
    const taskId = (await submitPrompt(t.url, sessionId, "[deltas 5] [tool 10] [tool 10] [tool 10]")).id;
    await waitTask(t.url, taskId);
    const all = await logSeqs(sessionId);
    const after = await SseStream.open(eventsUrl(sessionId, "?afterSeq=3"));
    await after.waitForTerminal(taskId);
    expect(after.events.map((e) => e.seq)).toEqual(range(4, all.length));

    const both = await SseStream.open(eventsUrl(sessionId, "?afterSeq=2"), { "last-event-id": "5" });
    await both.waitForTerminal(taskId);
    expect(both.events.map((e) => e.seq)).toEqual(range(6, all.length));
  });

  it("refuses a bad Last-Event-ID, an unknown session, and a cursor older than the retained log", async () => {
    const sessionId = await createSession(t.url, t.workspace);
    const bad = await SseStream.open(eventsUrl(sessionId), { "last-event-id": "abc" });
    expect(bad.status).toBe(400);
    expect(JSON.parse(bad.raw).error.code).toBe("INVALID_REQUEST");

    const missing = await SseStream.open(eventsUrl("00000000-0000-0000-0000-000000000000"));
    expect(missing.status).toBe(404);
    expect(JSON.parse(missing.raw).error.code).toBe("SESSION_NOT_FOUND");

    const taskId = (await submitPrompt(t.url, sessionId, "[deltas 2] [tool 10]")).id;
    await waitTask(t.url, taskId);
    await t.sql`update sessions set pruned_seq = 2 where id = ${sessionId}`;
    await t.sql`delete from events where session_id = ${sessionId} and seq <= 2`;
    const stale = await SseStream.open(eventsUrl(sessionId, "?afterSeq=1"));
    expect(stale.status).toBe(409);
    expect(JSON.parse(stale.raw).error.code).toBe("RESYNC_REQUIRED");
    const edge = await SseStream.open(eventsUrl(sessionId), { "last-event-id": "2" });
    await edge.waitForTerminal(taskId);
    expect(edge.events[0].seq).toBe(3);
  });

  it("a gateway that served a stream stops without waiting for its clients' idle connections", async () => {
    const gw = await t.startGateway({ MOORING_SSE_HEARTBEAT_MS: String(HEARTBEAT_MS) });
    const sessionId = await createSession(gw.url, t.workspace);
    const stream = await SseStream.open(`${gw.url}/v1/sessions/${sessionId}/events`);
    await stream.until(() => stream.records.length > 0);
    // A client's connection opened ahead of need (as fetch's pool opens one when a stream goes):
    // connected, nothing sent, never closed by this side while the gateway stops.
    const { port } = new URL(gw.url);
    const idle = connect(Number(port), "127.0.0.1");
    await new Promise<void>((resolve, reject) => idle.once("connect", resolve).once("error", reject));
    const order: string[] = [];
    const idleClosed = new Promise<void>((resolve) =>
      idle.once("close", () => {
        order.push("idle connection closed by the gateway");
        resolve();
      }),
    );
    idle.on("error", () => {}); // reset by the gateway: what the test waits for
    const stopped = gw.stop().then(() => order.push("stopped"));
    try {
      // Whichever comes first; before, the stop waited for the client to drop its connection.
      await Promise.race([stopped, idleClosed]);
      await stopped;
      expect(stream.ended).toBe(true);
      expect(order).toEqual(["idle connection closed by the gateway", "stopped"]);
    } finally {
      idle.destroy();
    }
  });
});
