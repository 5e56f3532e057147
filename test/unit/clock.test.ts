/**
 * The gateway's clocks (src/clock.ts) and the TestClock tests step (test/support/fake-clock.ts).
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import { AbortError } from "../../src/client/errors.js";
import { realClock, scaledClock, sleep } from "../../src/clock.js";
import { loadConfig } from "../../src/config.js";
import { TestClock } from "../support/fake-clock.js";

afterEach(() => {
  vi.useRealTimers();
});

describe("scaledClock (MOORING_TIME_SCALE)", () => {
  it("divides waits by the scale and keeps now() the wall clock", () => {
    vi.useFakeTimers();
    const clock = scaledClock(10);
    const fired: string[] = [];
    clock.setTimeout(() => fired.push("timeout"), 1000);
    const every = clock.setInterval(() => fired.push("interval"), 2000);
    expect(clock.now()).toBe(Date.now());
    vi.advanceTimersByTime(99);
    expect(fired).toEqual([]);
    vi.advanceTimersByTime(1);
    expect(fired).toEqual(["timeout"]);
    vi.advanceTimersByTime(100);
    expect(fired).toEqual(["timeout", "interval"]);
    clock.clearInterval(every);
    vi.advanceTimersByTime(1000);
    expect(fired).toEqual(["timeout", "interval"]);
  });

  it("is the real clock at scale 1, and the option defaults to 1 and refuses 0", () => {
    expect(scaledClock(1)).toBe(realClock);
    expect(loadConfig({}).timeScale).toBe(1);
    expect(loadConfig({ MOORING_TIME_SCALE: "20" }).timeScale).toBe(20);
    expect(() => loadConfig({ MOORING_TIME_SCALE: "0" })).toThrow(/MOORING_TIME_SCALE/);
  });
});

describe("TestClock", () => {
  it("fires what is due, in order, when advanced; what is not due stays pending", async () => {
    const clock = new TestClock();
    const fired: string[] = [];
    clock.setTimeout(() => fired.push("b"), 60_000);
    clock.setTimeout(() => fired.push("a"), 30_000);
    clock.setTimeout(() => fired.push("c"), 120_000);
    const before = clock.now();
    await clock.advance(60_000);
    expect(fired).toEqual(["a", "b"]);
    expect(clock.now() - before).toBeGreaterThanOrEqual(60_000);
    expect(clock.pending()).toHaveLength(1);
    expect(clock.pending()[0]).toMatch(/^timeout of/);
    clock.clearTimeout(undefined);
    await clock.advance(60_000);
    expect(fired).toEqual(["a", "b", "c"]);
    expect(clock.pending()).toEqual([]);
  });

  it("fires a timer a fired one set when it is due within the same step", async () => {
    const clock = new TestClock();
    const fired: number[] = [];
    clock.setTimeout(() => {
      fired.push(1);
      clock.setTimeout(() => fired.push(2), 1000);
    }, 1000);
    await clock.advance(5000);
    expect(fired).toEqual([1, 2]);
  });

  it("runs an interval once per period of a step, until cleared", async () => {
    const clock = new TestClock();
    let runs = 0;
    const every = clock.setInterval(() => runs++, 10_000);
    await clock.advance(60_000);
    // Six periods, and a seventh if real time moved it past one more while the step ran.
    expect(runs).toBeGreaterThanOrEqual(6);
    expect(runs).toBeLessThanOrEqual(7);
    expect(clock.pending()).toHaveLength(1);
    clock.clearInterval(every);
    expect(clock.pending()).toEqual([]);
  });

  it("still runs in real time between steps", async () => {
    const clock = new TestClock();
    await sleep(clock, 20);
    const controller = new AbortController();
    const aborted = sleep(clock, 60_000, controller.signal, () => new AbortError());
    controller.abort();
    await expect(aborted).rejects.toBeInstanceOf(AbortError);
    expect(clock.pending()).toEqual([]);
  });
});
