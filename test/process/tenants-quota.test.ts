/**
 * Tenants' quotas and fairness (docs/tenants.md, Quotas and fairness): per-tenant maxActive and
 * maxQueued hold exactly across two instances on one database (sampled from the database), a
 * tenant over its queue limit gets TENANT_BUSY while another is still admitted, a slot that frees
 * goes to the tenant with the fewest running turns, and the claim's order itself, in SQL on a real
 * database (several tenants, running counts, caps, the session rules).
 */
import { randomUUID } from "node:crypto";
import { beforeAll, describe, expect, it } from "vitest";
import { connect } from "../../src/db/client.js";
import { taskClaim } from "../../src/sql/task-claim.js";
import { gateListQueuePositions, gateQueuePositions } from "../../src/sql/gate-status.js";
import type { TestDatabase } from "../support/db.js";
import { call, eventually, type GatewayProcess } from "../support/gateway.js";
import { createSession, submit, submitPrompt, tempWorkspace } from "../support/turns.js";
import { useGateway, useProcessGateway, useSqlDatabase } from "../support/use-gateway.js";

const TENANTS = JSON.stringify({
  a: { tokens: ["token-a"], maxActive: 2, maxQueued: 4 },
  b: { tokens: ["token-b"] },
  ops: { tokens: ["token-ops"], admin: true },
});
const auth = (tenant: string) => ({ authorization: `Bearer token-${tenant}` });

describe("quotas across two instances", () => {
  const suite = useProcessGateway({
    env: { LOG_LEVEL: "info", MOORING_POLL_MS: "100", MOORING_TENANTS: TENANTS },
  });
  let one: GatewayProcess;
  let two: GatewayProcess;

  beforeAll(async () => {
    [one, two] = await Promise.all([
      suite.spawn({ MOORING_INSTANCE_ID: "quota-1" }),
      suite.spawn({ MOORING_INSTANCE_ID: "quota-2" }),
    ]);
    await Promise.all([one.waitReady(), two.waitReady()]);
  });

  it("holds tenant a to 2 running and 4 queued anywhere, refuses it TENANT_BUSY while b is admitted", async () => {
    const workspace = await tempWorkspace();
    const base = (i: number) => (i % 2 ? one.url : two.url);
    const aSessions = await Promise.all(
      Array.from({ length: 30 }, (_, i) => createSession(base(i), workspace, {}, auth("a"))),
    );
    const bSessions = await Promise.all(
      Array.from({ length: 6 }, (_, i) => createSession(base(i), workspace, {}, auth("b"))),
    );

    let sampling = true;
    let samples = 0;
    let maxA = 0;
    let maxAQueued = 0;
    let maxAll = 0;
    const sampler = (async () => {
      while (sampling) {
        const [row] = await suite.sql<{ a: number; aQueued: number; all: number }[]>`
          select count(*) filter (where tenant = 'a' and status in ('running', 'cancelling'))::int as a,
                 count(*) filter (where tenant = 'a' and status = 'queued')::int as a_queued,
                 count(*) filter (where status in ('running', 'cancelling'))::int as all
          from tasks`;
        maxA = Math.max(maxA, row.a);
        maxAQueued = Math.max(maxAQueued, row.aQueued);
        maxAll = Math.max(maxAll, row.all);
        samples++;
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
    })();

    // Phase 1: 10 turns of a that hang, half through each instance: exactly 2 run and 4 wait;
    // the other 4 are refused with TENANT_BUSY, the gateway as a whole being far from full.
    const burst = await Promise.all(
      aSessions.slice(0, 10).map((id, i) => submit(base(i), id, { prompt: `[hang] a ${i}` }, auth("a"))),
    );
    const accepted = burst.filter((r) => r.status === 202);
    expect(accepted).toHaveLength(6);
    expect(accepted.filter((r) => r.body.status === "running")).toHaveLength(2);
    for (const r of burst.filter((r) => r.status !== 202)) {
      expect(r.status).toBe(429);
      expect(r.body.error).toMatchObject({ code: "TENANT_BUSY", reason: "tenant_queue_full" });
      expect(Number(r.headers.get("retry-after"))).toBeGreaterThan(0);
    }
    // The same refusal over JSON-RPC: -32002 with the code, the reason and when to retry.
    const rpc = await call(
      one.url,
      "POST",
      "/v1/rpc",
      { jsonrpc: "2.0", id: 1, method: "turns.submit", params: { sessionId: aSessions[10], prompt: "x" } },
      auth("a"),
    );
    expect(rpc.body.error).toMatchObject({
      code: -32002,
      data: { code: "TENANT_BUSY", reason: "tenant_queue_full", retryAfterSeconds: 5 },
    });
    // a is told its own limit; an admin submitting into a's session hits a's limit, not its own,
    // and is told no number.
    expect(burst.find((r) => r.status === 429)!.body.error.message).toContain("4 turns queued");
    const byAdmin = await call(
      one.url,
      "POST",
      `/v1/sessions/${aSessions[11]}/turns`,
      { prompt: "x" },
      auth("ops"),
    );
    expect(byAdmin.body.error).toMatchObject({ code: "TENANT_BUSY" });
    expect(byAdmin.body.error.message).not.toMatch(/[0-9]/);
    // b is still admitted, and runs at once in the 3 slots a cannot use.
    const bTurns = await Promise.all(
      bSessions.slice(0, 3).map((id, i) => submit(base(i), id, { prompt: `[hang] b ${i}` }, auth("b"))),
    );
    for (const r of bTurns) expect(r.body.status, JSON.stringify(r.body)).toBe("running");

    // Each tenant sees its own figures beside the global ones; an admin sees every tenant.
    const gateA = await call(one.url, "GET", "/v1/gate", undefined, auth("a"));
    expect(gateA.body).toMatchObject({ active: 5, queued: 4, maxActive: 5, maxQueued: 20 });
    expect(gateA.body.tenant).toEqual({ name: "a", active: 2, queued: 4, maxActive: 2, maxQueued: 4 });
    expect(gateA.body.tenants).toBeUndefined();
    const gateB = await call(
      two.url,
      "POST",
      "/v1/rpc",
      { jsonrpc: "2.0", id: 1, method: "gate.status" },
      auth("b"),
    );
    expect(gateB.body.result.tenant).toEqual({
      name: "b",
      active: 3,
      queued: 0,
      maxActive: 5,
      maxQueued: 20,
    });
    const gateOps = await call(two.url, "GET", "/v1/gate", undefined, auth("ops"));
    expect(gateOps.body.tenants.map((t: { name: string }) => t.name)).toEqual(["a", "b", "ops"]);

    // Phase 2: everything hanging is cancelled, then short turns of both tenants go in through
    // both instances while earlier ones finish; a retries when refused.
    await cancelAll(one.url, suite.db);
    const done: Promise<string>[] = [];
    const run = async (tenant: string, sessionId: string, i: number): Promise<string> => {
      for (;;) {
        const r = await submit(
          base(i),
          sessionId,
          { prompt: `[sleep ${60 + (i % 4) * 40}] ${tenant} ${i}` },
          auth(tenant),
        );
        if (r.status === 202) return r.body.id;
        expect(r.body.error.code).toBe(tenant === "a" ? "TENANT_BUSY" : "GATEWAY_BUSY");
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    };
    for (let i = 10; i < 30; i++) done.push(run("a", aSessions[i], i));
    for (let i = 3; i < 6; i++) done.push(run("b", bSessions[i], i));
    const ids = await Promise.all(done);
    await eventually(async () => {
      const [row] = await suite.sql<{ open: number }[]>`
        select count(*)::int as open from tasks where id = any(${ids}::uuid[]) and status not in ('completed')`;
      return row.open === 0;
    }, 60_000);
    sampling = false;
    await sampler;

    expect(samples).toBeGreaterThan(50);
    expect(maxA).toBe(2);
    expect(maxAQueued).toBe(4);
    expect(maxAll).toBeLessThanOrEqual(5);
    const owners = await suite.sql<{ ownerInstance: string }[]>`
      select distinct owner_instance from tasks where tenant = 'a' and status = 'completed'`;
    expect(owners.map((o) => o.ownerInstance).sort()).toEqual(["quota-1", "quota-2"]);
    for (const p of [one, two]) expect(p.output().match(/.*"level":(40|50|60).*/g) ?? []).toEqual([]);
  }, 120_000);
});

describe("fairness", () => {
  const suite = useGateway({
    env: {
      MOORING_POLL_MS: "100",
      MOORING_MAX_ACTIVE: "2",
      MOORING_TENANTS: JSON.stringify({ a: { tokens: ["token-a"] }, b: { tokens: ["token-b"] } }),
    },
  });

  it("gives the next freed slot to b's single turn, ahead of a's full queue", async () => {
    const workspace = await tempWorkspace();
    const aSessions = await Promise.all(
      Array.from({ length: 12 }, () => createSession(suite.url, workspace, {}, auth("a"))),
    );
    const bSession = await createSession(suite.url, workspace, {}, auth("b"));
    const aTurns: string[] = [];
    for (const [i, id] of aSessions.entries()) {
      aTurns.push((await submitPrompt(suite.url, id, `[hang] a ${i}`, auth("a"))).id);
    }
    const b = await submit(suite.url, bSession, { prompt: "[hang] b" }, auth("b"));
    expect(b.body.status).toBe("queued");
    // Under the fair rule b's turn is first in line, and a's queue each moved back by one.
    expect(b.body.position).toBe(1);
    // Its task.queued event said the same (counted in the insert, without ranking the queue).
    const [queuedEvent] = await suite.sql<{ position: number }[]>`
      select (data->>'position')::int as position from events where task_id = ${b.body.id} and type = 'task.queued'`;
    expect(queuedEvent.position).toBe(1);
    const firstOfA = await call(suite.url, "GET", `/v1/tasks/${aTurns[2]}`, undefined, auth("a"));
    expect(firstOfA.body.position).toBe(2);

    // Release a's running turns one by one until b's starts, counting the releases.
    let released = 0;
    for (const id of aTurns) {
      const before = await startedCount(suite.db);
      await call(suite.url, "POST", `/v1/tasks/${id}/cancel`, undefined, auth("a"));
      released++;
      await eventually(async () => (await startedCount(suite.db)) > before);
      const [row] = await suite.sql<{ status: string }[]>`select status from tasks where id = ${b.body.id}`;
      if (row.status === "running") break;
    }
    const fifo = aTurns.length - 2 + 1;
    console.log(
      `fairness: b's one turn behind a's ${aTurns.length - 2} queued started after ${released} slot(s) released (oldest-first would need ${fifo})`,
    );
    expect(released).toBe(1);
    await cancelAll(suite.url, suite.db);
  }, 60_000);
});

async function startedCount(db: TestDatabase): Promise<number> {
  const [row] = await db.sql<
    { n: number }[]
  >`select count(*)::int as n from events where type = 'task.started'`;
  return row.n;
}

async function cancelAll(base: string, db: TestDatabase): Promise<void> {
  const open = await db.sql<{ id: string; tenant: string }[]>`
    select id, tenant from tasks where status in ('queued', 'running')`;
  await Promise.all(
    open.map((t) => call(base, "POST", `/v1/tasks/${t.id}/cancel`, undefined, auth(t.tenant))),
  );
}

describe("the claim's order, in SQL", () => {
  // Migrated and empty; each test seeds its own rows.
  const claimDb = useSqlDatabase({ emptyBeforeEach: false });
  const claimant = { instanceId: "claim-test", bootId: randomUUID(), leaseMs: 60_000 };
  const limits = JSON.stringify({
    a: { active: 3, queued: 20 },
    b: { active: 5, queued: 20 },
    c: { active: 1, queued: 20 },
  });

  /** Tasks in admission order: `tenant:status` (`+` on a second turn of the previous session, `!` jumps the queue). */
  async function seed(specs: string[]): Promise<string[]> {
    await claimDb.sql`delete from events`;
    await claimDb.sql`delete from tasks`;
    await claimDb.sql`delete from sessions`;
    const ids: string[] = [];
    let sessionId = "";
    let turn = 0;
    for (const spec of specs) {
      const [tenant, status] = spec.replace(/[+!]/g, "").split(":");
      if (!spec.includes("+")) {
        const [s] = await claimDb.sql<{ id: string }[]>`
          insert into sessions (tenant, workspace, agent) values (${tenant}, '/tmp', 'simulated') returning id`;
        sessionId = s.id;
        turn = 0;
      }
      const [t] = await claimDb.sql<{ id: string }[]>`
        insert into tasks (session_id, tenant, turn_index, status, prompt, timeout_ms, queue_deadline_at, jumps_queue)
        values (${sessionId}, ${tenant}, ${turn++}, ${status}, 'x', 60000, now() + interval '1 hour', ${spec.includes("!")})
        returning id`;
      ids.push(t.id);
    }
    return ids;
  }

  const claim = (maxActive: number, limit: number) =>
    claimDb.sql.begin(async (tx) =>
      (await taskClaim(tx, claimant, maxActive, limits, limit)).map((c) => c.row.id),
    );

  it("gives each slot to the tenant with the fewest running turns, ties to the oldest turn", async () => {
    // a runs 2, b none, c none (c's limit is 1); queued, oldest first: a a a b c c b.
    const ids = await seed([
      "a:running",
      "a:running",
      "a:queued",
      "a:queued",
      "a:queued",
      "b:queued",
      "c:queued",
      "c:queued",
      "b:queued",
    ]);
    const [, , a1, a2, , b1, c1, , b2] = ids;
    // Levels (the tenant's running count when the turn would be picked): b1 0, c1 0, c2 1, b2 1,
    // a1 2, a2 3, a3 4. The fair order sorts by (level, admission): b1 c1 c2 b2 a1 a2 a3. The claim
    // takes that order but skips c2 (c at its limit of 1) and a2, a3 (a at its limit of 3).
    const [a3, c2] = [ids[4], ids[7]];
    const expected = [b1, c1, c2, b2, a1, a2, a3];
    expect(await gateQueuePositions(claimDb.sql, ids)).toEqual(new Map(expected.map((id, i) => [id, i + 1])));
    expect(await claim(10, 10)).toEqual(sorted([b1, c1, b2, a1], ids));
    // Nothing left that may run: a is at its 3, c at its 1.
    expect(await claim(10, 10)).toEqual([]);
  });

  it("is oldest-first with one tenant, and stops at the global limit", async () => {
    const ids = await seed(["a:queued", "a:queued", "a:queued", "a:queued"]);
    expect(await claim(10, 2)).toEqual(ids.slice(0, 2));
    expect(await claim(10, 10)).toEqual([ids[2]]); // a's limit is 3
    const more = await seed(["b:running", "b:running", "b:queued", "a:queued"]);
    expect(await claim(3, 10)).toEqual([more[3]]); // one global slot: a (0 running) before b (2)
  });

  it("gives a tenant missing from the configuration the global limit", async () => {
    const ids = await seed(["old:running", "old:queued", "old:queued", "old:queued", "c:queued"]);
    // old has 1 running; c 0: c first, then old up to the global 4 slots in all.
    expect(await claim(4, 10)).toEqual(sorted([ids[1], ids[2], ids[4]], ids));
    const [row] = await claimDb.sql<
      { n: number }[]
    >`select count(*)::int as n from tasks where status = 'running'`;
    expect(row.n).toBe(4);
  });

  it("keeps the session rules: one running turn per session, a jumping turn first", async () => {
    // Session 1 (b) runs a turn and has one waiting; session 2 (b) has two waiting, the later jumping.
    const ids = await seed(["b:running", "b:queued+", "b:queued", "b:queued!+", "a:queued"]);
    expect(await claim(10, 10)).toEqual(sorted([ids[3], ids[4]], ids));
  });

  it("skips a row another transaction holds, and the positions match the claim order", async () => {
    const ids = await seed(["a:queued", "a:queued", "b:queued", "a:queued"]);
    const queue = await gateListQueuePositions(claimDb.sql, 100);
    expect(queue.map((q) => q.id)).toEqual([ids[0], ids[2], ids[1], ids[3]]);
    const holder = connect(claimDb.url, { max: 1 });
    try {
      let release!: () => void;
      const held = new Promise<void>((resolve) => {
        release = resolve;
      });
      let locked!: () => void;
      const isLocked = new Promise<void>((resolve) => {
        locked = resolve;
      });
      const holding = holder.sql.begin(async (tx) => {
        await tx`select 1 from tasks where id = ${ids[0]} for update`;
        locked();
        await held;
      });
      await isLocked;
      expect(await claim(10, 1)).toEqual([ids[2]]);
      release();
      await holding;
    } finally {
      await holder.close();
    }
  });
});

/** `subset` in the order of `all` (claims answer in admission order). */
function sorted(subset: string[], all: string[]): string[] {
  return [...subset].sort((x, y) => all.indexOf(x) - all.indexOf(y));
}
