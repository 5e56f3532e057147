/**
 * Connection bounds (docs/security.md): a flood of raw sockets sending unfinished requests without
 * a token from one address does not stop `/healthz` answering, and the flood's connections past
 * MOORING_MAX_PENDING_PER_ADDRESS are closed by the gateway. Limits are lowered so a few hundred
 * sockets are a flood.
 */
import { connect, type Socket } from "node:net";
import { afterAll, describe, expect, it } from "vitest";
import { useGateway } from "../support/use-gateway.js";
import { rawRequest } from "../support/raw-http.js";

const PENDING = 20;
const FLOOD = 400;

const t = useGateway({
  env: {
    MOORING_API_TOKENS: "flood-test-token",
    MOORING_MAX_PENDING_PER_ADDRESS: String(PENDING),
    MOORING_MAX_CONNECTIONS: "200",
  },
});
const flood: { socket: Socket; closed: Promise<void> }[] = [];

afterAll(async () => {
  for (const { socket } of flood) socket.destroy();
});

/** A socket that sends half a request and never the rest. */
function partialRequest(url: URL): Promise<{ socket: Socket; closed: Promise<void> }> {
  return new Promise((resolve, reject) => {
    const socket = connect(Number(url.port), url.hostname);
    const closed = new Promise<void>((done) => socket.once("close", () => done()));
    socket.on("error", () => {});
    socket.once("connect", () => {
      socket.write("GET /v1/sessions HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ");
      resolve({ socket, closed });
    });
    socket.once("error", reject);
  });
}

describe("a flood of unfinished requests", () => {
  it("/healthz still answers 200, and the flood past the per-address bound is closed", async () => {
    const url = new URL(t.url);
    for (let i = 0; i < FLOOD; i++) flood.push(await partialRequest(url));

    // Every flood socket but the newest PENDING is closed by the gateway.
    await Promise.all(flood.slice(0, FLOOD - PENDING).map((f) => f.closed));
    expect(flood.slice(FLOOD - PENDING).every((f) => !f.socket.destroyed)).toBe(true);

    for (let i = 0; i < 5; i++) {
      const health = await rawRequest(t.url, "GET", "/healthz");
      expect(health.status).toBe(200);
    }
  });
});
