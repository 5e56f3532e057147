/** The sessions API (docs/api.md: Resources and states, Routes, Errors): bad input of every kind, pagination, filters, archive. */
import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { useGateway } from "../support/use-gateway.js";
import { type Answer, call } from "../support/gateway.js";
import { createSession, submitPrompt, waitTask } from "../support/turns.js";

const BODY_LIMIT = 4096;
const UNKNOWN_ID = "00000000-0000-4000-8000-000000000000";

const t = useGateway({ env: { MOORING_BODY_LIMIT_BYTES: String(BODY_LIMIT) }, workspace: true });

const sessionCount = async () => (await t.sql`select count(*)::int as n from sessions`)[0].n as number;
const taskCount = async () => (await t.sql`select count(*)::int as n from tasks`)[0].n as number;

/** A refusal in the one error shape, with no stack trace anywhere. */
function expectError(r: Answer, status: number, code: string, field?: string): void {
  expect(r.status, JSON.stringify(r.body)).toBe(status);
  expect(r.headers.get("content-type")).toMatch(/^application\/json/);
  expect(Object.keys(r.body)).toEqual(["error"]);
  expect(r.body.error.code).toBe(code);
  expect(typeof r.body.error.message).toBe("string");
  expect(r.body.error.message.length).toBeGreaterThan(0);
  if (field === undefined) expect(r.body.error.field).toBeUndefined();
  else expect(r.body.error.field).toBe(field);
  const text = JSON.stringify(r.body);
  expect(text).not.toContain("stack");
  expect(text).not.toMatch(/\bat .+:\d+:\d+/);
}

describe("POST /v1/sessions", () => {
  it("creates a session with every field", async () => {
    const r = await call(t.url, "POST", "/v1/sessions", {
      workspace: `${t.workspace}/`,
      agent: "simulated",
      agentConfig: { contextSuffix: true },
      title: "first",
      metadata: { team: "a", n: 1 },
    });
    expect(r.status).toBe(201);
    expect(r.body).toMatchObject({
      workspace: t.workspace,
      agent: "simulated",
      agentConfig: { contextSuffix: true },
      title: "first",
      metadata: { team: "a", n: 1 },
      status: "idle",
      agentSessionId: null,
      turnCount: 0,
      contextUsage: null,
      lastSeq: 0,
    });
    expect(r.body.id).toMatch(/^[0-9a-f-]{36}$/);
    for (const at of ["createdAt", "updatedAt", "lastActivityAt"])
      expect(Date.parse(r.body[at])).not.toBeNaN();
    const got = await call(t.url, "GET", `/v1/sessions/${r.body.id}`);
    expect(got.status).toBe(200);
    expect(got.body).toMatchObject({ ...r.body, turns: [] });
  });

  const big = "x".repeat(BODY_LIMIT * 2);
  it.each<[string, unknown, number, string, string | undefined, Record<string, string>?]>([
    ["missing workspace", { agent: "simulated" }, 400, "INVALID_REQUEST", "workspace"],
    ["missing agent", { workspace: "/tmp" }, 400, "INVALID_REQUEST", "agent"],
    [
      "workspace of the wrong type",
      { workspace: 5, agent: "simulated" },
      400,
      "INVALID_REQUEST",
      "workspace",
    ],
    ["agent of the wrong type", { workspace: "/tmp", agent: ["simulated"] }, 400, "INVALID_REQUEST", "agent"],
    ["an empty agent", { workspace: "/tmp", agent: "" }, 400, "INVALID_REQUEST", "agent"],
    [
      "title of the wrong type",
      { workspace: "/tmp", agent: "simulated", title: 3 },
      400,
      "INVALID_REQUEST",
      "title",
    ],
    [
      "metadata that is an array",
      { workspace: "/tmp", agent: "simulated", metadata: [1] },
      400,
      "INVALID_REQUEST",
      "metadata",
    ],
    [
      "agentConfig that is a string",
      { workspace: "/tmp", agent: "simulated", agentConfig: "x" },
      400,
      "INVALID_REQUEST",
      "agentConfig",
    ],
    [
      "an unknown field",
      { workspace: "/tmp", agent: "simulated", command: "rm -rf /" },
      400,
      "INVALID_REQUEST",
      "command",
    ],
    ["an unknown agent", { workspace: "/tmp", agent: "bash" }, 400, "INVALID_REQUEST", "agent"],
    [
      "a disallowed agentConfig field",
      { workspace: "/tmp", agent: "simulated", agentConfig: { command: "sh" } },
      400,
      "INVALID_REQUEST",
      "agentConfig",
    ],
    [
      "a disallowed claude-code agentConfig field",
      { workspace: "/tmp", agent: "claude-code", agentConfig: { command: "sh" } },
      400,
      "INVALID_REQUEST",
      "agentConfig",
    ],
    [
      "a relative workspace",
      { workspace: "projects/x", agent: "simulated" },
      400,
      "INVALID_WORKSPACE",
      "workspace",
    ],
    ["an empty workspace", { workspace: "", agent: "simulated" }, 400, "INVALID_REQUEST", "workspace"],
    ["an array body", [], 400, "INVALID_REQUEST", undefined],
    ["a null body", "null", 400, "INVALID_REQUEST", undefined],
    ["malformed JSON", '{"workspace": "/tmp", "agent": ', 400, "INVALID_REQUEST", undefined],
    ["an empty JSON body", "", 400, "INVALID_REQUEST", undefined],
    [
      "an oversized body",
      { workspace: "/tmp", agent: "simulated", metadata: { big } },
      413,
      "PAYLOAD_TOO_LARGE",
      undefined,
    ],
    [
      "a text/plain body",
      "workspace=/tmp",
      415,
      "UNSUPPORTED_MEDIA_TYPE",
      undefined,
      { "content-type": "text/plain" },
    ],
    [
      "a form body",
      "workspace=/tmp&agent=simulated",
      415,
      "UNSUPPORTED_MEDIA_TYPE",
      undefined,
      { "content-type": "application/x-www-form-urlencoded" },
    ],
  ])("refuses %s and writes nothing", async (_what, body, status, code, field, headers = {}) => {
    const before = await sessionCount();
    const r = await call(t.url, "POST", "/v1/sessions", body, headers);
    expectError(r, status, code, field);
    expect(await sessionCount()).toBe(before);
  });

  it("names the registered agents when the agent is unknown", async () => {
    const r = await call(t.url, "POST", "/v1/sessions", { workspace: t.workspace, agent: "gemini" });
    expectError(r, 400, "INVALID_REQUEST", "agent");
    expect(r.body.error.message).toMatch(/simulated/);
    expect(r.body.error.message).toMatch(/claude-code/);
  });

  it("accepts application/json with a charset", async () => {
    const r = await call(
      t.url,
      "POST",
      "/v1/sessions",
      { workspace: t.workspace, agent: "simulated" },
      {
        "content-type": "application/json; charset=utf-8",
      },
    );
    expect(r.status).toBe(201);
  });
});

describe("unknown sessions and routes", () => {
  it.each([
    ["GET", `/v1/sessions/${UNKNOWN_ID}`, undefined],
    ["GET", "/v1/sessions/not-a-uuid", undefined],
    ["DELETE", `/v1/sessions/${UNKNOWN_ID}`, undefined],
    ["DELETE", "/v1/sessions/not-a-uuid", undefined],
    ["POST", `/v1/sessions/${UNKNOWN_ID}/turns`, { prompt: "hi" }],
    ["POST", "/v1/sessions/not-a-uuid/turns", { prompt: "hi" }],
  ])("%s %s answers 404 SESSION_NOT_FOUND", async (method, path, body) => {
    const [sessions, tasks] = [await sessionCount(), await taskCount()];
    expectError(await call(t.url, method, path, body), 404, "SESSION_NOT_FOUND");
    expect([await sessionCount(), await taskCount()]).toEqual([sessions, tasks]);
  });

  it.each([
    ["GET", "/v1/nothing-here"],
    ["GET", "/nothing"],
  ])("%s %s answers 404 in the same error shape", async (method, path) => {
    const r = await call(t.url, method, path);
    expectError(r, 404, "NOT_FOUND");
    expect(r.body.error.message).toContain(path);
  });

  it.each([
    ["PUT", "/v1/sessions", "GET, HEAD, POST"],
    ["PATCH", `/v1/sessions/${UNKNOWN_ID}`, "DELETE, GET, HEAD"],
  ])("%s %s (a known path) answers 405 with Allow in the same error shape", async (method, path, allow) => {
    const r = await call(t.url, method, path);
    expectError(r, 405, "METHOD_NOT_ALLOWED");
    expect(r.headers.get("allow")).toBe(allow);
    expect(r.body.error.message).toContain(path);
  });

  it("refuses a bad turn body with the offending field, writing nothing", async () => {
    const sessionId = await createSession(t.url, t.workspace);
    const tasks = await taskCount();
    const cases: [unknown, string | undefined][] = [
      [{}, "prompt"],
      [{ prompt: 5 }, "prompt"],
      [{ prompt: "" }, "prompt"],
      [{ prompt: "hi", ifBusy: "wait" }, "ifBusy"],
      [{ prompt: "hi", loadClass: "huge" }, "loadClass"],
      [{ prompt: "hi", timeoutMs: -1 }, "timeoutMs"],
      [{ prompt: "hi", extra: true }, "extra"],
    ];
    for (const [body, field] of cases) {
      expectError(
        await call(t.url, "POST", `/v1/sessions/${sessionId}/turns`, body),
        400,
        "INVALID_REQUEST",
        field,
      );
    }
    expect(await taskCount()).toBe(tasks);
    expect((await call(t.url, "GET", `/v1/sessions/${sessionId}`)).body.lastSeq).toBe(0);
  });
});

describe("GET /v1/sessions", () => {
  let pageWorkspace: string;
  beforeAll(async () => {
    pageWorkspace = join(t.workspace, "paged");
    await mkdir(pageWorkspace);
  });

  it.each([
    ["cursor=not-a-cursor", "cursor"],
    [`cursor=${Buffer.from('["yesterday","x"]').toString("base64url")}`, "cursor"],
    ["limit=0", "limit"],
    ["limit=201", "limit"],
    ["limit=ten", "limit"],
    ["status=sleeping", "status"],
  ])("refuses ?%s", async (query, field) => {
    expectError(await call(t.url, "GET", `/v1/sessions?${query}`), 400, "INVALID_REQUEST", field);
  });

  it("ignores a query parameter it does not name (docs/api.md, Routes)", async () => {
    expect((await call(t.url, "GET", "/v1/sessions?colour=blue")).status).toBe(200);
  });

  it("refuses a relative workspace filter", async () => {
    expectError(
      await call(t.url, "GET", "/v1/sessions?workspace=rel/path"),
      400,
      "INVALID_WORKSPACE",
      "workspace",
    );
  });

  it("pages through every session with limit 3: none missing, none twice, newest first", async () => {
    // Created together, so several share a millisecond: the id breaks the tie.
    await Promise.all(
      Array.from({ length: 7 }, (_, i) => createSession(t.url, pageWorkspace, { title: `p${i}` })),
    );
    const expected = (
      await t.sql`select id from sessions order by date_trunc('milliseconds', created_at) desc, id desc`
    ).map((r) => r.id as string);
    expect(expected.length).toBeGreaterThanOrEqual(7);

    const seen: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const r: Answer = await call(t.url, "GET", `/v1/sessions?limit=3${cursor ? `&cursor=${cursor}` : ""}`);
      expect(r.status).toBe(200);
      expect(r.body.items.length).toBeLessThanOrEqual(3);
      seen.push(...r.body.items.map((s: { id: string }) => s.id));
      cursor = r.body.nextCursor;
      pages++;
    } while (cursor && pages < 100);
    expect(seen).toEqual(expected);
    expect(pages).toBe(Math.ceil(expected.length / 3));

    // The same through the workspace filter: exactly the 7.
    const filtered: string[] = [];
    cursor = null;
    do {
      const q = `workspace=${encodeURIComponent(pageWorkspace)}&limit=3${cursor ? `&cursor=${cursor}` : ""}`;
      const r: Answer = await call(t.url, "GET", `/v1/sessions?${q}`);
      filtered.push(...r.body.items.map((s: { id: string }) => s.id));
      cursor = r.body.nextCursor;
    } while (cursor);
    expect(filtered).toHaveLength(7);
    expect(new Set(filtered).size).toBe(7);
  });

  it("filters by workspace, normalizing the filter", async () => {
    const r = await call(
      t.url,
      "GET",
      `/v1/sessions?workspace=${encodeURIComponent(`${t.workspace}//./paged/`)}&limit=50`,
    );
    expect(r.status).toBe(200);
    expect(r.body.items).toHaveLength(7);
    for (const s of r.body.items) expect(s.workspace).toBe(pageWorkspace);
    expect(r.body.nextCursor).toBeNull();
    const none = await call(
      t.url,
      "GET",
      `/v1/sessions?workspace=${encodeURIComponent(join(t.workspace, "elsewhere"))}`,
    );
    expect(none.body).toEqual({ items: [], nextCursor: null });
  });

  it("filters by status: idle, busy (a queued or running turn) and archived", async () => {
    const filterWs = join(t.workspace, "filters");
    await mkdir(filterWs);
    const idle = await createSession(t.url, filterWs);
    const busy = await createSession(t.url, filterWs);
    const archived = await createSession(t.url, filterWs);
    const turn = await submitPrompt(t.url, busy, "[hang]");
    expect((await call(t.url, "DELETE", `/v1/sessions/${archived}`)).status).toBe(200);

    const ids = async (status: string) =>
      (
        await call(t.url, "GET", `/v1/sessions?workspace=${encodeURIComponent(filterWs)}&status=${status}`)
      ).body.items.map((s: { id: string; status: string }) => {
        expect(s.status).toBe(status);
        return s.id;
      });
    expect(await ids("idle")).toEqual([idle]);
    expect(await ids("busy")).toEqual([busy]);
    expect(await ids("archived")).toEqual([archived]);

    // Archiving the busy one cancels its turn and makes it archived, not busy.
    expect((await call(t.url, "DELETE", `/v1/sessions/${busy}`)).body.status).toBe("archived");
    expect((await waitTask(t.url, turn.id)).status).toBe("cancelled");
    expect(await ids("busy")).toEqual([]);
    expect((await ids("archived")).sort()).toEqual([busy, archived].sort());
  });
});

describe("DELETE /v1/sessions/:id", () => {
  it("archives: GET shows it, a turn gets 409 SESSION_ARCHIVED, a second DELETE changes nothing", async () => {
    const sessionId = await createSession(t.url, t.workspace, { title: "to archive" });
    const del = await call(t.url, "DELETE", `/v1/sessions/${sessionId}`);
    expect(del.status).toBe(200);
    expect(del.body).toMatchObject({ id: sessionId, status: "archived", title: "to archive" });

    const got = await call(t.url, "GET", `/v1/sessions/${sessionId}`);
    expect(got.status).toBe(200);
    expect(got.body.status).toBe("archived");
    const [row] = await t.sql`select archived_at from sessions where id = ${sessionId}`;
    expect(row.archivedAt).toBeInstanceOf(Date);

    const tasks = await taskCount();
    expectError(
      await call(t.url, "POST", `/v1/sessions/${sessionId}/turns`, { prompt: "hello" }),
      409,
      "SESSION_ARCHIVED",
    );
    expect(await taskCount()).toBe(tasks);

    const again = await call(t.url, "DELETE", `/v1/sessions/${sessionId}`);
    expect(again.status).toBe(200);
    expect(again.body.status).toBe("archived");
    const [after] = await t.sql`select archived_at from sessions where id = ${sessionId}`;
    expect(after.archivedAt).toEqual(row.archivedAt);
  });
});
