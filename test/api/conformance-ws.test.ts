/**
 * WebSocket details third-party clients trip on: event frames may be
 * JSON-RPC batches unless a subscription asks for `batch: false`; only the documented subprotocol
 * is accepted; a peer's stray JSON-RPC responses are dropped and counted, never answered. A real
 * gateway on a real database, real `ws` clients.
 */
import { once } from "node:events";
import { JSONRPCClient, JSONRPCErrorException, JSONRPCServer, JSONRPCServerAndClient } from "json-rpc-2.0";
import WebSocket from "ws";
import { afterAll, describe, expect, it } from "vitest";
import { useGateway } from "../support/use-gateway.js";
import { parseExposition } from "../support/prometheus.js";
import { createSession, runTurn } from "../support/turns.js";
import { isTerminalEvent, range, seqs, WsClients } from "../support/ws-client.js";

const t = useGateway({ workspace: true });
const clients = new WsClients(() => t.url);
const strays = async () =>
  parseExposition(await (await fetch(`${t.url}/metrics`)).text()).value("mooring_ws_stray_responses_total");
const wsUrl = () => `${t.url.replace(/^http/, "ws")}/v1/ws`;

afterAll(async () => {
  await clients.closeAll();
});

describe("event frames", () => {
  it("a replay comes as batch arrays by default, one notification per frame with batch: false", async () => {
    const sessionId = await createSession(t.url, t.workspace);
    await runTurn(t.url, sessionId, "hello there");
    const batched = await clients.connect();
    const single = await clients.connect();
    const head = (await batched.call("events.subscribe", { sessionId })).headSeq;
    expect((await single.call("events.subscribe", { sessionId, batch: false })).headSeq).toBe(head);
    expect(head).toBeGreaterThan(2);
    for (const c of [batched, single]) await c.until(() => c.eventsOf(sessionId).some(isTerminalEvent));
    expect(seqs(batched.eventsOf(sessionId))).toEqual(range(1, head));
    expect(seqs(single.eventsOf(sessionId))).toEqual(range(1, head));
    const frames = (c: typeof batched) =>
      c.received.map((r) => r.message).filter((m) => Array.isArray(m) || m.method === "event");
    expect(frames(batched).some(Array.isArray)).toBe(true);
    expect(frames(single).some(Array.isArray)).toBe(false);
    expect(frames(single)).toHaveLength(head);
  });

  it("batch must be a boolean", async () => {
    const c = await clients.connect();
    const sessionId = await createSession(t.url, t.workspace);
    const answer = await c.request("events.subscribe", { sessionId, batch: "no" });
    expect(answer.error).toMatchObject({ code: -32602, data: { code: "INVALID_REQUEST" } });
  });
});

describe("subprotocols", () => {
  it("accepts mooring.v1 when offered, none otherwise, and never echoes another", async () => {
    const raw = new WebSocket(wsUrl(), ["graphql-ws", "mooring.v1"]);
    await once(raw, "open");
    expect(raw.protocol).toBe("mooring.v1");
    raw.close();
    const plain = new WebSocket(wsUrl());
    await once(plain, "open");
    expect(plain.protocol).toBe("");
    plain.close();
    // A client offering only another protocol is not told the server speaks it: `ws` fails it.
    const other = new WebSocket(wsUrl(), ["graphql-ws"]);
    const [err] = (await once(other, "error")) as [Error];
    expect(err.message).toMatch(/no subprotocol/i);
  });
});

describe("stray responses", () => {
  it("are dropped unanswered and counted; calls around them are answered", async () => {
    const c = await clients.connect();
    const before = (await strays()) ?? 0;
    const start = c.received.length;
    c.sendRaw(JSON.stringify({ jsonrpc: "2.0", id: 99, result: { ok: true } }));
    c.sendRaw(
      JSON.stringify({ jsonrpc: "2.0", id: null, error: { code: -32600, message: "Invalid Request" } }),
    );
    c.sendRaw(
      JSON.stringify([
        { jsonrpc: "2.0", id: 5, result: 1 },
        { jsonrpc: "2.0", id: "p", method: "ping" },
      ]),
    );
    expect((await c.call("ping")).pong).toBe(true);
    await c.until(
      () => c.received.slice(start).some((r) => Array.isArray(r.message)),
      20_000,
      "the batch's answer",
    );
    const after = c.received.slice(start).map((r) => r.message);
    // Only the batch's call and the ping were answered: one answer each, no error at all.
    expect(after.flat().filter((m) => m.error !== undefined)).toEqual([]);
    expect(after).toHaveLength(2);
    expect(after.find(Array.isArray)).toEqual([
      { jsonrpc: "2.0", id: "p", result: expect.objectContaining({ pong: true }) },
    ]);
    expect(await strays()).toBe(before + 3);
  });
});

describe("a json-rpc-2.0 peer", () => {
  it("settles every call and receives every event, batched frames included", async () => {
    const socket = new WebSocket(wsUrl());
    const peer: JSONRPCServerAndClient = new JSONRPCServerAndClient(
      new JSONRPCServer(),
      new JSONRPCClient((payload) => socket.send(JSON.stringify(payload))),
    );
    const events: number[] = [];
    let expected = Number.POSITIVE_INFINITY;
    let allArrived: () => void = () => {};
    const arrived = new Promise<void>((resolve) => {
      allArrived = resolve;
    });
    let hello: { bootId?: string } = {};
    peer.addMethod("hello", (params) => {
      hello = params as typeof hello;
    });
    peer.addMethod("event", (params) => {
      events.push((params as { seq: number }).seq);
      if (events.length >= expected) allArrived();
    });
    socket.on("message", (data) => void peer.receiveAndSend(JSON.parse(String(data))).catch(() => {}));
    await once(socket, "open");
    const sessionId = await createSession(t.url, t.workspace);
    await runTurn(t.url, sessionId, "hello from a peer");
    const codeOf = (p: PromiseLike<unknown>) =>
      Promise.resolve(p).then(
        () => "resolved",
        (e: unknown) => (e instanceof JSONRPCErrorException ? e.code : String(e)),
      );
    const { headSeq } = await peer.request("events.subscribe", { sessionId });
    expect(await codeOf(peer.request("no.such.method", {}))).toBe(-32601);
    expect(await codeOf(peer.request("events.subscribe", { sessionId: 7 }))).toBe(-32602);
    expect(await peer.request("ping", {})).toMatchObject({ pong: true });
    expected = headSeq;
    if (events.length >= expected) allArrived();
    await arrived;
    expect(events).toEqual(range(1, headSeq));
    expect(hello.bootId).toBe(t.gw.identity.bootId);
    socket.close();
  });
});
