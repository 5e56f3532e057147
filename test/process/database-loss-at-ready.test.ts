/**
 * The database goes away right after a gateway became ready, while its first claims,
 * heartbeats, sweeps and the connections its pools are still opening are in flight. Once, on a
 * loaded machine, that ended the process: `claim failed; the poll will retry`, then a fatal
 * `connect ECONNREFUSED` (an uncaught error). The gateway must survive it: 503 NOT_READY while the
 * database is away, ready again by itself once it is back, no fatal line in its log.
 *
 * "The database" of each gateway is its own proxy in front of the test Postgres
 * (test/support/db-proxy.ts), which stops as Postgres does (57P01 to open connections, 57P03 to
 * new ones, then ECONNREFUSED) without stopping the Postgres other test files share. Several
 * gateways start at once, and each loses its database at a different moment after its "ready" line
 * (0 to ~90 ms), while claims run against a queue none of them can take from (the gate is full).
 * MOORING_DBLOSS_GATEWAYS sets how many (default 3).
 */
import postgres from "postgres";
import { expect, it } from "vitest";
import { GATE_LOCK_KEY } from "../../src/sql/gate-lock.js";
import type { TestDatabase } from "../support/db.js";
import { DatabaseProxy } from "../support/db-proxy.js";
import { call, eventually, type GatewayProcess } from "../support/gateway.js";
import { alive, gatewayEnv, logLines, Processes, useProcessSuite } from "../support/lifecycle.js";
import { createSessions, submitPrompt, waitTerminal } from "../support/turns.js";

const GATEWAYS = Number(process.env.MOORING_DBLOSS_GATEWAYS ?? 3);

const procs = new Processes();
let db: TestDatabase;
let workspace: string;
useProcessSuite("ws-dbloss-ready-", procs, (d, w) => {
  db = d;
  workspace = w;
});

/** Resolves as soon as the process logged its "ready" line (sooner than polling /readyz). */
function readyLine(gw: GatewayProcess): Promise<void> {
  return new Promise((resolve, reject) => {
    const check = () => {
      if (logLines(gw).some((l) => l.msg === "ready")) return resolve();
      if (!alive(gw)) return reject(new Error(`gateway exited before ready:\n${gw.output().slice(-3000)}`));
      setTimeout(check, 2);
    };
    check();
  });
}

/** Log lines that mean the process was about to die: fatal level, or uncaught errors. */
function fatalLines(gw: GatewayProcess): string[] {
  return logLines(gw)
    .filter((l) => l.level >= 60 || /uncaught exception|unhandled/i.test(String(l.msg)))
    .map((l) => JSON.stringify(l).slice(0, 2000));
}

function stillAlive(gw: GatewayProcess, name: string): void {
  if (!alive(gw)) throw new Error(`${name} died:\n${fatalLines(gw).join("\n")}\n${gw.output().slice(-2000)}`);
}

/** One gateway behind its own proxy: started, cut `delayMs` after ready, brought back. */
async function loseDatabaseAfterReady(index: number, delayMs: number): Promise<string> {
  const name = `dbloss-ready-${index}`;
  const proxy = await DatabaseProxy.start(db.url);
  try {
    const gw = await procs.spawn(
      gatewayEnv(proxy.url, {
        MOORING_INSTANCE_ID: name,
        // Busy loops, so a claim (its pipelined transaction: the queue is not empty), a heartbeat
        // and a sweep are in flight at almost any moment.
        MOORING_POLL_MS: "20",
        MOORING_HEARTBEAT_MS: "40",
        MOORING_SWEEP_MS: "40",
        MOORING_LEASE_MS: "3000",
        MOORING_MAX_ACTIVE: "1",
      }),
    );
    await readyLine(gw);
    if (delayMs > 0) await new Promise((resolve) => setTimeout(resolve, delayMs));
    proxy.shutDown();
    // Shutting down: the pools' reconnects are told so (57P03) a few times.
    await eventually(async () => {
      stillAlive(gw, name);
      return proxy.refusedWhileShuttingDown >= 3;
    }, 30_000);
    await proxy.refuse();
    // Gone: every readiness probe is a connection refused (ECONNREFUSED), as are the loops' reconnects.
    let refusedProbes = 0;
    await eventually(async () => {
      stillAlive(gw, name);
      if ((await call(gw.url, "GET", "/readyz")).status === 503) refusedProbes++;
      return refusedProbes >= 5;
    }, 30_000);
    await proxy.up();
    await eventually(async () => {
      stillAlive(gw, name);
      return (await call(gw.url, "GET", "/readyz")).status === 200;
    }, 30_000);
    stillAlive(gw, name);
    expect(fatalLines(gw), name).toEqual([]);
    const survived = logLines(gw).filter((l) => /escaped uncaught|upstream bug/.test(String(l.msg))).length;
    gw.kill("SIGKILL");
    await gw.exited;
    return `${name}: cut ${delayMs} ms after ready, ${survived} uncaught connection errors survived`;
  } finally {
    await proxy.close();
  }
}

it(`the database lost right after ready (${GATEWAYS} gateways, each at another moment): every gateway stays up and gets ready again`, async () => {
  // A queue none of the gateways can take from: one instance straight on the database runs a turn
  // that never ends (MOORING_MAX_ACTIVE 1: the gate is full) and admits five more behind it.
  const admitter = await procs.spawn(
    // A lease far longer than the test: on a loaded machine a 1.5 s lease could lapse between two
    // heartbeats, and the other gateways' sweeps would then interrupt the hanging turn and free
    // the gate (the queue shrank to 3 in one full run).
    gatewayEnv(db.url, {
      MOORING_INSTANCE_ID: "dbloss-ready-admitter",
      MOORING_MAX_ACTIVE: "1",
      MOORING_LEASE_MS: "600000",
      MOORING_HEARTBEAT_MS: "1000",
    }),
  );
  await admitter.waitReady();
  const sessions = await createSessions(admitter.url, workspace, 6);
  expect((await submitPrompt(admitter.url, sessions[0], "[hang]")).status).toBe("running");
  for (const id of sessions.slice(1)) {
    expect((await submitPrompt(admitter.url, id, "[deltas 1]")).status).toBe("queued");
  }

  const outcomes = await Promise.all(
    Array.from({ length: GATEWAYS }, (_, i) => loseDatabaseAfterReady(i, (i * 23) % 90)),
  );
  console.log(outcomes.join("\n"));
  // The queue was there all along, untouched: nobody could claim, nobody lost it.
  const gate = await call(admitter.url, "GET", "/v1/gate");
  expect(gate.body).toMatchObject({ active: 1, queued: 5 });
}, 600_000);

it("a connection lost inside a submit with ifBusy=reject and an idempotency key answers NOT_READY and does not end the process", async () => {
  // The reject/interrupt path sends its idempotency lookup together with the gate and session
  // locks and awaits the locks first: when the connection dies while they wait, the lookup failed
  // too, unhandled, and the process ended with a fatal uncaught error.
  const gw = await procs.spawn(gatewayEnv(db.url, { MOORING_INSTANCE_ID: "dbloss-lookup" }));
  await gw.waitReady();
  const [session] = await createSessions(gw.url, workspace, 1);
  const admin = postgres(db.url, { max: 2, onnotice: () => {} });
  try {
    for (let round = 0; round < 3; round++) {
      const holder = await admin.reserve();
      await holder`select pg_advisory_lock(${GATE_LOCK_KEY})`;
      const answer = call(gw.url, "POST", `/v1/sessions/${session}/turns`, {
        prompt: "[deltas 1]",
        ifBusy: "reject",
        idempotencyKey: `lost-${round}`,
      });
      await eventually(async () => {
        const rows = await admin`select pid from pg_stat_activity
          where application_name = 'mooring:dbloss-lookup' and wait_event_type = 'Lock'`;
        return rows.length > 0;
      });
      await admin`select pg_terminate_backend(pid) from pg_stat_activity
        where application_name = 'mooring:dbloss-lookup' and wait_event_type = 'Lock'`;
      await holder`select pg_advisory_unlock(${GATE_LOCK_KEY})`;
      holder.release();
      const res = await answer;
      expect([202, 503], JSON.stringify(res.body)).toContain(res.status);
      if (res.status === 503) expect(res.body.error.code).toBe("NOT_READY");
      // Still up, and the same submit goes through (or answers the task it made).
      const again = await eventually(async () => {
        stillAlive(gw, "dbloss-lookup");
        const r = await call(gw.url, "POST", `/v1/sessions/${session}/turns`, {
          prompt: "[deltas 1]",
          ifBusy: "reject",
          idempotencyKey: `lost-${round}`,
        });
        return r.status === 202 || r.status === 200 ? r : null;
      });
      await waitTerminal(gw.url, again.body.id);
    }
    stillAlive(gw, "dbloss-lookup");
    expect(fatalLines(gw)).toEqual([]);
  } finally {
    await admin.end({ timeout: 1 });
  }
}, 120_000);
