/**
 * HTTP requests with any headers, `Host` and `Origin` included (which fetch does not let a caller
 * set), for the Host and Origin checks; and a WebSocket upgrade with chosen headers that reports
 * the status it got instead of throwing.
 */
import { request } from "node:http";
import WebSocket from "ws";

export interface RawAnswer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: any;
}

export function rawRequest(
  base: string,
  method: string,
  path: string,
  headers: Record<string, string> = {},
  body?: unknown,
): Promise<RawAnswer> {
  const url = new URL(path, base);
  const payload = body === undefined ? undefined : JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: url.hostname,
        port: url.port,
        path: url.pathname + url.search,
        method,
        agent: false,
        headers: { ...(payload ? { "content-type": "application/json" } : {}), ...headers },
      },
      (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (chunk: string) => {
          text += chunk;
        });
        res.on("end", () => {
          let parsed: any = text;
          try {
            parsed = text === "" ? null : JSON.parse(text);
          } catch {
            // not JSON: keep the text
          }
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body: parsed });
        });
      },
    );
    req.on("error", reject);
    req.end(payload);
  });
}

/**
 * Open `WS /v1/ws` with these headers: `{opened: true, hello}` when the upgrade went through,
 * else `{opened: false, status}` with the HTTP status of the refusal.
 */
export function tryWebSocket(
  wsUrl: string,
  options: { headers?: Record<string, string>; origin?: string } = {},
): Promise<{ opened: true; hello: any } | { opened: false; status: number }> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(wsUrl, { headers: options.headers, origin: options.origin });
    ws.once("unexpected-response", (_req, res) => {
      resolve({ opened: false, status: res.statusCode ?? 0 });
      res.resume();
      ws.terminate();
    });
    ws.once("message", (data) => {
      resolve({ opened: true, hello: JSON.parse(String(data)) });
      ws.close();
    });
    ws.on("error", reject);
  });
}
