/**
 * Chained gateways (docs/agents.md, Chained gateways): a downstream gateway whose agent is another
 * mooring gateway (driver `mooring`). Two real gateway processes on loopback, each with its own
 * database; the link between them passes through a TCP proxy the tests cut, and the upstream is
 * killed with SIGKILL and started again behind the same proxy.
 */
import { RECAP_HEAD, RECAP_TAIL } from "../../src/domain/carry-over.js";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { upstreamGoneNotice } from "../../src/agents/mooring/conversation.js";
import { SseReader, taskEvents } from "../support/agent-gateway.js";
import { createTestDatabase, type TestDatabase } from "../support/db.js";
import { TestClock } from "../support/fake-clock.js";
import { call, eventually, type GatewayProcess, startTestGateway } from "../support/gateway.js";
import { gatewayEnv, logLines, Processes, useProcessSuite } from "../support/lifecycle.js";
import { createSession, submitPrompt, waitTask, waitTerminal } from "../support/turns.js";
import { TcpProxy } from "../support/tcp-proxy.js";

const TOKEN = "upstream-secret-token-7f3a";
const auth = { authorization: `Bearer ${TOKEN}` };

const procs = new Processes();
let downDb: TestDatabase;
let workspace: string;
useProcessSuite("mooring-chain-", procs, (db, ws) => {
  downDb = db;
  workspace = ws;
});

/** Per test: the upstream's own database, the proxy in front of it. */
let upDb: TestDatabase;
let proxy: TcpProxy;
const upDbs: TestDatabase[] = [];

beforeAll(() => () => Promise.all(upDbs.map((db) => db.drop())).then(() => {}));

afterEach(async () => {
  await proxy?.close();
});

async function startUpstream(extra: Record<string, string> = {}): Promise<GatewayProcess> {
  const gw = await procs.spawn(gatewayEnv(upDb.url, { MOORING_API_TOKENS: TOKEN, ...extra }));
  await gw.waitReady();
  return gw;
}

/** A fresh upstream (own database) behind a new proxy. */
async function upstream(extra: Record<string, string> = {}): Promise<GatewayProcess> {
  upDb = await createTestDatabase();
  upDbs.push(upDb);
  const gw = await startUpstream(extra);
  proxy = await TcpProxy.start(gw.url);
  return gw;
}

/**
 * The downstream's agent `up` (the upstream behind the proxy) and its token: in the environment a
 * spawned downstream gets, or in the entry itself for one in this process (whose environment is
 * the test runner's).
 */
function downstreamEnv(token = TOKEN, inProcess = false): Record<string, string> {
  const agents = {
    up: {
      driver: "mooring",
      url: proxy.url,
      ...(inProcess ? { token } : { tokenEnv: "CHAIN_UPSTREAM_TOKEN" }),
      agent: "simulated",
      reconnectBaseMs: 200,
      reconnectMaxMs: 1000,
    },
  };
  return { MOORING_AGENTS: JSON.stringify(agents), ...(inProcess ? {} : { CHAIN_UPSTREAM_TOKEN: token }) };
}

async function downstream(extra: Record<string, string> = {}, token = TOKEN): Promise<GatewayProcess> {
  const gw = await procs.spawn(gatewayEnv(downDb.url, { ...downstreamEnv(token), ...extra }));
  await gw.waitReady();
  return gw;
}

/** The upstream task a downstream session's turn made (there is one upstream session per downstream one). */
async function upstreamTaskOf(downSessionId: string): Promise<any> {
  return eventually(async () => {
    const [row] = await downDb.sql<{ agentSessionId: string | null }[]>`
      select agent_session_id from sessions where id = ${downSessionId}`;
    if (!row?.agentSessionId) return null;
    const [task] = await upDb.sql<{ id: string }[]>`
      select id from tasks where session_id = ${row.agentSessionId} order by turn_index desc limit 1`;
    return task ?? null;
  }, 60_000);
}

/** The agent's events of a task, as clients see them (the task's own bookkeeping left out). */
const agentEvents = (events: { type: string; data: any }[]) =>
  events.filter((e) => !e.type.startsWith("task.")).map((e) => ({ type: e.type, data: e.data }));

const deltaText = (events: { type: string; data: any }[]) =>
  events
    .filter((e) => e.type === "message.delta")
    .map((e) => e.data.text)
    .join("");

describe("a gateway whose agent is another gateway", () => {
  it("streams the upstream's events one to one and completes with its result", async () => {
    await upstream();
    const down = await downstream();
    const sessionId = await createSession(down.url, workspace, { agent: "up" });
    const task = await submitPrompt(down.url, sessionId, "[deltas 5][tool 300][tokens 5000]");
    const done = await waitTerminal(down.url, task.id, 120_000);
    expect(done.status, JSON.stringify(done.error)).toBe("completed");

    const up = await upstreamTaskOf(sessionId);
    const upTask = (await call(proxy.url, "GET", `/v1/tasks/${up.id}`, undefined, auth)).body;
    expect(upTask.status).toBe("completed");
    expect(done.result.text).toBe(upTask.result.text);
    expect(done.result.contextPercent).toBe(upTask.result.contextPercent);

    const downEvents = await taskEvents(downDb.sql, task.id);
    const upEvents = await taskEvents(upDb.sql, up.id);
    // Runs of deltas may be merged differently on each side; the text is the same.
    expect(deltaText(downEvents)).toBe(deltaText(upEvents));
    const withoutDeltas = (events: { type: string; data: any }[]) =>
      agentEvents(events).filter((e) => e.type !== "message.delta");
    expect(withoutDeltas(downEvents)).toEqual(withoutDeltas(upEvents));
    expect(withoutDeltas(downEvents).map((e) => e.type)).toEqual([
      "tool.call",
      "tool.result",
      "message",
      "usage",
    ]);

    // The resume cursor is the upstream session; the next turn goes to the same one.
    const session = (await call(down.url, "GET", `/v1/sessions/${sessionId}`)).body;
    expect(session.agentSessionId).toBe(upTask.sessionId);
    const second = await submitPrompt(down.url, sessionId, "again");
    expect((await waitTerminal(down.url, second.id, 120_000)).status).toBe("completed");
    const [{ count }] = await upDb.sql<{ count: number }[]>`select count(*)::int as count from sessions`;
    expect(count).toBe(1);
    // The upstream task ended: nothing is left for the orphan round.
    const row = await eventually(async () => {
      const [r] = await downDb.sql<{ upstream: any }[]>`select upstream from tasks where id = ${task.id}`;
      return r?.upstream?.released ? r : null;
    }, 60_000);
    expect(row.upstream).toMatchObject({ taskId: up.id, released: expect.any(String) });
    // The token never reached a log of either side.
    expect(down.output()).not.toContain(TOKEN);
  }, 240_000);

  it("starts a fresh upstream session, with session.reset, when the upstream's is gone", async () => {
    await upstream();
    const down = await downstream();
    const sessionId = await createSession(down.url, workspace, { agent: "up" });
    const first = await submitPrompt(down.url, sessionId, "one");
    expect((await waitTerminal(down.url, first.id, 120_000)).status).toBe("completed");
    const before = (await call(down.url, "GET", `/v1/sessions/${sessionId}`)).body.agentSessionId;
    // The upstream's operator archives it.
    expect((await call(proxy.url, "DELETE", `/v1/sessions/${before}`, undefined, auth)).status).toBe(200);

    const second = await submitPrompt(down.url, sessionId, "two");
    const done = await waitTerminal(down.url, second.id, 120_000);
    expect(done.status, JSON.stringify(done.error)).toBe("completed");
    const reset = (await taskEvents(downDb.sql, second.id)).find((e) => e.type === "session.reset");
    const chars = reset?.data.carriedOver?.chars;
    expect(reset?.data).toEqual({
      reason: "resume_failed",
      notice: `${upstreamGoneNotice} Context carried over: a recap of the last 1 turn (${chars} characters) from the session's log.`,
      carriedOver: { turns: 1, chars: expect.any(Number) },
    });
    // The upstream takes one prompt string: the recap of turn "one", then the prompt.
    const [upTurn] = await upDb.sql<{ prompt: string }[]>`
      select t.prompt from tasks t join sessions s on s.id = t.session_id
      where s.id <> ${before} order by t.created_at desc limit 1`;
    expect(upTurn.prompt.startsWith(RECAP_HEAD)).toBe(true);
    expect(upTurn.prompt).toContain("--- turn 1, user ---\none\n");
    expect(upTurn.prompt.endsWith(`${RECAP_TAIL}\n\ntwo`)).toBe(true);
    expect(upTurn.prompt.length).toBe(chars + "\n\ntwo".length);
    const after = (await call(down.url, "GET", `/v1/sessions/${sessionId}`)).body.agentSessionId;
    expect(after).not.toBe(before);
    const [row] = await downDb.sql<{ pastAgentSessionIds: string[] }[]>`
      select past_agent_session_ids from sessions where id = ${sessionId}`;
    expect(row.pastAgentSessionIds).toEqual([before]);
  }, 240_000);

  it("rolls back through a new upstream session carrying the kept turns (fork and rollback on driver mooring)", async () => {
    await upstream();
    const down = await downstream();
    const sessionId = await createSession(down.url, workspace, { agent: "up" });
    for (const prompt of ["one", "two"]) {
      const t = await submitPrompt(down.url, sessionId, prompt);
      expect((await waitTerminal(down.url, t.id, 120_000)).status).toBe("completed");
    }
    const before = (await call(down.url, "GET", `/v1/sessions/${sessionId}`)).body.agentSessionId;
    expect((await call(down.url, "POST", `/v1/sessions/${sessionId}/rollback`, { turns: 1 })).status).toBe(200);
    const third = await submitPrompt(down.url, sessionId, "three");
    expect((await waitTerminal(down.url, third.id, 120_000)).status).toBe("completed");
    const reset = (await taskEvents(downDb.sql, third.id)).find((e) => e.type === "session.reset");
    expect(reset?.data).toMatchObject({ reason: "rollback", carriedOver: { turns: 1 } });
    const after = (await call(down.url, "GET", `/v1/sessions/${sessionId}`)).body.agentSessionId;
    expect(after).not.toBe(before);
    const [upTurn] = await upDb.sql<{ prompt: string }[]>`
      select prompt from tasks where session_id = ${after} order by turn_index limit 1`;
    expect(upTurn.prompt).toContain("--- turn 1, user ---\none\n");
    expect(upTurn.prompt).not.toContain("two");
    expect(upTurn.prompt.endsWith(`${RECAP_TAIL}\n\nthree`)).toBe(true);
  }, 240_000);

  it("fails UPSTREAM_FAILED naming interrupted/GATEWAY_RESTART when the upstream is killed mid-turn, every event relayed once", async () => {
    const first = await upstream();
    const down = await downstream();
    const sessionId = await createSession(down.url, workspace, { agent: "up" });
    const feed = new SseReader(down.url, sessionId);
    try {
      const task = await submitPrompt(down.url, sessionId, "[deltas 3][sleep 120000]");
      await feed.next("message.delta", task.id, 90_000);
      const up = await upstreamTaskOf(sessionId);
      // Wait until all three deltas were relayed, then kill the upstream.
      await eventually(
        async () =>
          deltaText(await taskEvents(downDb.sql, task.id)) === deltaText(await taskEvents(upDb.sql, up.id)) &&
          deltaText(await taskEvents(upDb.sql, up.id)).length > 0,
        60_000,
      );
      first.kill("SIGKILL");
      await first.exited;
      const second = await startUpstream();
      proxy.setTarget(second.url);

      const done = await waitTerminal(down.url, task.id, 180_000);
      expect(done.status).toBe("failed");
      expect(done.error).toMatchObject({ code: "UPSTREAM_FAILED", reason: "interrupted/GATEWAY_RESTART" });
      expect(done.error.message).toContain("interrupted");
      const downEvents = await taskEvents(downDb.sql, task.id);
      const upEvents = await taskEvents(upDb.sql, up.id);
      expect(deltaText(downEvents)).toBe(deltaText(upEvents));
      expect(agentEvents(downEvents).filter((e) => e.type !== "message.delta")).toEqual(
        agentEvents(upEvents).filter((e) => e.type !== "message.delta"),
      );
    } finally {
      feed.close();
    }
  }, 300_000);

  it("completes across a link cut for a few seconds mid-turn, with no gap or duplicate", async () => {
    await upstream();
    const down = await downstream();
    const sessionId = await createSession(down.url, workspace, { agent: "up" });
    const feed = new SseReader(down.url, sessionId);
    try {
      const task = await submitPrompt(
        down.url,
        sessionId,
        "[deltas 3][sleep 4000][deltas 3][sleep 500][deltas 2]",
      );
      await feed.next("message.delta", task.id, 90_000);
      const up = await upstreamTaskOf(sessionId);
      const acceptedBefore = proxy.accepted;
      proxy.refuse = true;
      proxy.cutAll();
      // The outage lasts until the downstream tried to come back (and was refused) and the
      // upstream's turn moved on without it: text the downstream has yet to catch up on.
      await eventually(async () => {
        if (proxy.accepted === acceptedBefore) return false;
        const [downText, upText] = await Promise.all([
          taskEvents(downDb.sql, task.id).then(deltaText),
          taskEvents(upDb.sql, up.id).then(deltaText),
        ]);
        return upText.length > downText.length;
      }, 60_000);
      proxy.refuse = false;
      const done = await waitTerminal(down.url, task.id, 180_000);
      expect(done.status, JSON.stringify(done.error)).toBe("completed");
      const downEvents = await taskEvents(downDb.sql, task.id);
      const upEvents = await taskEvents(upDb.sql, up.id);
      expect(deltaText(downEvents)).toBe(deltaText(upEvents));
      expect(agentEvents(downEvents).filter((e) => e.type !== "message.delta")).toEqual(
        agentEvents(upEvents).filter((e) => e.type !== "message.delta"),
      );
      await feed.next("task.completed", task.id, 30_000);
      const seqs = feed.items.filter((e) => e.taskId === task.id).map((e) => e.seq);
      expect(seqs).toEqual(downEvents.map((e) => e.seq));
    } finally {
      feed.close();
    }
  }, 300_000);

  it("fails UPSTREAM_LOST once the upstream stayed unreachable for MOORING_UPSTREAM_SILENT_MS", async () => {
    const up = await upstream();
    // The downstream runs in this process on a clock the test steps: the silence is a minute, and
    // the test moves the clock past it instead of waiting it out. The upstream stays a real
    // process, killed for real; only the downstream's own waits are stepped.
    const clock = new TestClock();
    const down = await startTestGateway(
      downDb.url,
      { ...downstreamEnv(TOKEN, true), MOORING_UPSTREAM_SILENT_MS: "60000" },
      { clock },
    );
    const sessionId = await createSession(down.url, workspace, { agent: "up" });
    const feed = new SseReader(down.url, sessionId);
    try {
      const task = await submitPrompt(down.url, sessionId, "[deltas 2][sleep 120000]");
      await feed.next("message.delta", task.id, 90_000);
      up.kill("SIGKILL");
      // The downstream notices and keeps trying: new connections reach the proxy (and find nothing).
      const before = proxy.accepted;
      await eventually(async () => proxy.accepted >= before + 2, 60_000);
      // Not before the silence allowed it.
      const [stillRunning] = await downDb.sql`select status from tasks where id = ${task.id}`;
      expect(stillRunning.status).toBe("running");
      await clock.advance(60_000);
      const failed = await feed.next("task.failed", task.id, 30_000);
      expect(failed.data.error).toMatchObject({ code: "UPSTREAM_LOST" });
    } finally {
      feed.close();
      await down.stop();
    }
  }, 240_000);

  it("fails UPSTREAM_AUTH on a wrong token after exactly one upstream request", async () => {
    await upstream();
    // Earlier tests' turns may have left upstream tasks to let go of; this test counts every request.
    await downDb.sql`update tasks set upstream = upstream || '{"released": "earlier test"}'::jsonb where upstream is not null`;
    const down = await downstream({}, "not-the-token");
    const sessionId = await createSession(down.url, workspace, { agent: "up" });
    proxy.requests.length = 0;
    const task = await submitPrompt(down.url, sessionId, "hello");
    const done = await waitTerminal(down.url, task.id, 120_000);
    expect(done.status).toBe("failed");
    expect(done.error).toMatchObject({ code: "UPSTREAM_AUTH" });
    expect(proxy.requests).toEqual(["POST /v1/sessions"]);
    expect(down.output()).not.toContain("not-the-token");
  }, 180_000);

  it("shows the upstream queue downstream: task.position events with upstream, then completion", async () => {
    const upGw = await upstream({ MOORING_MAX_ACTIVE: "1", MOORING_MAX_QUEUED: "5" });
    const down = await downstream();
    // Someone else holds the upstream's only active slot.
    const other = await createSession(upGw.url, workspace, {}, auth);
    const blocker = await submitPrompt(upGw.url, other, "[hang]", auth);
    await waitTask(upGw.url, blocker.id, (t) => t.status === "running", 60_000, auth);

    const sessionId = await createSession(down.url, workspace, { agent: "up" });
    const feed = new SseReader(down.url, sessionId);
    try {
      const task = await submitPrompt(down.url, sessionId, "[deltas 2]");
      const position = await feed.next("task.position", task.id, 90_000);
      expect(position.data.upstream).toMatchObject({ position: 1, queueDeadlineAt: expect.any(String) });
      // The row is written beside the event, so the view may follow it by a moment.
      const view = await waitTask(down.url, task.id, (v) => v.upstream?.position === 1, 30_000);
      expect(view.status).toBe("running");
      expect(view.upstream).toEqual(position.data.upstream);

      await call(upGw.url, "POST", `/v1/tasks/${blocker.id}/cancel`, undefined, auth);
      const done = await waitTerminal(down.url, task.id, 120_000);
      expect(done.status, JSON.stringify(done.error)).toBe("completed");
      expect(done.upstream).toBeNull();
    } finally {
      feed.close();
    }
  }, 240_000);

  it("retries a 429 of a full upstream gate after its Retry-After, showing the wait, then completes", async () => {
    const upGw = await upstream({ MOORING_MAX_ACTIVE: "1", MOORING_MAX_QUEUED: "0" });
    const down = await downstream();
    const other = await createSession(upGw.url, workspace, {}, auth);
    const blocker = await submitPrompt(upGw.url, other, "[hang]", auth);
    await waitTask(upGw.url, blocker.id, (t) => t.status === "running", 60_000, auth);

    const sessionId = await createSession(down.url, workspace, { agent: "up" });
    const feed = new SseReader(down.url, sessionId);
    try {
      const task = await submitPrompt(down.url, sessionId, "[deltas 2]");
      const refused = await feed.next("task.position", task.id, 90_000);
      expect(refused.data.upstream).toMatchObject({ position: null, retryAt: expect.any(String) });
      const view = await waitTask(down.url, task.id, (v) => v.upstream?.retryAt, 30_000);
      expect(view.status).toBe("running");
      expect(view.upstream).toMatchObject({
        position: null,
        queueDeadlineAt: null,
        retryAt: expect.any(String),
      });
      await call(upGw.url, "POST", `/v1/tasks/${blocker.id}/cancel`, undefined, auth);
      const done = await waitTerminal(down.url, task.id, 120_000);
      expect(done.status, JSON.stringify(done.error)).toBe("completed");
    } finally {
      feed.close();
    }
  }, 240_000);

  it("cancels the upstream task when the downstream task is cancelled", async () => {
    await upstream();
    const down = await downstream();
    const sessionId = await createSession(down.url, workspace, { agent: "up" });
    const feed = new SseReader(down.url, sessionId);
    try {
      const task = await submitPrompt(down.url, sessionId, "[deltas 2][hang]");
      await feed.next("message.delta", task.id, 90_000);
      const up = await upstreamTaskOf(sessionId);
      await call(down.url, "POST", `/v1/tasks/${task.id}/cancel`);
      expect((await waitTerminal(down.url, task.id, 120_000)).status).toBe("cancelled");
      expect((await waitTask(proxy.url, up.id, undefined, 120_000, auth)).status).toBe("cancelled");
    } finally {
      feed.close();
    }
  }, 240_000);

  it("cancels the upstream task of a turn its downstream gateway died in, after the downstream restarts", async () => {
    await upstream();
    const down = await downstream();
    const sessionId = await createSession(down.url, workspace, { agent: "up" });
    const feed = new SseReader(down.url, sessionId);
    const task = await submitPrompt(down.url, sessionId, "[deltas 2][hang]");
    await feed.next("message.delta", task.id, 90_000);
    feed.close();
    const up = await upstreamTaskOf(sessionId);
    await eventually(async () => {
      const [row] = await downDb.sql<{ upstream: any }[]>`select upstream from tasks where id = ${task.id}`;
      return row?.upstream?.taskId === up.id;
    }, 60_000);
    down.kill("SIGKILL");
    await down.exited;
    // The upstream turn runs on for nobody until the downstream is back.
    expect((await call(proxy.url, "GET", `/v1/tasks/${up.id}`, undefined, auth)).body.status).toBe("running");

    const again = await downstream();
    expect((await waitTerminal(again.url, task.id, 120_000)).status).toBe("interrupted");
    expect((await waitTask(proxy.url, up.id, undefined, 120_000, auth)).status).toBe("cancelled");
    await eventually(async () => {
      const [row] = await downDb.sql<{ upstream: any }[]>`select upstream from tasks where id = ${task.id}`;
      return typeof row?.upstream?.released === "string";
    }, 60_000);
    expect(
      logLines(again).some((l) => l.msg === "orphaned upstream turn cancelled" && l.upstreamTaskId === up.id),
    ).toBe(true);
  }, 240_000);
});
