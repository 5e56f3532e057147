/**
 * Wire budget (docs/api.md, Wire budget) and previews: however large an agent's tool output, events carry
 * previews of at most 2 KiB with the full size, full payloads come on demand, and the reference
 * scenario (10 past turns of 5 tool calls with ~879 KiB of results each, then a measured turn with
 * a 1.05 MiB result) stays within the best published figures, measured on real sockets.
 */
import { request } from "node:http";
import { brotliDecompressSync, gunzipSync } from "node:zlib";
import { afterAll, describe, expect, it } from "vitest";
import { useGateway } from "../support/use-gateway.js";
import { call } from "../support/gateway.js";
import { createSession, submitPrompt, waitTask } from "../support/turns.js";
import { isTerminalEvent, range, seqs, WsClients } from "../support/ws-client.js";

const KiB = 1024;
const BUDGET = { snapshotWire: 7.3 * KiB, liveWire: 6.7 * KiB, liveDecoded: 58 * KiB, liveMessages: 9 };

const t = useGateway({ workspace: true });
const clients = new WsClients(() => t.url);

interface RawAnswer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  /** The body as it crossed the wire (still encoded). */
  wire: Buffer;
  /** The decoded body. */
  body: Buffer;
}

/** A GET that keeps the body as sent: fetch would decode it and hide the wire size. */
function rawGet(url: string, headers: Record<string, string> = {}): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const req = request(url, { headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => {
        const wire = Buffer.concat(chunks);
        const encoding = res.headers["content-encoding"];
        const body =
          encoding === "gzip" ? gunzipSync(wire) : encoding === "br" ? brotliDecompressSync(wire) : wire;
        resolve({ status: res.statusCode ?? 0, headers: res.headers, wire, body });
      });
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end();
  });
}

afterAll(async () => {
  await clients.closeAll();
});

describe("previews", () => {
  it("a 1 MiB tool result (the simulated cap) travels as a ≤ 2 KiB preview with its size; the payload route has it all", async () => {
    const sessionId = await createSession(t.url, t.workspace);
    const client = await clients.connect();
    await client.call("events.subscribe", { sessionId });
    const task = await client.call("turns.submit", { sessionId, prompt: "[tool 1048576] [tool 300]" });
    await client.waitForTerminal(sessionId, task.id);
    const results = client.eventsOf(sessionId).filter((e) => e.type === "tool.result");
    expect(results).toHaveLength(2);
    const [big, small] = results;
    expect(Buffer.byteLength(big.data.preview)).toBeLessThanOrEqual(2048);
    expect(Buffer.byteLength(big.data.preview)).toBeGreaterThan(2000);
    expect(big.data).toMatchObject({ id: "tool-1", isError: false, bytes: 1_048_576, truncated: true });
    expect(small.data).toMatchObject({ preview: "x".repeat(300), bytes: 300 });
    // Every event on the wire is small.
    for (const frame of client.received) expect(frame.bytes).toBeLessThan(8 * KiB);

    const payload = await call(t.url, "GET", `/v1/sessions/${sessionId}/events/${big.seq}/payload`);
    expect(payload.status).toBe(200);
    expect(payload.body).toMatchObject({ sessionId, seq: big.seq, type: "tool.result" });
    expect(payload.body.payload.output).toHaveLength(1_048_576);
    expect(payload.body.payload.output).toBe("x".repeat(1_048_576));
    // An event without a cut preview answers its own data.
    const smallPayload = await call(t.url, "GET", `/v1/sessions/${sessionId}/events/${small.seq}/payload`);
    expect(smallPayload.body.payload).toMatchObject({ preview: "x".repeat(300), bytes: 300 });
    const none = await call(t.url, "GET", `/v1/sessions/${sessionId}/events/99999/payload`);
    expect(none.status).toBe(404);
    expect(none.body.error.code).toBe("EVENT_NOT_FOUND");

    // The snapshot carries previews only.
    const snapshot = await call(t.url, "GET", `/v1/sessions/${sessionId}`);
    expect(JSON.stringify(snapshot.body).length).toBeLessThan(4 * KiB);
  });

  it("compresses large JSON responses when the client accepts it, and only then", async () => {
    const sessionId = await createSession(t.url, t.workspace);
    await waitTask(t.url, (await submitPrompt(t.url, sessionId, "[tool 50000]")).id);
    const url = `${t.url}/v1/sessions/${sessionId}/events/4/payload`;
    const plain = await rawGet(url);
    expect(plain.headers["content-encoding"]).toBeUndefined();
    expect(plain.headers.vary).toMatch(/accept-encoding/i);
    const gz = await rawGet(url, { "accept-encoding": "gzip" });
    expect(gz.headers["content-encoding"]).toBe("gzip");
    expect(gz.body.equals(plain.body)).toBe(true);
    expect(gz.wire.length).toBeLessThan(plain.wire.length / 10);
    const br = await rawGet(url, { "accept-encoding": "gzip, br" });
    expect(br.headers["content-encoding"]).toBe("br");
    expect(br.body.equals(plain.body)).toBe(true);
    const refused = await rawGet(url, { "accept-encoding": "gzip;q=0, br;q=0" });
    expect(refused.headers["content-encoding"]).toBeUndefined();
    // Small bodies are sent as they are.
    const small = await rawGet(`${t.url}/v1/gate`, { "accept-encoding": "gzip" });
    expect(small.headers["content-encoding"]).toBeUndefined();
    expect(JSON.parse(small.body.toString())).toHaveProperty("maxActive");
  });
});

describe("wire budget (docs/api.md, Wire budget)", () => {
  it("the reference scenario stays within the published figures", async () => {
    const sessionId = await createSession(t.url, t.workspace);
    // 10 past turns: 5 tool calls each, 5 × 180000 B = 879 KiB of tool results per turn.
    const pastPrompt = "[tool 180000] ".repeat(5).trim();
    let last = "";
    for (let i = 0; i < 10; i++) {
      last = (await submitPrompt(t.url, sessionId, pastPrompt)).id;
    }
    expect((await waitTask(t.url, last)).status).toBe("completed");
    const [{ total }] = await t.sql<{ total: number }[]>`
      select sum(length(payload->>'output'))::int8 as total from events where session_id = ${sessionId}`;
    expect(total).toBe(10 * 5 * 180_000);

    // Snapshot, as served with compression.
    const snapshot = await rawGet(`${t.url}/v1/sessions/${sessionId}`, { "accept-encoding": "gzip" });
    expect(snapshot.status).toBe(200);
    expect(snapshot.headers["content-encoding"]).toBe("gzip");
    const view = JSON.parse(snapshot.body.toString());
    expect(view.turns).toHaveLength(10);

    // The measured turn: 5 tool calls, 1.05 MiB of results. Subscribe first, submit over the socket,
    // count everything the socket receives from the submit to the terminal event.
    const client = await clients.connect();
    const subscribed = await client.call("events.subscribe", { sessionId, afterSeq: view.lastSeq });
    expect(subscribed.headSeq).toBe(view.lastSeq);
    // A second subscriber without compression checks the byte counter itself (wire ≥ decoded).
    const plain = await clients.connect(t.url, { perMessageDeflate: false });
    await plain.call("events.subscribe", { sessionId, afterSeq: view.lastSeq });
    plain.resetCounters();
    const measuredPrompt = "[tool 1000] [tool 1000] [tool 1000] [tool 1000] [tool 1048576]";
    const from = client.resetCounters();
    const task = await client.call("turns.submit", { sessionId, prompt: measuredPrompt });
    const terminal = await client.waitForTerminal(sessionId, task.id);
    const wire = client.wireBytes;
    const decoded = client.decodedBytes;
    const frames = client.received.slice(from);
    const terminalFrame = frames.findIndex((r) =>
      (Array.isArray(r.message) ? r.message : [r.message]).some(
        (m: any) => m.method === "event" && isTerminalEvent(m.params),
      ),
    );
    const messages = terminalFrame + 1;
    expect(terminal.type).toBe("task.completed");
    expect(frames.length).toBe(messages); // nothing after the terminal event
    const turnEvents = client.eventsOf(sessionId);
    expect(seqs(turnEvents)).toEqual(range(view.lastSeq + 1, terminal.seq));
    expect(turnEvents.filter((e) => e.type === "tool.result").map((e) => e.data.bytes)).toEqual([
      1000, 1000, 1000, 1000, 1_048_576,
    ]);
    await plain.waitForTerminal(sessionId, task.id);
    expect(plain.ws.extensions).toBe("");
    expect(plain.wireBytes).toBeGreaterThanOrEqual(plain.decodedBytes);
    expect(plain.decodedBytes).toBeGreaterThan(8 * KiB);
    const after = await rawGet(`${t.url}/v1/sessions/${sessionId}`, { "accept-encoding": "gzip" });

    const kib = (n: number) => `${(n / KiB).toFixed(1)} KiB`;
    console.log(
      [
        "wire budget (docs/api.md, Wire budget):",
        `  snapshot (10 past turns): ${kib(snapshot.wire.length)} on the wire (gzip), ${kib(snapshot.body.length)} decoded   [budget ${kib(BUDGET.snapshotWire)}]`,
        `  snapshot after the measured turn: ${kib(after.wire.length)} on the wire, ${kib(after.body.length)} decoded`,
        `  live turn: ${kib(wire)} on the wire (permessage-deflate), ${kib(decoded)} decoded, ${messages} messages, ${turnEvents.length} events   [budget ${kib(BUDGET.liveWire)}, ${kib(BUDGET.liveDecoded)}, ${BUDGET.liveMessages}]`,
        `  (the same events to a subscriber without permessage-deflate: ${kib(plain.wireBytes)} on the wire)`,
      ].join("\n"),
    );
    expect(client.ws.extensions).toContain("permessage-deflate");
    expect(snapshot.wire.length).toBeLessThanOrEqual(BUDGET.snapshotWire);
    expect(after.wire.length).toBeLessThanOrEqual(BUDGET.snapshotWire);
    expect(wire).toBeLessThanOrEqual(BUDGET.liveWire);
    expect(decoded).toBeLessThanOrEqual(BUDGET.liveDecoded);
    expect(messages).toBeLessThanOrEqual(BUDGET.liveMessages);
  });
});
