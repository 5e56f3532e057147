/**
 * An open WebSocket keeps nothing of the HTTP upgrade that opened it (releaseUpgrade,
 * src/transport/ws/socket.ts): @fastify/websocket leaves the request and its raw response reachable
 * from the socket for the connection's life, about 3 KB of heap per idle subscriber. Shown with
 * WeakRefs and full GCs on a bare fastify app with the plugin, as the gateway registers it.
 */
import { once } from "node:events";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import websocket from "@fastify/websocket";
import Fastify from "fastify";
import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { SocketErrorLog } from "../../src/transport/ws/protocol-errors.js";
import { releaseUpgrade } from "../../src/transport/ws/socket.js";

setFlagsFromString("--expose-gc");
const gc = runInNewContext("gc") as () => void;

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0)) await close();
});

/** A fastify app with the plugin; each connection's request, raw request and raw response are watched. */
async function app(release: boolean) {
  const records: Record<string, unknown>[] = [];
  const log = pino({ level: "info" }, { write: (line: string) => records.push(JSON.parse(line)) });
  const server = Fastify();
  await server.register(websocket);
  const watched: WeakRef<object>[] = [];
  let opened: (socket: WebSocket) => void = () => {};
  server.get("/ws", { websocket: true }, (socket, req) => {
    const tcp = req.socket as typeof req.socket & { _httpMessage?: object | null };
    watched.push(new WeakRef(req), new WeakRef(req.raw));
    if (tcp._httpMessage) watched.push(new WeakRef(tcp._httpMessage));
    if (release) releaseUpgrade(socket, req, new SocketErrorLog(), log);
    opened(socket);
  });
  await server.listen({ port: 0, host: "127.0.0.1" });
  closers.push(() => server.close());
  const address = server.server.address();
  const port = typeof address === "object" && address ? address.port : 0;
  const connect = async () => {
    const serverSide = new Promise<WebSocket>((resolve) => {
      opened = resolve;
    });
    const client = new WebSocket(`ws://127.0.0.1:${port}/ws`);
    closers.unshift(async () => {
      if (client.readyState === client.CLOSED) return;
      const closed = once(client, "close");
      client.terminate();
      await closed;
    });
    await once(client, "open");
    return { client, server: await serverSide };
  };
  /** Full GCs, letting pending callbacks run in between, until every watched object is gone (or 20 rounds). */
  const collect = async () => {
    for (let i = 0; i < 20 && watched.some((r) => r.deref() !== undefined); i++) {
      await new Promise((resolve) => setImmediate(resolve));
      gc();
    }
    return watched.filter((r) => r.deref() !== undefined).length;
  };
  return { connect, collect, records, watched };
}

describe("an open WebSocket and its upgrade request", () => {
  it("keeps neither the request nor its raw response, and its errors still reach the handler", async () => {
    const a = await app(true);
    const { client, server } = await a.connect();
    expect(a.watched).toHaveLength(3);
    expect(await a.collect()).toBe(0);
    // The socket works on, and an error on it is logged and cuts it, as the plugin's handler did.
    const closed = once(client, "close");
    server.emit("error", Object.assign(new Error("invalid opcode 7"), { code: "WS_ERR_INVALID_OPCODE" }));
    await closed;
    expect(a.records).toContainEqual(
      expect.objectContaining({
        level: 40,
        code: "WS_ERR_INVALID_OPCODE",
        msg: "websocket client broke the protocol; connection closed",
      }),
    );
  });

  it("without it, the plugin keeps them for the connection's life (why releaseUpgrade exists)", async () => {
    const a = await app(false);
    await a.connect();
    expect(await a.collect()).toBe(3);
  });
});
