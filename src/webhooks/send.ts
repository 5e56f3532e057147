/**
 * One delivery attempt over HTTP: POST the signed body with a timeout, follow no redirect (a
 * redirect is a failed attempt: the URL was configured, not discovered), and keep a short excerpt
 * of the answer for the deliveries list. Never throws.
 *
 * Sent with node:http(s) over keep-alive agents rather than `fetch`: every turn may cost a
 * delivery, and an attempt by `fetch` took about four times the gateway CPU of the same request by
 * node:http (0.4–0.66 ms against 0.09–0.17 ms on loopback), the largest part of what webhooks
 * added to a turn. Keep-alive: a receiver that keeps its connections open is not dialled anew for
 * every delivery.
 */
import http from "node:http";
import https from "node:https";
import { signatureHeaders } from "./signature.js";

/** What of a receiver's answer is kept (characters). */
const EXCERPT_CHARS = 256;

const agents = {
  "http:": new http.Agent({ keepAlive: true }),
  "https:": new https.Agent({ keepAlive: true }),
};

export interface AttemptResult {
  ok: boolean;
  statusCode: number | null;
  response: string;
}

export function sendDelivery(
  delivery: { id: string; url: string; body: string },
  secret: string,
  timeoutMs: number,
  /** The delivery's span as a W3C traceparent, sent to the receiver (tracing on only). */
  traceparent: string | null = null,
): Promise<AttemptResult> {
  const headers = {
    "content-type": "application/json",
    "content-length": String(Buffer.byteLength(delivery.body)),
    "user-agent": "mooring-webhooks",
    ...signatureHeaders(secret, delivery.id, delivery.body, new Date()),
    ...(traceparent ? { traceparent } : {}),
  };
  return new Promise((resolve) => {
    let timer: NodeJS.Timeout | undefined;
    let settled = false;
    const settle = (result: AttemptResult) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve(result);
    };
    const failed = (reason: string) => settle({ ok: false, statusCode: null, response: reason });
    let url: URL;
    try {
      url = new URL(delivery.url);
    } catch (err) {
      return failed(`request failed: ${(err as Error).message}`);
    }
    const agent = agents[url.protocol as keyof typeof agents];
    if (!agent) return failed(`request failed: unsupported protocol ${url.protocol}`);
    const request = (url.protocol === "https:" ? https : http).request(
      url,
      { method: "POST", headers, agent },
      (res) => {
        const statusCode = res.statusCode ?? null;
        // Without NUL characters, which a Postgres text cannot hold (the record would fail).
        const done = (response: string) =>
          settle({
            ok: statusCode !== null && statusCode >= 200 && statusCode < 300,
            statusCode,
            response: response.replaceAll("\0", ""),
          });
        res.setEncoding("utf8");
        let text = "";
        res.on("data", (chunk: string) => {
          text += chunk;
          // Enough read: the rest of the answer is not waited for (its connection is not reused).
          if (text.length >= EXCERPT_CHARS) {
            done(text.slice(0, EXCERPT_CHARS));
            res.destroy();
          }
        });
        res.on("end", () => done(text.slice(0, EXCERPT_CHARS)));
        // The excerpt is best effort: an answer cut short keeps what arrived.
        res.on("error", () => done(text.slice(0, EXCERPT_CHARS)));
        res.on("close", () => done(text.slice(0, EXCERPT_CHARS)));
      },
    );
    // The whole attempt, answer included, within the timeout.
    timer = setTimeout(() => {
      failed(`timeout after ${timeoutMs} ms`);
      request.destroy();
    }, timeoutMs);
    request.on("error", (err: NodeJS.ErrnoException) => failed(`request failed: ${err.code ?? err.message}`));
    request.end(delivery.body);
  });
}
