/**
 * WS /v1/ws and SSE close what they open: a subscription whose
 * socket or stream closed before it was registered is dropped; a reader too slow to keep up reads the 4008 close frame it
 * is promised; oversized frames are logged at warn level, throttled, not one error line each.
 */
import { connect } from "node:net";
import { describe, expect, it } from "vitest";
import { useGateway } from "../support/use-gateway.js";
import { call, eventually } from "../support/gateway.js";
import { createSession, submitOk, waitTask } from "../support/turns.js";
import { WsClient } from "../support/ws-client.js";

const MAX_PAYLOAD = 4096;
const MAX_BUFFERED = 1024 * 1024;

const t = useGateway({
  env: {
    MOORING_WS_MAX_PAYLOAD_BYTES: String(MAX_PAYLOAD),
    MOORING_WS_MAX_BUFFERED_BYTES: String(MAX_BUFFERED),
    MOORING_WS_PING_MS: "10000",
  },
  workspace: true,
  gateway: {
    logLevel: "info",
    onLog: (record) => {
      logs.push(record);
      onLog(record);
    },
  },
});
const logs: Record<string, any>[] = [];
let onLog: (record: Record<string, any>) => void = () => {};

describe("subscriptions of closed sockets", () => {
  it("1,000 subscribe batches cut off 1 ms later leave no subscription, no feed and no poll behind", async () => {
    const sessions = await Promise.all(Array.from({ length: 5 }, () => createSession(t.url, t.workspace)));
    const batch = JSON.stringify(
      sessions.map((sessionId, i) => ({
        jsonrpc: "2.0",
        id: i + 1,
        method: "events.subscribe",
        params: { sessionId },
      })),
    );
    const abort = async () => {
      const client = await WsClient.connect(t.url);
      client.sendRaw(batch);
      // The cut itself, timed into the batch's run: not a wait for anything.
      await new Promise((resolve) => setTimeout(resolve, 1));
      await client.close(); // terminate: no closing handshake
    };
    for (let round = 0; round < 20; round++) await Promise.all(Array.from({ length: 50 }, abort));

    // Wait until the gateway has seen every socket close and finished every call it had received.
    await eventually(async () => t.gw.holding().sockets === 0 && t.gw.holding().socketCalls === 0);
    expect(t.gw.holding()).toMatchObject({ subscribers: 0, feeds: 0 });

    // And a subscription that is ended properly still works as before.
    const live = await WsClient.connect(t.url);
    await live.call("events.subscribe", { sessionId: sessions[0] });
    expect(t.gw.holding()).toMatchObject({ subscribers: 1, feeds: 1 });
    await live.close();
    await eventually(async () => t.gw.holding().subscribers === 0 && t.gw.holding().feeds === 0);
  });
});

describe("SSE streams of clients that left", () => {
  it("200 SSE requests aborted while their subscription opens leave no stream and no subscription behind", async () => {
    const sessionId = await createSession(t.url, t.workspace);
    const { hostname, port } = new URL(t.url);
    const request = `GET /v1/sessions/${sessionId}/events HTTP/1.1\r\nHost: ${hostname}:${port}\r\nAccept: text/event-stream\r\n\r\n`;
    // The whole request is sent, then the connection is cut at different points of the opening.
    const abort = async (i: number) => {
      const socket = connect(Number(port), hostname);
      socket.on("error", () => {});
      await new Promise<void>((resolve) => socket.write(request, () => resolve()));
      // The cut, at 0 to 3 ms into the opening: not a wait for anything.
      if (i % 4 > 0) await new Promise((resolve) => setTimeout(resolve, i % 4));
      socket.destroy();
    };
    for (let round = 0; round < 4; round++) await Promise.all(Array.from({ length: 50 }, (_, i) => abort(i)));
    // A read of the same session after all of them (its queries queue behind theirs).
    expect((await call(t.url, "GET", `/v1/sessions/${sessionId}`)).status).toBe(200);
    await eventually(async () => {
      const h = t.gw.holding();
      return h.sseStreams === 0 && h.subscribers === 0 && h.feeds === 0;
    }, 5_000);
  });
});

describe("a reader too slow to keep up", () => {
  it("reads the 4008 close frame behind what it had not read, even after pausing for seconds", async () => {
    const sessionId = await createSession(t.url, t.workspace);
    // ~20 MiB of tool results, far more than the kernel's socket buffers take for a stalled reader.
    const prompt = `${"[tool 2048]".repeat(32)}[sleep 1]`.repeat(250);
    const slow = await WsClient.connect(t.url, { perMessageDeflate: false });
    await slow.call("events.subscribe", { sessionId });
    slow.socket.pause();
    const gaveUp = new Promise<void>((resolve) => {
      onLog = (record) => {
        if (record.msg === "closing a websocket client too slow to read (4008)") resolve();
      };
    });
    const task = await submitOk(t.url, sessionId, { prompt });
    await gaveUp;
    // The reader stays away well past the second after which the gateway used to cut the
    // connection (the client then saw 1006): 2.5 s on the gateway's clock, which times everything
    // the gateway does by itself.
    await t.clock.advance(2500);
    slow.socket.resume();
    const closed = await slow.closed;
    expect(closed.code).toBe(4008);
    expect(closed.reason).toMatch(/too slow/);
    expect(slow.events.length).toBeGreaterThan(0);
    expect(t.gw.holding().subscribers).toBe(0);
    expect((await waitTask(t.url, task.id, undefined, 60_000)).status).toBe("completed");
  });
});

describe("oversized frames", () => {
  it("close the socket with 1009 and log one throttled warn line, no error lines", async () => {
    logs.length = 0;
    const closes = await Promise.all(
      Array.from({ length: 20 }, async () => {
        const client = await WsClient.connect(t.url);
        client.sendRaw("x".repeat(MAX_PAYLOAD + 100));
        return (await client.closed).code;
      }),
    );
    expect(closes.every((code) => code === 1009)).toBe(true);
    const errors = logs.filter((r) => r.level >= 50);
    expect(errors).toEqual([]);
    const warned = logs.filter((r) => r.msg === "websocket client broke the protocol; connection closed");
    expect(warned).toHaveLength(1);
    expect(warned[0]).toMatchObject({ level: 40, code: "WS_ERR_UNSUPPORTED_MESSAGE_LENGTH" });
  });
});
