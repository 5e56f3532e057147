/**
 * What a client may send: NUL and lone surrogates in any client
 * string are 400 naming the field and store nothing; metadata and agentConfig are bounded in depth
 * and size (a 3,000-deep object is 400, and listing keeps working); integers in paths, queries and
 * headers are integers in range; list pages stay within their byte budget.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { useGateway } from "../support/use-gateway.js";
import { type Answer, call } from "../support/gateway.js";
import { createSession, submitOk, waitTask } from "../support/turns.js";
import { WsClient } from "../support/ws-client.js";

const LIST_PAGE_BYTES = 64 * 1024;

const gt = useGateway({ env: { MOORING_LIST_PAGE_BYTES: String(LIST_PAGE_BYTES) }, workspace: true });
let ws: WsClient;
let sessionId: string;

beforeAll(async () => {
  ws = await WsClient.connect(gt.url);
  sessionId = await createSession(gt.url, gt.workspace);
});

afterAll(async () => {
  await ws?.close();
});

/** Rows of every table a client request can write to. */
async function rowCounts() {
  const [row] = await gt.sql<{ sessions: number; tasks: number; events: number }[]>`
    select (select count(*)::int from sessions) as sessions, (select count(*)::int from tasks) as tasks,
           (select count(*)::int from events) as events`;
  return row;
}

function deep(levels: number): Record<string, unknown> {
  const root: Record<string, unknown> = {};
  let node = root;
  for (let i = 1; i < levels; i++) {
    const child: Record<string, unknown> = {};
    node.a = child;
    node = child;
  }
  return root;
}

const post = (path: string, body: unknown) => call(gt.url, "POST", path, body);

function expectInvalid(r: { status: number; body: any }, field: string | RegExp) {
  expect(r.status, JSON.stringify(r.body)).toBe(400);
  expect(r.body.error.code).toBe("INVALID_REQUEST");
  if (typeof field === "string") expect(r.body.error.field).toBe(field);
  else expect(r.body.error.field).toMatch(field);
}

function expectRpcInvalid(answer: { error?: any; result?: unknown }, field: string | RegExp) {
  expect(answer.result).toBeUndefined();
  expect(answer.error).toMatchObject({ code: -32602, data: { code: "INVALID_REQUEST" } });
  if (typeof field === "string") expect(answer.error.data.field).toBe(field);
  else expect(answer.error.data.field).toMatch(field);
}

describe("metadata and agentConfig are bounded", () => {
  it("3,000 levels of metadata are 400 (REST, POST /v1/rpc, the socket); nothing is stored; lists keep working", async () => {
    const before = await rowCounts();
    const metadata = deep(3000);
    expectInvalid(
      await post("/v1/sessions", { workspace: gt.workspace, agent: "simulated", metadata }),
      /^metadata(\.a)+$/,
    );
    const viaHttp = await post("/v1/rpc", {
      jsonrpc: "2.0",
      id: 1,
      method: "sessions.create",
      params: { workspace: gt.workspace, agent: "simulated", metadata },
    });
    expectRpcInvalid(viaHttp.body, /^metadata(\.a)+$/);
    expectRpcInvalid(
      await ws.request("sessions.create", { workspace: gt.workspace, agent: "simulated", metadata }),
      /^metadata/,
    );
    expectInvalid(
      await post("/v1/sessions", { workspace: gt.workspace, agent: "simulated", agentConfig: deep(3000) }),
      /^agentConfig/,
    );
    expect(await rowCounts()).toEqual(before);

    const list = await call(gt.url, "GET", "/v1/sessions");
    expect(list.status).toBe(200);
    expect(list.body.items.map((s: any) => s.id)).toContain(sessionId);
    expect((await ws.call("sessions.list", {})).items.length).toBeGreaterThan(0);
    expect((await call(gt.url, "GET", `/v1/sessions/${sessionId}`)).status).toBe(200);
  });

  it("a session stored with 3,000 levels of metadata before these bounds still lists, reads and archives", async () => {
    const text = `${'{"a":'.repeat(3000)}1${"}".repeat(3000)}`;
    const [row] = await gt.sql<{ id: string }[]>`
      insert into sessions (workspace, agent, metadata) values (${gt.workspace}, 'simulated', ${text}::jsonb) returning id`;
    expect((await call(gt.url, "GET", "/v1/sessions?limit=200")).status).toBe(200);
    expect((await ws.call("sessions.list", { limit: 200 })).items.map((s: any) => s.id)).toContain(row.id);
    expect((await call(gt.url, "GET", `/v1/sessions/${row.id}`)).status).toBe(200);
    expect((await call(gt.url, "DELETE", `/v1/sessions/${row.id}`)).status).toBe(200);
  });

  it("16 levels are accepted, 17 are not; 16 KiB as JSON is the size bound", async () => {
    const ok = await post("/v1/sessions", {
      workspace: gt.workspace,
      agent: "simulated",
      metadata: deep(16),
    });
    expect(ok.status).toBe(201);
    const r = await post("/v1/sessions", { workspace: gt.workspace, agent: "simulated", metadata: deep(17) });
    expectInvalid(r, "metadata");
    expect(r.body.error.message).toMatch(/at most 16 levels/);

    const big = await post("/v1/sessions", {
      workspace: gt.workspace,
      agent: "simulated",
      metadata: { x: "y".repeat(16_400) },
    });
    expectInvalid(big, "metadata");
    expect(big.body.error.message).toMatch(/at most 16384 bytes/);
    const fits = await post("/v1/sessions", {
      workspace: gt.workspace,
      agent: "simulated",
      metadata: { x: "y".repeat(16_000) },
    });
    expect(fits.status).toBe(201);
  });

  it("a 200 KB model is refused (not a spawn failure later); so is one past 256 characters", async () => {
    const huge = await post("/v1/sessions", {
      workspace: gt.workspace,
      agent: "claude-code",
      agentConfig: { model: "m".repeat(200_000) },
    });
    expectInvalid(huge, "agentConfig");
    const long = await post("/v1/sessions", {
      workspace: gt.workspace,
      agent: "claude-code",
      agentConfig: { model: "m".repeat(257) },
    });
    expectInvalid(long, "agentConfig");
    expect(long.body.error.message).toMatch(/at most 256 characters/);
  });
});

describe("client JSON comes back as it was sent", () => {
  it("metadata and agentConfig keys are not rewritten (no camelCase) on create, get, list and over JSON-RPC", async () => {
    const metadata = { my_key: 1, "kebab-key": { snake_case: [{ a_b: "c_d" }] }, Mixed_Case: true };
    const created = await post("/v1/sessions", {
      workspace: gt.workspace,
      agent: "simulated",
      metadata,
      agentConfig: {},
    });
    expect(created.status).toBe(201);
    expect(created.body.metadata).toEqual(metadata);
    expect((await call(gt.url, "GET", `/v1/sessions/${created.body.id}`)).body.metadata).toEqual(metadata);
    const listed = await ws.call("sessions.list", { limit: 200 });
    expect(listed.items.find((s: any) => s.id === created.body.id).metadata).toEqual(metadata);
  });
});

describe("NUL and lone surrogates in client strings are refused, never rewritten", () => {
  const bad = { nul: "a\u0000b", lowAlone: "k\udfff", highAlone: "k\ud800" };
  const session = (extra: Record<string, unknown>) => ({
    workspace: gt.workspace,
    agent: "simulated",
    ...extra,
  });

  const cases: [string, (v: string) => Record<string, unknown>, string][] = [
    ["title", (v) => session({ title: v }), "title"],
    ["workspace", (v) => session({ workspace: `${gt.workspace}/${v}` }), "workspace"],
    ["agent", (v) => session({ agent: v }), "agent"],
    [
      "a metadata value",
      (v) => session({ metadata: { note: { deeper: [1, v] } } }),
      "metadata.note.deeper.1",
    ],
    ["a metadata key", (v) => session({ metadata: { [v]: 1 } }), "metadata.k"],
    [
      "an agentConfig value",
      (v) => session({ agentConfig: { contextSuffix: v } }),
      "agentConfig.contextSuffix",
    ],
  ];

  for (const [what, body, field] of cases) {
    for (const [kind, value] of Object.entries(bad)) {
      it(`${what} with ${kind}: 400 naming ${field}, over REST and JSON-RPC, nothing stored`, async () => {
        const before = await rowCounts();
        const expected = field === "metadata.k" ? /^metadata\.(a\\u0000b|k\uFFFD)$/ : field;
        expectInvalid(await post("/v1/sessions", body(value)), expected);
        expectRpcInvalid(await ws.request("sessions.create", body(value)), expected);
        expect(await rowCounts()).toEqual(before);
      });
    }
  }

  for (const [kind, value] of Object.entries(bad)) {
    it(`prompt and idempotencyKey with ${kind}: 400 naming the field, nothing stored`, async () => {
      const before = await rowCounts();
      expectInvalid(await post(`/v1/sessions/${sessionId}/turns`, { prompt: `hi ${value}` }), "prompt");
      expectInvalid(
        await post(`/v1/sessions/${sessionId}/turns`, { prompt: "hi", idempotencyKey: value }),
        "idempotencyKey",
      );
      expectRpcInvalid(await ws.request("turns.submit", { sessionId, prompt: value }), "prompt");
      expectRpcInvalid(
        await ws.request("turns.submit", { sessionId, prompt: "hi", idempotencyKey: value }),
        "idempotencyKey",
      );
      expect(await rowCounts()).toEqual(before);
    });
  }

  it('the keys "k\\udfff" and "k\\ud800" cannot collide: both are refused', async () => {
    const before = await rowCounts();
    const first = await post(`/v1/sessions/${sessionId}/turns`, { prompt: "one", idempotencyKey: "k\udfff" });
    const second = await post(`/v1/sessions/${sessionId}/turns`, {
      prompt: "two",
      idempotencyKey: "k\ud800",
    });
    expectInvalid(first, "idempotencyKey");
    expectInvalid(second, "idempotencyKey");
    expect(await rowCounts()).toEqual(before);
    // A well-formed pair (an emoji) is text like any other.
    const task = await submitOk(gt.url, sessionId, { prompt: "fine 😀", idempotencyKey: "k😀" });
    expect((await waitTask(gt.url, task.id)).status).toBe("completed");
  });

  it("query strings and path ids: 400 naming the field", async () => {
    expectInvalid(await call(gt.url, "GET", "/v1/sessions?workspace=%2Ftmp%2F%00x"), "workspace");
    expectInvalid(await call(gt.url, "GET", "/v1/tasks?cursor=a%00b"), "cursor");
    expectInvalid(await call(gt.url, "GET", "/v1/sessions/a%00b"), "id");
    expectRpcInvalid(await ws.request("sessions.list", { workspace: "/tmp/\u0000" }), "workspace");
    expectRpcInvalid(await ws.request("sessions.get", { sessionId: "\udfff" }), "sessionId");
  });
});

describe("integers are integers in range", () => {
  it.each(["1e20", "1.5", "-1", "abc", "0x10", "1e3", "9007199254740992", "%201"])(
    "event seq %s: 400",
    async (seq) => {
      const r = await call(gt.url, "GET", `/v1/sessions/${sessionId}/events/${seq}/payload`);
      expectInvalid(r, "seq");
    },
  );

  it("an overlong or badly encoded path parameter: 400 in the one error shape", async () => {
    for (const path of [
      `/v1/sessions/${"q".repeat(150)}`,
      `/v1/sessions/${sessionId}/events/${"9".repeat(150)}/payload`,
      "/v1/sessions/%zz",
    ]) {
      const r = await call(gt.url, "GET", path);
      expect(r.status).toBe(400);
      expect(r.body).toEqual({ error: { code: "INVALID_REQUEST", message: expect.any(String) } });
    }
  });

  it("a seq in range that has no event is 404; one that has is 200", async () => {
    expect(
      (await call(gt.url, "GET", `/v1/sessions/${sessionId}/events/9007199254740991/payload`)).status,
    ).toBe(404);
    const [{ seq }] = await gt.sql<
      { seq: number }[]
    >`select min(seq)::int as seq from events where session_id = ${sessionId}`;
    expect((await call(gt.url, "GET", `/v1/sessions/${sessionId}/events/${seq}/payload`)).status).toBe(200);
  });

  it("queries and Last-Event-ID: afterSeq, limit, waitMs", async () => {
    expectInvalid(await call(gt.url, "GET", `/v1/sessions/${sessionId}/events?afterSeq=1e20`), "afterSeq");
    expectInvalid(await call(gt.url, "GET", `/v1/sessions/${sessionId}/events?afterSeq=1.5`), "afterSeq");
    expectInvalid(await call(gt.url, "GET", "/v1/sessions?limit=1.5"), "limit");
    expectInvalid(await call(gt.url, "GET", "/v1/tasks?limit=1e1"), "limit");
    expectInvalid(await call(gt.url, "GET", "/v1/sessions?limit=5&limit=6"), "limit");
    const [task] = await gt.sql<{ id: string }[]>`select id from tasks limit 1`;
    expectInvalid(await call(gt.url, "GET", `/v1/tasks/${task.id}?waitMs=1e3`), "waitMs");
    expectInvalid(
      await call(gt.url, "GET", `/v1/sessions/${sessionId}/events`, undefined, { "last-event-id": "1e20" }),
      "Last-Event-ID",
    );
    expect((await call(gt.url, "GET", "/v1/sessions?limit=2")).body.items).toHaveLength(2);
  });

  it("JSON-RPC integers: afterSeq 1e20 and a fractional waitMs are -32602", async () => {
    expectRpcInvalid(await ws.request("events.subscribe", { sessionId, afterSeq: 1e20 }), "afterSeq");
    expectRpcInvalid(await ws.request("tasks.list", { limit: 1.5 }), "limit");
  });
});

describe("list pages stay within their byte budget", () => {
  it(`sessions with 15 KiB of metadata: pages of at most ${LIST_PAGE_BYTES} bytes, every session once`, async () => {
    const ids = new Set<string>();
    const title = `budget-${Date.now()}`;
    for (let i = 0; i < 12; i++) {
      ids.add(await createSession(gt.url, gt.workspace, { title, metadata: { blob: "z".repeat(15_000) } }));
    }
    const seen: string[] = [];
    let pages = 0;
    for (let cursor: string | null = null; ; ) {
      const r: Answer = await call(
        gt.url,
        "GET",
        `/v1/sessions?limit=200${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`,
      );
      expect(r.status).toBe(200);
      expect(Buffer.byteLength(JSON.stringify(r.body.items))).toBeLessThanOrEqual(LIST_PAGE_BYTES);
      expect(r.body.items.length).toBeGreaterThan(0);
      seen.push(...r.body.items.map((s: any) => s.id));
      pages++;
      cursor = r.body.nextCursor;
      if (!cursor) break;
    }
    expect(pages).toBeGreaterThan(1);
    expect(new Set(seen).size).toBe(seen.length);
    for (const id of ids) expect(seen).toContain(id);
    const rpc = await ws.call("sessions.list", { limit: 200 });
    expect(rpc.nextCursor).not.toBeNull();
    expect(Buffer.byteLength(JSON.stringify(rpc.items))).toBeLessThanOrEqual(LIST_PAGE_BYTES);
  });

  it("tasks with long prompts: pages within the budget, every task once", async () => {
    const sid = await createSession(gt.url, gt.workspace);
    const made: string[] = [];
    for (let i = 0; i < 6; i++)
      made.push((await submitOk(gt.url, sid, { prompt: `${i} ${"p".repeat(20_000)}` })).id);
    await Promise.all(made.map((id) => waitTask(gt.url, id)));
    const seen: string[] = [];
    for (let cursor: string | null = null; ; ) {
      const r: Answer = await call(
        gt.url,
        "GET",
        `/v1/tasks?sessionId=${sid}&limit=200${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`,
      );
      expect(Buffer.byteLength(JSON.stringify(r.body.items))).toBeLessThanOrEqual(LIST_PAGE_BYTES);
      seen.push(...r.body.items.map((t: any) => t.id));
      cursor = r.body.nextCursor;
      if (!cursor) break;
    }
    expect(seen.sort()).toEqual([...made].sort());
  });
});
