/**
 * The sweeper runs several timed loops at different paces (lease sweep, queue poll, pruning).
 * `stop()` must end every one of them: it once kept only the last few timers, so the pending
 * timer of a slower loop (here the lease sweep, outpaced by a 10 ms queue poll) survived `stop()`,
 * and a run in flight at `stop()` scheduled its next run anyway. Both ran on after shutdown.
 */
import { pino } from "pino";
import { expect, it } from "vitest";
import { loadConfig } from "../../src/config.js";
import { Committer } from "../../src/domain/committer.js";
import { Recovery } from "../../src/domain/recovery.js";
import type { Runtime } from "../../src/domain/runtime.js";
import { tracingOff } from "../../src/tracing/tracer.js";
import { Sweeper } from "../../src/domain/sweeper.js";
import { TenantDirectory } from "../../src/domain/tenants.js";
import { noMetrics } from "../../src/metrics/reporter.js";
import { ChangeBus } from "../../src/stream/change-bus.js";
import { TestClock } from "../support/fake-clock.js";
import { eventually, testEnv } from "../support/gateway.js";
import { useSqlTestDatabase } from "../support/sql-fixtures.js";

const testDb = useSqlTestDatabase({ emptyBeforeEach: false });

it("runs none of its loops after stop(), however their paces differ", async () => {
  const config = loadConfig(testEnv(testDb.url, { MOORING_SWEEP_MS: "1000", MOORING_POLL_MS: "10" }));
  const log = pino({ level: "silent" });
  const db = testDb.database;
  const bus = new ChangeBus();
  const committer = new Committer(db, bus, log, { publish() {} }, noMetrics, {
    flushMs: config.eventFlushMs,
    flushMax: config.eventFlushMax,
    lanes: 1,
  });
  const eventLog = committer.eventLog;
  const clock = new TestClock();
  const rt: Runtime = {
    config,
    db,
    log,
    bus,
    eventLog,
    committer,
    identity: { instanceId: "sweeper-test", bootId: crypto.randomUUID(), host: "h", pid: 1, version: "0" },
    metrics: noMetrics,
    tenants: TenantDirectory.fromConfig(config),
    clock,
    tracer: tracingOff,
  };
  // Every queue poll ends with a claim attempt (a local "gate" hint).
  let polls = 0;
  bus.on("gate", () => void polls++);
  const sweeper = new Sweeper(rt, new Recovery(rt));
  let leaseSweeps = 0;
  const sweepLeases = sweeper.sweepLeases.bind(sweeper);
  sweeper.sweepLeases = () => {
    leaseSweeps++;
    return sweepLeases();
  };
  sweeper.start();
  // Many queue polls per lease sweep: the fast loop's timers come and go while the slow one waits.
  await eventually(async () => leaseSweeps >= 1, 30_000);
  const pollsThen = polls;
  await eventually(async () => polls >= pollsThen + 12, 30_000);
  await sweeper.stop();
  const atStop = { polls, leaseSweeps };
  // No timer of the sweeper is left, and ten lease-sweep periods of its clock later none ran.
  expect(clock.pending()).toEqual([]);
  await clock.advance(10 * config.sweepMs);
  expect({ polls, leaseSweeps }).toEqual(atStop);
  await eventLog.stop();
}, 60_000);
