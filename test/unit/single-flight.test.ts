/**
 * lib/single-flight.ts without a database: requests during a run make exactly one more run, a
 * failed run is reported and a queued request still runs, and `coverQueued` (a looping pump about
 * to read) drops the requests queued before it.
 */
import { expect, it } from "vitest";
import { SingleFlight } from "../../src/lib/single-flight.js";

/** A run that waits until released, so the test decides when it ends. */
function gated() {
  const releases: (() => void)[] = [];
  let runs = 0;
  const work = () => {
    runs++;
    return new Promise<void>((resolve) => releases.push(resolve));
  };
  return { work, runs: () => runs, release: () => releases.shift()?.() };
}

const settle = () => new Promise((resolve) => setImmediate(resolve));

it("runs once more after a run, however many requests came during it", async () => {
  const g = gated();
  const flight = new SingleFlight(g.work);
  flight.request();
  flight.request();
  flight.request();
  expect(g.runs()).toBe(1);
  g.release();
  await settle();
  expect(g.runs()).toBe(2);
  g.release();
  await settle();
  expect(g.runs()).toBe(2);
  expect(flight.busy).toBe(false);
});

it("reports a failed run and still runs what was requested during it", async () => {
  const errors: unknown[] = [];
  let runs = 0;
  let fail: (err: Error) => void = () => {};
  const flight = new SingleFlight(
    () => {
      runs++;
      return runs === 1 ? new Promise<void>((_, reject) => (fail = reject)) : Promise.resolve();
    },
    (err) => errors.push(err),
  );
  flight.request();
  flight.request();
  fail(new Error("database away"));
  await settle();
  expect(errors).toHaveLength(1);
  expect(runs).toBe(2);
});

it("coverQueued drops the requests made before it, not those after", async () => {
  const g = gated();
  let covered = false;
  const flight: SingleFlight = new SingleFlight(async () => {
    await g.work();
    if (!covered) {
      covered = true;
      flight.coverQueued(); // the pump is about to read again: what was requested so far is covered
    }
  });
  flight.request();
  flight.request(); // before coverQueued: dropped
  g.release();
  await settle();
  expect(g.runs()).toBe(1);
  expect(flight.busy).toBe(false);

  covered = true;
  flight.request();
  flight.request(); // during a run that does not cover it: one more run
  g.release();
  await settle();
  expect(g.runs()).toBe(3);
  g.release();
  await settle();
});
