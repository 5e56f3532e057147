/**
 * What any client could do through the built-in `simulated` agent:
 * - `"a"*199 + "😀"`: the answer `You said: ${prompt.slice(0, 200)}` cut the emoji's surrogate pair
 *   and the lone half froze the event lane;
 * - `[deltas 100000000]` emitted 100 M events in a synchronous loop (out of heap, /healthz dead),
 *   `[tool 100000000]` × 40 took 4.2 GB, `[deltas 300000]` held its lane for minutes, starved the
 *   heartbeat and made the instance take over its own turn.
 * The directives are capped now and emitted asynchronously; an operator can remove the agent.
 * Real gateway processes with short leases (1.5 s), so a starved heartbeat would show.
 */
import { expect, it } from "vitest";
import type { TestDatabase } from "../support/db.js";
import { call, startTestGateway } from "../support/gateway.js";
import { gatewayEnv, logsWith, Processes, useProcessSuite } from "../support/lifecycle.js";
import { createSessions, submitPrompt, waitTerminal } from "../support/turns.js";

let db: TestDatabase;
let workspace: string;
const procs = new Processes();
useProcessSuite("ws-simulated-bounds-", procs, (d, w) => {
  db = d;
  workspace = w;
});

it("a prompt cut inside an emoji by the echo completes", async () => {
  const gw = await procs.spawn(gatewayEnv(db.url));
  await gw.waitReady();
  const [sessionId] = await createSessions(gw.url, workspace, 1);
  const task = await submitPrompt(gw.url, sessionId, `${"a".repeat(199)}😀`);
  const done = await waitTerminal(gw.url, task.id, 20_000);
  expect(done.status).toBe("completed");
  expect(done.result.text).toBe(`You said: ${"a".repeat(199)}`);
}, 60_000);

it("floods are capped and emitted without holding the process: /healthz answers, other turns run, no turn is interrupted", async () => {
  // One lane: the floods share the writer with the other sessions' turns.
  const gw = await procs.spawn(
    gatewayEnv(db.url, { MOORING_EVENT_FLUSH_LANES: "1", MOORING_MAX_ACTIVE: "10" }),
  );
  await gw.waitReady();
  const [deltas, tools, long, ...others] = await createSessions(gw.url, workspace, 6);

  let flooding = true;
  let slowest = 0;
  let probes = 0;
  const prober = (async () => {
    while (flooding) {
      const started = performance.now();
      const res = await fetch(`${gw.url}/healthz`);
      expect(res.status).toBe(200);
      slowest = Math.max(slowest, performance.now() - started);
      probes++;
      await new Promise((resolve) => setTimeout(resolve, 20)); // probe pacing, not a wait for an event
    }
  })();

  const floods = [
    await submitPrompt(gw.url, deltas, "[deltas 100000000]"),
    await submitPrompt(gw.url, tools, "[tool 100000000] ".repeat(40)),
    await submitPrompt(gw.url, long, "[deltas 300000] [tool 2000000]"),
  ];
  const small = [];
  for (const id of others) small.push(await submitPrompt(gw.url, id, "[sleep 100] [deltas 3]"));
  const smallDone = await Promise.all(small.map((t) => waitTerminal(gw.url, t.id, 30_000)));
  const floodDone = await Promise.all(floods.map((t) => waitTerminal(gw.url, t.id, 60_000)));
  flooding = false;
  await prober;

  for (const t of [...smallDone, ...floodDone]) expect(t.status).toBe("completed");
  // The floods did not hold the lane the small turns share: each small turn (submitted after the
  // floods) ended while a flood was still being written, an order of the gateway's own records.
  const lastFloodEnd = Math.max(...floodDone.map((t) => Date.parse(t.finishedAt)));
  const smallMs = smallDone.map((t) => Date.parse(t.finishedAt) - Date.parse(t.createdAt));
  console.log(`small turns during the floods took ${smallMs.join(", ")} ms`);
  for (const t of smallDone) expect(Date.parse(t.finishedAt)).toBeLessThan(lastFloodEnd);
  // Each delta directive stops at 10,000.
  expect(floodDone[0].result.text).toContain("chunk 10000 ");
  expect(floodDone[0].result.text).not.toContain("chunk 10001 ");
  expect(floodDone[2].result.text).toContain("chunk 10000 ");
  expect(floodDone[2].result.text).not.toContain("chunk 10001 ");
  // 1 MiB per tool directive, 16 MiB of tool output per turn: sixteen of the forty calls.
  const results = await db.sql<{ data: any }[]>`
    select data from events where task_id = ${floods[1].id} and type = 'tool.result' order by seq`;
  expect(results.map((r) => r.data.bytes)).toEqual(Array(16).fill(1024 * 1024));
  const longResult = await db.sql<{ data: any }[]>`
    select data from events where task_id = ${floods[2].id} and type = 'tool.result'`;
  expect(longResult.map((r) => r.data.bytes)).toEqual([1024 * 1024]);

  console.log(`/healthz: ${probes} probes during the floods, slowest ${slowest.toFixed(0)} ms`);
  expect(probes).toBeGreaterThan(10);
  expect(slowest).toBeLessThan(2000);
  const [{ interrupted }] = await db.sql`
    select count(*)::int as interrupted from tasks where status = 'interrupted'`;
  expect(interrupted).toBe(0);
  expect(logsWith(gw, "lease takeover")).toEqual([]);
  expect(logsWith(gw, "lost guard")).toEqual([]);
}, 120_000);

it('"simulated": null in MOORING_AGENTS removes the built-in agent', async () => {
  const gw = await startTestGateway(db.url, {
    MOORING_AGENTS: '{"simulated": null, "sim2": {"driver": "simulated"}}',
  });
  try {
    const refused = await call(gw.url, "POST", "/v1/sessions", { workspace, agent: "simulated" });
    expect(refused.status).toBe(400);
    expect(refused.body.error).toMatchObject({ code: "INVALID_REQUEST", field: "agent" });
    expect(refused.body.error.message).toContain("sim2");
    const other = await call(gw.url, "POST", "/v1/sessions", { workspace, agent: "sim2" });
    expect(other.status).toBe(201);
  } finally {
    await gw.stop();
  }
});
