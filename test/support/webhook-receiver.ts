/**
 * A webhook receiver on loopback that verifies every request's signature with the third-party
 * `standardwebhooks` package (our signing checked by code that is not ours) and dedupes by
 * `webhook-id`, as a real receiver must under at-least-once delivery.
 */
import { once } from "node:events";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { Webhook } from "standardwebhooks";

export interface Received {
  id: string;
  body: { type: string; timestamp: string; data: Record<string, unknown> };
}

export interface Receiver {
  url: string;
  /** Verified deliveries, first arrival of each webhook-id only. */
  unique: Received[];
  /** Every request (retries included). */
  requests: number;
  /** Requests whose signature did not verify (must stay 0). */
  badSignatures: number;
  /** The status answered while `answering` returns it (default 200). */
  answering: () => number;
  /** Each request is answered once this resolves (default at once): a slow receiver. */
  hold: () => Promise<void>;
  /** Requests received and not answered yet, and the most there ever were at once. */
  inFlight: number;
  maxInFlight: number;
  close(): Promise<void>;
}

export async function startReceiver(secret: string, answering: () => number = () => 200): Promise<Receiver> {
  const wh = new Webhook(secret);
  const receiver: Receiver = {
    url: "",
    unique: [],
    requests: 0,
    badSignatures: 0,
    answering,
    hold: async () => {},
    inFlight: 0,
    maxInFlight: 0,
    close: async () => {
      server.closeAllConnections();
      server.close();
      await once(server, "close");
    },
  };
  const seen = new Set<string>();
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    receiver.inFlight++;
    receiver.maxInFlight = Math.max(receiver.maxInFlight, receiver.inFlight);
    res.on("close", () => receiver.inFlight--);
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", async () => {
      await receiver.hold();
      receiver.requests++;
      const body = Buffer.concat(chunks).toString();
      const status = receiver.answering();
      if (status >= 200 && status < 300) {
        try {
          wh.verify(body, req.headers as Record<string, string>);
        } catch {
          receiver.badSignatures++;
          res.writeHead(400).end("bad signature");
          return;
        }
        const id = String(req.headers["webhook-id"]);
        if (!seen.has(id)) {
          seen.add(id);
          receiver.unique.push({ id, body: JSON.parse(body) });
        }
      }
      res.writeHead(status, { "content-type": "text/plain" }).end(`answered ${status}`);
    });
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  receiver.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook?token=receiver-secret`;
  return receiver;
}
