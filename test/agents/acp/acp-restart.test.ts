/**
 * `/acp` through a gateway killed with kill -9 mid-turn (docs/acp-server.md): the ACP client's
 * connection dies with the process; it opens a new connection to the restarted gateway and
 * `session/load`s with `_meta.mooring.afterSeq` = the last seq it saw. Together the two
 * connections saw every event of the turn exactly once, ending with its `task.interrupted`.
 */
import { expect, it } from "vitest";
import { AcpTestClient, seqOf } from "../../support/acp-client.js";
import type { TestDatabase } from "../../support/db.js";
import { exitedWithOutput, gatewayEnv, Processes, useProcessSuite } from "../../support/lifecycle.js";
import { TcpProxy } from "../../support/tcp-proxy.js";

const procs = new Processes();
let db: TestDatabase;
let workspace: string;
useProcessSuite("mooring-acp-restart-", procs, (d, w) => {
  db = d;
  workspace = w;
});

it.each(["http", "ws"] as const)("over %s: kill -9 mid-turn, a new connection loads with afterSeq: no gap, no repeat", async (kind) => {
  const env = gatewayEnv(db.url, { MOORING_INSTANCE_ID: `acp-restart-${kind}` });
  const first = await procs.spawn(env);
  await first.waitReady();
  const proxy = await TcpProxy.start(first.url);
  const clients: AcpTestClient[] = [];
  const open = async () => {
    const c = kind === "http" ? AcpTestClient.http(proxy.url) : AcpTestClient.ws(proxy.url);
    clients.push(c);
    await c.initialize();
    return c;
  };
  try {
    const before = await open();
    const { sessionId } = await before.agent.request("session/new", {
      cwd: workspace,
      mcpServers: [],
      _meta: { mooring: { agent: "simulated" } },
    });
    void before.agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text: "[deltas 5] [hang]" }] }).catch(() => {});
    await before.updates.waitFor((n) => n.sessionId === sessionId && n.update.sessionUpdate === "agent_message_chunk");
    first.kill("SIGKILL");
    expect(await exitedWithOutput(first)).toBe("SIGKILL");
    const seen = before.of(sessionId).map(seqOf) as number[];
    before.close();

    const second = await procs.spawn(env);
    proxy.setTarget(second.url);
    await second.waitReady();
    const after = await open();
    await after.agent.request("session/load", {
      sessionId,
      cwd: workspace,
      mcpServers: [],
      _meta: { mooring: { afterSeq: Math.max(...seen) } },
    });
    const end = await after.updates.waitFor(
      (n) => n.sessionId === sessionId && (n.update._meta as any)?.mooring?.type === "task.interrupted",
      30_000,
      "task.interrupted",
    );
    const taskId = (end.update._meta as any).mooring.taskId;
    const log = await db.sql<{ seq: number }[]>`select seq from events where session_id = ${sessionId} order by seq`;
    const relayed = [...seen, ...(after.of(sessionId).map(seqOf) as number[])];
    expect(relayed).toEqual(log.map((e) => e.seq));
    const task = await after.agent.request<any>("_mooring/tasks/get", { taskId });
    expect(task.error.code).toBe("GATEWAY_RESTART");
  } finally {
    for (const c of clients) c.close();
    await proxy.close();
  }
});
