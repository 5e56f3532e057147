/** A lean keep-alive JSON client (node:http): cheaper per request than fetch, so the client side stays small. */
import http from "node:http";

export interface Answer<T = any> {
  status: number;
  body: T;
  /** Bytes of the response body as received. */
  bytes: number;
  /** The body as received (still compressed if the server compressed it). */
  rawBody: Buffer;
  headers: http.IncomingHttpHeaders;
}

export class HttpClient {
  private readonly agent: http.Agent;
  private readonly host: string;
  private readonly port: number;

  /** `headers` go with every request (e.g. a tenant's `authorization`). */
  constructor(
    base: string,
    maxSockets = 64,
    private readonly headers: Record<string, string> = {},
  ) {
    const url = new URL(base);
    this.host = url.hostname;
    this.port = Number(url.port);
    this.agent = new http.Agent({ keepAlive: true, maxSockets });
  }

  request<T = any>(
    method: string,
    path: string,
    body?: unknown,
    extraHeaders: Record<string, string> = {},
  ): Promise<Answer<T>> {
    const headers = { ...this.headers, ...extraHeaders };
    const payload = body === undefined ? undefined : JSON.stringify(body);
    return new Promise((resolve, reject) => {
      const req = http.request(
        {
          host: this.host,
          port: this.port,
          method,
          path,
          agent: this.agent,
          headers: payload
            ? { "content-type": "application/json", "content-length": Buffer.byteLength(payload), ...headers }
            : headers,
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on("data", (c: Buffer) => chunks.push(c));
          res.on("end", () => {
            const raw = Buffer.concat(chunks);
            let parsed: any = null;
            if (raw.length > 0 && !res.headers["content-encoding"]) {
              const text = raw.toString("utf8");
              try {
                parsed = JSON.parse(text);
              } catch {
                parsed = text;
              }
            }
            resolve({
              status: res.statusCode ?? 0,
              body: parsed,
              bytes: raw.length,
              rawBody: raw,
              headers: res.headers,
            });
          });
          res.on("error", reject);
        },
      );
      req.on("error", reject);
      if (payload) req.write(payload);
      req.end();
    });
  }

  async json<T = any>(method: string, path: string, body?: unknown): Promise<T> {
    const answer = await this.request<T>(method, path, body);
    if (answer.status >= 300) {
      throw new Error(`${method} ${path} answered ${answer.status}: ${JSON.stringify(answer.body)}`);
    }
    return answer.body;
  }

  close(): void {
    this.agent.destroy();
  }
}

/** Create `n` simulated-agent sessions with `concurrency` requests in flight; returns their ids. */
export async function createSessions(client: HttpClient, n: number, concurrency = 16): Promise<string[]> {
  const ids: string[] = new Array(n);
  let next = 0;
  const worker = async () => {
    while (next < n) {
      const i = next++;
      const session = await client.json<{ id: string }>("POST", "/v1/sessions", {
        workspace: "/tmp",
        agent: "simulated",
        title: `bench ${i}`,
      });
      ids[i] = session.id;
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, n) }, worker));
  return ids;
}
