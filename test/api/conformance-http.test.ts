/**
 * HTTP details third-party clients trip on: HEAD on the SSE route, the
 * headers HTTP names for 401, 405, 201 and 415, both ids on every answer, one error shape on every
 * path, and one rule for unknown query parameters (the 503s of a gateway not ready are in
 * conformance-rpc.test.ts); and the `eventsource` package resuming through a proxy that cuts its
 * connection. A real gateway on a real database.
 */
import { request } from "node:http";
import { gzipSync } from "node:zlib";
import { EventSource } from "eventsource";
import { describe, expect, it } from "vitest";
import { useGateway } from "../support/use-gateway.js";
import { call } from "../support/gateway.js";
import { rawRequest } from "../support/raw-http.js";
import { TcpProxy } from "../support/tcp-proxy.js";
import { createSession, submitOk } from "../support/turns.js";
import { range } from "../support/ws-client.js";

const TOKEN = "token-conformance-1";
const auth = { authorization: `Bearer ${TOKEN}` };

const t = useGateway({
  env: {
    MOORING_API_TOKENS: TOKEN,
    MOORING_CORS_ORIGINS: "http://app.example",
    MOORING_ALLOWED_HOSTS: "gateway.example",
  },
  workspace: true,
});

/** A request with a raw body (Buffer) and any headers; the answer as rawRequest gives it. */
function send(method: string, path: string, headers: Record<string, string>, body: Buffer) {
  return new Promise<{ status: number; headers: Record<string, unknown>; body: any }>((resolve, reject) => {
    const url = new URL(path, t.url);
    const req = request(
      { host: url.hostname, port: url.port, path: url.pathname, method, headers, agent: false },
      (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (c: string) => {
          text += c;
        });
        res.on("end", () =>
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            body: text ? JSON.parse(text) : null,
          }),
        );
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

const ids = (headers: Record<string, unknown>) => ({
  requestId: typeof headers["x-request-id"] === "string",
  bootId: headers["x-mooring-boot-id"],
});

describe("HEAD on the SSE route", () => {
  it("answers at once with a GET's headers and no body", async () => {
    const sessionId = await createSession(t.url, t.workspace, {}, auth);
    const head = await rawRequest(t.url, "HEAD", `/v1/sessions/${sessionId}/events`, auth);
    expect(head.status).toBe(200);
    expect(head.headers["content-type"]).toBe("text/event-stream; charset=utf-8");
    expect(head.headers["cache-control"]).toBe("no-cache, no-transform");
    expect(head.body).toBeNull();
    // The same checks as a GET: a missing session is 404, no token is 401.
    const missing = await rawRequest(
      t.url,
      "HEAD",
      "/v1/sessions/00000000-0000-4000-8000-000000000000/events",
      auth,
    );
    expect(missing.status).toBe(404);
    expect((await rawRequest(t.url, "HEAD", `/v1/sessions/${sessionId}/events`)).status).toBe(401);
  });
});

describe("HTTP semantics", () => {
  it("401 names the Bearer scheme in WWW-Authenticate", async () => {
    const r = await call(t.url, "GET", "/v1/gate");
    expect(r.status).toBe(401);
    expect(r.headers.get("www-authenticate")).toMatch(/^Bearer\b/);
    expect(r.body.error.code).toBe("UNAUTHORIZED");
  });

  it("every answer carries both ids: Host and Origin refusals, the CORS preflight, a bad URL", async () => {
    const host = await rawRequest(t.url, "GET", "/v1/gate", { ...auth, host: "evil.example" });
    const origin = await rawRequest(t.url, "GET", "/v1/gate", { ...auth, origin: "http://evil.example" });
    const preflight = await rawRequest(t.url, "OPTIONS", "/v1/sessions", {
      origin: "http://app.example",
      "access-control-request-method": "POST",
    });
    const badUrl = await rawRequest(t.url, "GET", "/v1/sessions/%E0%A4%A", auth);
    expect([host.status, origin.status, preflight.status, badUrl.status]).toEqual([403, 403, 204, 400]);
    for (const r of [host, origin, preflight, badUrl]) {
      expect(ids(r.headers)).toEqual({ requestId: true, bootId: t.gw.identity.bootId });
    }
    expect(badUrl.body.error.code).toBe("INVALID_REQUEST");
  });

  it("unknown /docs paths and a plain GET /v1/ws answer in the one error shape", async () => {
    const docs = await call(t.url, "GET", "/docs/nothing-here", undefined, auth);
    expect(docs.status).toBe(404);
    expect(docs.body.error).toMatchObject({ code: "NOT_FOUND" });
    const ws = await call(t.url, "GET", "/v1/ws", undefined, auth);
    expect(ws.status).toBe(426);
    expect(ws.headers.get("upgrade")).toBe("websocket");
    expect(ws.headers.get("content-type")).toMatch(/^application\/json/);
    expect(ws.body.error.code).toBe("UPGRADE_REQUIRED");
  });

  it("a trailing slash is 404 on every route, /v1/sessions/ and /v1/tasks/ included", async () => {
    for (const path of ["/v1/sessions/", "/v1/tasks/", "/v1/gate/"]) {
      const r = await call(t.url, "GET", path, undefined, auth);
      expect([path, r.status, r.body.error.code]).toEqual([path, 404, "NOT_FOUND"]);
    }
  });

  it("unknown query parameters are ignored on every route; known ones are still checked", async () => {
    for (const path of ["/v1/sessions?_=123", "/v1/tasks?_=123", "/v1/gate?_=123", "/healthz?_=1"]) {
      expect([path, (await call(t.url, "GET", path, undefined, auth)).status]).toEqual([path, 200]);
    }
    const bad = await call(t.url, "GET", "/v1/sessions?limit=0&_=1", undefined, auth);
    expect(bad.status).toBe(400);
  });

  it("an unsupported method is 405 with Allow; an unknown path stays 404", async () => {
    const put = await call(t.url, "PUT", "/v1/sessions", undefined, auth);
    expect(put.status).toBe(405);
    expect(put.headers.get("allow")).toBe("GET, HEAD, POST");
    expect(put.body.error.code).toBe("METHOD_NOT_ALLOWED");
    const del = await call(t.url, "POST", "/v1/tasks/00000000-0000-4000-8000-000000000000", undefined, auth);
    expect(del.status).toBe(405);
    expect(del.headers.get("allow")).toBe("GET, HEAD");
    expect((await call(t.url, "PUT", "/v1/nothing", undefined, auth)).status).toBe(404);
  });

  it("a 201 session create carries Location", async () => {
    const r = await call(t.url, "POST", "/v1/sessions", { workspace: t.workspace, agent: "simulated" }, auth);
    expect(r.status).toBe(201);
    expect(r.headers.get("location")).toBe(`/v1/sessions/${r.body.id}`);
    const again = await call(t.url, "GET", r.headers.get("location")!, undefined, auth);
    expect(again.body.id).toBe(r.body.id);
  });

  it("a charset other than UTF-8 is 415 naming the accepted one; so is a gzip body", async () => {
    const body = Buffer.from(
      JSON.stringify({ workspace: t.workspace, agent: "simulated", title: "caf\u00e9" }),
      "latin1",
    );
    const latin = await send(
      "POST",
      "/v1/sessions",
      { ...auth, "content-type": "application/json; charset=iso-8859-1" },
      body,
    );
    expect(latin.status).toBe(415);
    expect(latin.body.error.code).toBe("UNSUPPORTED_MEDIA_TYPE");
    expect(latin.body.error.message).toContain("charset=utf-8");
    const gzip = await send(
      "POST",
      "/v1/sessions",
      { ...auth, "content-type": "application/json", "content-encoding": "gzip" },
      gzipSync(JSON.stringify({ workspace: t.workspace, agent: "simulated" })),
    );
    expect(gzip.status).toBe(415);
    expect(gzip.headers["accept-encoding"]).toBe("identity");
    expect(gzip.body.error.code).toBe("UNSUPPORTED_MEDIA_TYPE");
    // A request without a body is not refused for its headers.
    expect(
      (
        await rawRequest(t.url, "GET", "/v1/gate", {
          ...auth,
          "content-type": "application/json; charset=latin1",
        })
      ).status,
    ).toBe(200);
    // UTF-8, named or not, is taken.
    const utf8 = await send(
      "POST",
      "/v1/sessions",
      { ...auth, "content-type": "application/json; charset=UTF-8" },
      Buffer.from(JSON.stringify({ workspace: t.workspace, agent: "simulated" })),
    );
    expect(utf8.status).toBe(201);
  });
});

describe("the eventsource package through a proxy that cuts the connection", () => {
  it("resumes by Last-Event-ID and loses and repeats nothing", async () => {
    const proxy = await TcpProxy.start(t.url);
    const sessionId = await createSession(t.url, t.workspace, {}, auth);
    const seen: { seq: number; type: string; taskId: string | null }[] = [];
    let opened = 0;
    let wake = () => {};
    // The gateway asks for 2 s between reconnects (`retry:`); the package is told 50 ms here, as
    // the test is about where it resumes, not when. Rewritten in the stream's first bytes.
    let retriesRewritten = 0;
    const source = new EventSource(`${proxy.url}/v1/sessions/${sessionId}/events?access_token=${TOKEN}`, {
      fetch: async (url, init) => {
        const res = await fetch(url, init);
        let first = true;
        const body = res.body?.pipeThrough(
          new TransformStream<Uint8Array, Uint8Array>({
            transform(chunk, controller) {
              if (first) {
                first = false;
                const text = Buffer.from(chunk).toString("latin1");
                if (/^retry: \d+\n/.test(text)) retriesRewritten++;
                chunk = Buffer.from(text.replace(/^retry: \d+\n/, "retry: 50\n"), "latin1");
              }
              controller.enqueue(chunk);
            },
          }),
        );
        return {
          body: body ?? null,
          url: res.url,
          status: res.status,
          redirected: res.redirected,
          headers: res.headers,
        };
      },
    });
    source.onopen = () => {
      opened++;
      wake();
    };
    source.onmessage = (message) => {
      seen.push(JSON.parse(message.data));
      wake();
    };
    /** Resolves once `match()` holds, checked on every open and message. */
    const until = (match: () => boolean) =>
      new Promise<void>((resolve) => {
        wake = () => {
          if (match()) resolve();
        };
        wake();
      });
    try {
      const cuts = 3;
      for (let round = 0; round < cuts; round++) {
        const task = await submitOk(t.url, sessionId, { prompt: "[deltas 20]" }, auth);
        // Cut once the turn's first event is in, while the rest may still be on the way.
        await until(() => seen.some((e) => e.taskId === task.id));
        proxy.cutAll();
        await until(() => opened === round + 2);
        await until(() => seen.some((e) => e.taskId === task.id && e.type === "task.completed"));
      }
      const lastSeq = (await call(t.url, "GET", `/v1/sessions/${sessionId}`, undefined, auth)).body.lastSeq;
      expect(seen.map((e) => e.seq)).toEqual(range(1, lastSeq));
      expect(opened).toBe(cuts + 1);
      expect(retriesRewritten).toBe(cuts + 1);
    } finally {
      source.close();
      await proxy.close();
    }
  });
});
