/**
 * Property: whatever a hostile client puts in any one field of any route or JSON-RPC method (NUL,
 * lone surrogates, huge strings, deep nesting, wrong types, out-of-range numbers, unknown fields),
 * the gateway answers with a client error, never a 500 or a crash, and stores nothing. Each
 * request takes a valid base and makes exactly one field hostile, so every request must be refused.
 */
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { useGateway } from "../support/use-gateway.js";
import { call } from "../support/gateway.js";
import { createSession, submitOk, waitTask } from "../support/turns.js";
import { WsClient } from "../support/ws-client.js";

const RUNS = 80;

const t = useGateway({
  workspace: true,
  gateway: {
    logLevel: "error",
    onLog: (record) => errorLogs.push(record),
  },
});
let ws: WsClient;
let sessionId: string;
let taskId: string;
const errorLogs: Record<string, any>[] = [];

beforeAll(async () => {
  ws = await WsClient.connect(t.url);
  sessionId = await createSession(t.url, t.workspace);
  taskId = (await submitOk(t.url, sessionId, { prompt: "hello" })).id;
  await waitTask(t.url, taskId);
});

afterAll(async () => {
  await ws?.close();
});

// ---- hostile JSON values -------------------------------------------------------------------

/** A value written into the request's JSON text as it is (nesting too deep for JSON.stringify). */
class Raw {
  constructor(readonly text: string) {}
  toString() {
    return `Raw(${this.text.length} chars)`;
  }
}

function deepText(depth: number, kind: "object" | "array"): Raw {
  const [open, close] = kind === "object" ? ['{"a":', "}"] : ["[", "]"];
  return new Raw(`${open.repeat(depth)}1${close.repeat(depth)}`);
}

/** JSON text of `value`, with Raw values (at any depth of plain objects) spliced in. */
function jsonText(value: unknown): string {
  const raws: Raw[] = [];
  const text = JSON.stringify(value, (_key, v) => {
    if (v instanceof Raw) {
      raws.push(v);
      return `__raw${raws.length - 1}__`;
    }
    return v;
  });
  return text.replace(/"__raw(\d+)__"/g, (_m, i) => raws[Number(i)].text);
}

const surrogates = fc.constantFrom("\ud800", "\udbff", "\udc00", "\udfff");
const nulText = fc
  .tuple(fc.string({ maxLength: 12 }), fc.string({ maxLength: 12 }))
  .map(([a, b]) => `${a}\u0000${b}`);
const loneSurrogateText = fc
  .tuple(fc.string({ unit: "binary", maxLength: 12 }), surrogates, fc.string({ maxLength: 12 }))
  .map(([a, s, b]) => a + s + b);
const badText = fc.oneof(nulText, loneSurrogateText);
const deep = fc
  .tuple(fc.integer({ min: 33, max: 4000 }), fc.constantFrom("object" as const, "array" as const))
  .map(([depth, kind]) => deepText(depth, kind));
const huge = (over: number) => fc.constantFrom(over + 1, 600_000).map((n) => "h".repeat(n));
const notString = fc.oneof(
  fc.integer(),
  fc.double(),
  fc.boolean(),
  fc.constant(null),
  fc.array(fc.integer(), { maxLength: 3 }),
  fc.dictionary(fc.string({ maxLength: 5 }), fc.integer(), { maxKeys: 3 }),
);
/** An object with a bad string somewhere inside it, as a key or a value. */
const objectWithBadText = fc
  .tuple(badText, fc.boolean(), fc.integer({ min: 0, max: 10 }))
  .map(([text, asKey, depth]) => {
    let node: unknown = asKey ? { [text]: 1 } : { v: text };
    for (let i = 0; i < depth; i++) node = i % 2 === 0 ? { n: node } : [node];
    return { wrap: node };
  });

/** A string field with a maximum length (and no other valid value generated). */
const textField = (maxLength: number) =>
  fc.oneof(badText, huge(maxLength), deep, notString, objectWithBadText);
/** An id field: nothing a valid id could be. */
const badIdField = fc.oneof(badText, huge(64), deep, notString);
/** An id field: anything but an existing id (a well-formed string names nothing: not found). */
const idField = fc.oneof(badIdField, fc.string({ maxLength: 40 }));
/** One of a few literals. */
const enumField = (values: string[]) =>
  fc.oneof(
    fc.string({ maxLength: 20 }).filter((s) => !values.includes(s)),
    badText,
    deep,
    notString,
  );
/** An integer field in [min, max]. */
const intField = (min: number, max: number) =>
  fc.oneof(
    fc.double().filter((d) => !Number.isInteger(d) || d < min || d > max),
    fc.integer({ min: -1_000_000, max: min - 1 }),
    fc.constantFrom(max + 1, 1e20, 2 ** 53 + 2, -0.5),
    fc.string({ maxLength: 10 }),
    badText,
    deep,
    fc.boolean(),
    fc.constant(null),
    fc.array(fc.integer(), { maxLength: 2 }),
  );
/** A free-form JSON object field (metadata, agentConfig): too deep, too large, bad text, or no object. */
const jsonField = fc.oneof(
  fc.integer({ min: 17, max: 40 }).map((depth) => deepText(depth, "object")),
  deep,
  fc.integer({ min: 16_500, max: 200_000 }).map((n) => ({ big: "b".repeat(n) })),
  objectWithBadText,
  fc.oneof(
    fc.string({ maxLength: 10 }),
    fc.integer(),
    fc.boolean(),
    fc.constant(null),
    fc.array(fc.integer()),
  ),
);
/** A field no schema has, with any value (its name possibly hostile too). */
const extraField = fc.tuple(
  fc.oneof(fc.string({ minLength: 1, maxLength: 10 }), badText).map((k) => `x_${k}`),
  fc.oneof(fc.string(), fc.integer(), badText, deep),
);

type Fields = Record<string, fc.Arbitrary<unknown>>;
/** `base` with exactly one of `fields` (or an unknown field) made hostile. */
function hostile(base: () => Record<string, unknown>, fields: Fields) {
  const choices = Object.entries(fields).map(([name, arb]) => arb.map((v) => ({ ...base(), [name]: v })));
  choices.push(extraField.map(([k, v]) => ({ ...base(), [k]: v })));
  return fc.oneof(...choices);
}

const sessionFields: Fields = {
  workspace: textField(4096),
  agent: textField(64),
  agentConfig: jsonField,
  title: textField(500),
  metadata: jsonField,
};
const turnFields: Fields = {
  prompt: fc.oneof(badText, huge(200_000), deep, notString, objectWithBadText, fc.constant("   ")),
  idempotencyKey: textField(200),
  ifBusy: enumField(["enqueue", "reject", "interrupt"]),
  loadClass: enumField(["short", "long", "complex"]),
  timeoutMs: intField(1, 3_600_000),
};

// ---- what must hold --------------------------------------------------------------------------

async function rowCounts() {
  const [row] = await t.sql<{ sessions: number; tasks: number; events: number; archived: number }[]>`
    select (select count(*)::int from sessions) as sessions, (select count(*)::int from tasks) as tasks,
           (select count(*)::int from events) as events, (select count(*)::int from sessions where archived_at is not null) as archived`;
  return row;
}

/** Run `request`; it must be a client error and leave every table as it was. */
async function refusedAndNothingStored(request: () => Promise<{ status: number; body: any }>) {
  const before = await rowCounts();
  const r = await request();
  expect(r.status, JSON.stringify(r.body)?.slice(0, 300)).toBeGreaterThanOrEqual(400);
  expect(r.status, JSON.stringify(r.body)?.slice(0, 300)).toBeLessThan(500);
  if (r.body?.error) expect(r.body.error.code).not.toBe("INTERNAL");
  expect(await rowCounts()).toEqual(before);
}

const postJson = (path: string, value: unknown) =>
  call(t.url, "POST", path, jsonText(value), { "content-type": "application/json" });

// ---- paths and queries: only strings travel there ----------------------------------------

const hostileQueryText = fc.oneof(
  fc.string({ maxLength: 20 }).map((s) => `${encodeURIComponent(s)}%00`),
  fc.constantFrom("%ED%A0%80", "%ED%BF%BF", "%C0%80", "%FF", "%", "%zz", "a%00b"),
  fc.constantFrom(
    "1e20",
    "1.5",
    "-1",
    "0x10",
    "%201",
    "",
    "NaN",
    "Infinity",
    "9007199254740993",
    "1e3",
    "+1",
  ),
  fc.integer({ min: 5000, max: 12_000 }).map((n) => "q".repeat(n)),
);

describe("REST bodies", () => {
  it("POST /v1/sessions with one hostile field", async () => {
    const arb = hostile(() => ({ workspace: t.workspace, agent: "simulated" }), sessionFields);
    await fc.assert(
      fc.asyncProperty(arb, (body) => refusedAndNothingStored(() => postJson("/v1/sessions", body))),
      { numRuns: RUNS },
    );
  });

  it("POST /v1/sessions/:id/turns with one hostile field or a hostile session id", async () => {
    const arb = fc.oneof(
      hostile(() => ({ prompt: "hi" }), turnFields).map((body) => ({ id: sessionId, body })),
      hostileQueryText.map((id) => ({ id, body: { prompt: "hi" } })),
    );
    await fc.assert(
      fc.asyncProperty(arb, ({ id, body }) =>
        refusedAndNothingStored(() => postJson(`/v1/sessions/${id}/turns`, body)),
      ),
      { numRuns: RUNS },
    );
  });
});

/** GET routes store nothing; they must still never fail with a 500. */
async function clientErrorOrOk(path: string) {
  const before = await rowCounts();
  const r = await call(t.url, "GET", path);
  expect(r.status, `${path.slice(0, 200)} → ${JSON.stringify(r.body)?.slice(0, 300)}`).toBeLessThan(500);
  expect(await rowCounts()).toEqual(before);
  return r;
}

describe("REST paths and queries", () => {
  it("every integer in a path or query: 400", async () => {
    const integerSlots = [
      (v: string) => `/v1/sessions/${sessionId}/events/${v}/payload`,
      (v: string) => `/v1/sessions/${sessionId}/events?afterSeq=${v}`,
      (v: string) => `/v1/sessions?limit=${v}`,
      (v: string) => `/v1/tasks?limit=${v}`,
      (v: string) => `/v1/tasks/${taskId}?waitMs=${v}`,
    ];
    const arb = fc.tuple(fc.constantFrom(...integerSlots), hostileQueryText);
    await fc.assert(
      fc.asyncProperty(arb, async ([slot, v]) => {
        const path = slot(v);
        const r = await call(t.url, "GET", path);
        // A URL too long for Node's header limit is refused before the gateway (431).
        expect(
          [400, 404, 431],
          `${path.slice(0, 120)} → ${r.status} ${JSON.stringify(r.body)?.slice(0, 200)}`,
        ).toContain(r.status);
      }),
      { numRuns: RUNS * 2 },
    );
  });

  it("every other query and path field: never a 500, nothing stored", async () => {
    const slots = [
      (v: string) => `/v1/sessions?status=${v}`,
      (v: string) => `/v1/sessions?workspace=${v}`,
      (v: string) => `/v1/sessions?cursor=${v}`,
      (v: string) => `/v1/sessions?${v}=1`,
      (v: string) => `/v1/tasks?sessionId=${v}`,
      (v: string) => `/v1/tasks?status=${v}`,
      (v: string) => `/v1/tasks?cursor=${v}`,
      (v: string) => `/v1/sessions/${v}`,
      (v: string) => `/v1/tasks/${v}`,
      (v: string) => `/v1/sessions/${v}/events/1/payload`,
    ];
    const arb = fc.tuple(
      fc.constantFrom(...slots),
      fc.oneof(hostileQueryText, fc.string({ maxLength: 30 }).map(encodeURIComponent)),
    );
    await fc.assert(
      fc.asyncProperty(arb, ([slot, v]) => clientErrorOrOk(slot(v)).then(() => undefined)),
      { numRuns: RUNS * 2 },
    );
  });

  it("DELETE /v1/sessions/:id and POST /v1/tasks/:id/cancel with hostile ids: refused, nothing changed", async () => {
    const arb = fc.tuple(fc.constantFrom("DELETE /v1/sessions/", "POST /v1/tasks/"), hostileQueryText);
    await fc.assert(
      fc.asyncProperty(arb, ([route, v]) => {
        const [method, prefix] = route.split(" ");
        const path = `${prefix}${v}${method === "POST" ? "/cancel" : ""}`;
        return refusedAndNothingStored(() => call(t.url, method, path));
      }),
      { numRuns: RUNS },
    );
  });
});

// ---- JSON-RPC ----------------------------------------------------------------------------

const methods: Record<string, { base: () => Record<string, unknown>; fields: Fields }> = {
  "sessions.create": { base: () => ({ workspace: t.workspace, agent: "simulated" }), fields: sessionFields },
  "sessions.get": { base: () => ({ sessionId }), fields: { sessionId: idField } },
  "sessions.list": {
    base: () => ({}),
    fields: {
      status: enumField(["idle", "busy", "archived"]),
      workspace: textField(4096),
      limit: intField(1, 200),
      cursor: textField(512),
    },
  },
  "sessions.archive": { base: () => ({}), fields: { sessionId: idField } },
  "turns.submit": {
    base: () => ({ sessionId, prompt: "hi" }),
    fields: { sessionId: idField, ...turnFields },
  },
  "tasks.get": { base: () => ({ taskId }), fields: { taskId: idField, waitMs: intField(0, 60_000) } },
  "tasks.cancel": { base: () => ({}), fields: { taskId: idField } },
  "tasks.list": {
    base: () => ({}),
    fields: {
      // A well-formed string that is no session filters to an empty page: only ids that cannot be one.
      sessionId: badIdField,
      status: enumField([
        "queued",
        "running",
        "cancelling",
        "completed",
        "failed",
        "cancelled",
        "expired",
        "interrupted",
      ]),
      limit: intField(1, 200),
      cursor: textField(512),
    },
  },
  "gate.status": { base: () => ({}), fields: {} },
  "events.subscribe": {
    base: () => ({ sessionId }),
    fields: { sessionId: idField, afterSeq: intField(0, Number.MAX_SAFE_INTEGER) },
  },
  // Unsubscribing from a session one is not subscribed to is fine: only ids that cannot be one.
  "events.unsubscribe": { base: () => ({ sessionId }), fields: { sessionId: badIdField } },
};

const hostileParams = fc.oneof(
  fc.integer(),
  fc.string({ maxLength: 5 }),
  fc.array(fc.integer()),
  fc.constant(null),
  badText,
);

describe("JSON-RPC methods", () => {
  for (const [method, { base, fields }] of Object.entries(methods)) {
    it(`${method}: one hostile param, or hostile params, over the socket`, async () => {
      const arb = fc.oneof(hostile(base, fields), hostileParams);
      await fc.assert(
        fc.asyncProperty(arb, async (params) => {
          const before = await rowCounts();
          const text = jsonText({ jsonrpc: "2.0", id: 7, method, params });
          // Frames past MOORING_WS_MAX_PAYLOAD_BYTES close the socket: those go over POST /v1/rpc.
          let answer: any;
          if (Buffer.byteLength(text) < 1_000_000 || method.startsWith("events.")) {
            const start = ws.received.length;
            ws.sendRaw(text);
            await ws.until(() =>
              ws.received.slice(start).some((m) => m.message?.id === 7 || m.message?.id === null),
            );
            answer = ws.received
              .slice(start)
              .find((m) => m.message?.id === 7 || m.message?.id === null)!.message;
          } else {
            answer = (await call(t.url, "POST", "/v1/rpc", text, { "content-type": "application/json" }))
              .body;
          }
          expect(answer.result, JSON.stringify(answer).slice(0, 300)).toBeUndefined();
          expect(answer.error.code).not.toBe(-32603);
          expect([-32600, -32602, -32004]).toContain(answer.error.code);
          expect(await rowCounts()).toEqual(before);
        }),
        { numRuns: RUNS },
      );
    });
  }

  it("hostile envelopes over POST /v1/rpc: ids, methods, batches", async () => {
    const envelope = fc.oneof(
      fc
        .tuple(
          fc.oneof(
            fc.double({ noNaN: true, noDefaultInfinity: true }).filter((d) => !Number.isSafeInteger(d)),
            fc.constant(new Raw("1e400")),
            deep,
          ),
          fc.constant("gate.status"),
        )
        .map(([id, method]) => ({ jsonrpc: "2.0", id, method })),
      badText.map((method) => ({ jsonrpc: "2.0", id: 1, method })),
      fc
        .integer({ min: 101, max: 2000 })
        .map(
          (n) =>
            new Raw(
              `[${Array(n).fill('{"jsonrpc":"2.0","id":1,"method":"sessions.create","params":{}}').join(",")}]`,
            ),
        ),
      deep,
    );
    await fc.assert(
      fc.asyncProperty(envelope, async (message) => {
        const before = await rowCounts();
        const r = await call(t.url, "POST", "/v1/rpc", jsonText(message), {
          "content-type": "application/json",
        });
        expect(r.status).toBe(200);
        const answers = Array.isArray(r.body) ? r.body : [r.body];
        for (const a of answers) {
          expect(a.result).toBeUndefined();
          expect(a.error.code).not.toBe(-32603);
        }
        expect(await rowCounts()).toEqual(before);
      }),
      { numRuns: RUNS },
    );
  });
});

describe("afterwards", () => {
  it("the gateway is up, logged no internal error, and the socket is still open", async () => {
    expect((await call(t.url, "GET", "/healthz")).status).toBe(200);
    expect((await call(t.url, "GET", "/v1/sessions")).status).toBe(200);
    expect(await ws.call("gate.status")).toHaveProperty("maxActive");
    expect(errorLogs.filter((r) => r.level >= 50)).toEqual([]);
  });
});
