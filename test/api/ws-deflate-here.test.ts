/**
 * `deflateSendsHere` (transport/ws/deflate-frames.ts), what /acp's WebSocket sends through: text
 * compressed synchronously here, never by `ws`'s zlib stream, and every message arriving intact
 * and in order, whatever way each one went (compressed here, small and plain, binary, with a
 * callback), and plain text to a client that did not negotiate permessage-deflate.
 */
import { once } from "node:events";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { WebSocket, WebSocketServer } from "ws";
import { deflateSendsHere } from "../../src/transport/ws/deflate-frames.js";

/** As http/app.ts negotiates it. */
const perMessageDeflate = {
  threshold: 256,
  zlibDeflateOptions: { level: 6 },
  serverNoContextTakeover: true,
  clientNoContextTakeover: true,
};

const servers: WebSocketServer[] = [];
const clients: WebSocket[] = [];

afterEach(async () => {
  for (const c of clients.splice(0)) c.terminate();
  for (const s of servers.splice(0)) {
    for (const c of s.clients) c.terminate();
    await new Promise((resolve) => s.close(resolve));
  }
});

/** A server socket wrapped by deflateSendsHere, and a client of it reading every message. */
async function pair(clientDeflate: boolean) {
  const server = new WebSocketServer({ port: 0, host: "127.0.0.1", perMessageDeflate });
  servers.push(server);
  await once(server, "listening");
  const accepted = once(server, "connection") as Promise<[WebSocket]>;
  const client = new WebSocket(`ws://127.0.0.1:${(server.address() as AddressInfo).port}`, {
    perMessageDeflate: clientDeflate,
  });
  clients.push(client);
  const received: string[] = [];
  client.on("message", (data) => received.push(String(data)));
  await once(client, "open");
  const [socket] = await accepted;
  deflateSendsHere(socket);
  let wireBytes = 0;
  const tcp = (client as unknown as { _socket: import("node:net").Socket })._socket;
  tcp.on("data", (chunk: Buffer) => {
    wireBytes += chunk.length;
  });
  const receivedAll = async (n: number) => {
    while (received.length < n) await once(client, "message");
    return received;
  };
  return { socket, receivedAll, wire: () => wireBytes };
}

const big = (i: number) =>
  JSON.stringify({ jsonrpc: "2.0", method: "session/update", params: { i, text: "x".repeat(2000) } });

describe("deflateSendsHere", () => {
  it("delivers every message in order and compressed, whichever way each went (here, plain, binary, with a callback)", async () => {
    const { socket, receivedAll, wire } = await pair(true);
    const sent: string[] = [];
    let calledBack = false;
    for (let i = 0; i < 50; i++) {
      const text = i % 5 === 1 ? JSON.stringify({ small: i }) : big(i);
      sent.push(text);
      if (i === 7) socket.send(text, () => (calledBack = true));
      else socket.send(text);
    }
    socket.send(Buffer.from("binary"));
    const got = await receivedAll(51);
    expect(got.slice(0, 50)).toEqual(sent);
    expect(got[50]).toBe("binary");
    expect(calledBack).toBe(true);
    // 40 texts of 2 KB each went compressed: far fewer bytes on the wire than their text.
    expect(wire()).toBeLessThan(40 * 2000);
  });

  it("sends without ws's zlib stream when every text goes the plain way", async () => {
    const { socket, receivedAll } = await pair(true);
    const sent = Array.from({ length: 20 }, (_, i) => big(i));
    for (const text of sent) socket.send(text);
    expect(await receivedAll(20)).toEqual(sent);
    const deflate = (socket as unknown as { _extensions: Record<string, { _deflate?: unknown }> })
      ._extensions["permessage-deflate"];
    expect(deflate._deflate ?? null).toBeNull();
  });

  it("leaves a client without permessage-deflate plain text", async () => {
    const { socket, receivedAll, wire } = await pair(false);
    expect(socket.extensions).toBe("");
    const sent = Array.from({ length: 5 }, (_, i) => big(i));
    for (const text of sent) socket.send(text);
    expect(await receivedAll(5)).toEqual(sent);
    expect(wire()).toBeGreaterThan(5 * 2000);
  });
});
