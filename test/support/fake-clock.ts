/**
 * Clocks a test moves.
 *
 * - FakeClock: the client SDK's clock frozen until the test fires its next timer (the deadline
 *   rule, where the client's only I/O is a proxy that refuses everything).
 * - TestClock: the gateway's clock (src/clock.ts) for an in-process gateway. It runs in real time,
 *   so everything the gateway does by itself goes on as usual, and `advance(ms)` jumps it ahead:
 *   every timer due by then fires at once, in order. A test waits out a 12 s shutdown grace or a
 *   3 s upstream silence with one step instead of real time. It counts its live timers, which the
 *   leak guard (test/support/leak-guard.ts) reads once the gateway stopped.
 */
import type { Clock as ClientClock } from "../../src/client/clock.js";
import type { Clock, ClockTimer } from "../../src/clock.js";

export class FakeClock implements ClientClock {
  private time: number;
  private nextId = 0;
  private readonly timers = new Map<number, { at: number; fn: () => void }>();
  private waiter: (() => void) | null = null;

  constructor(start = Date.now()) {
    this.time = start;
  }

  now(): number {
    return this.time;
  }

  setTimeout(fn: () => void, ms: number): number {
    const id = ++this.nextId;
    this.timers.set(id, { at: this.time + Math.max(0, ms), fn });
    const waiter = this.waiter;
    this.waiter = null;
    waiter?.();
    return id;
  }

  clearTimeout(handle: unknown): void {
    this.timers.delete(handle as number);
  }

  /** Waits until a timer is set (the client did its real I/O and now waits), then jumps to it and fires it. */
  async fireNext(): Promise<void> {
    while (this.timers.size === 0) {
      await new Promise<void>((resolve) => {
        this.waiter = resolve;
      });
    }
    let first: [number, { at: number; fn: () => void }] | null = null;
    for (const entry of this.timers) if (!first || entry[1].at < first[1].at) first = entry;
    const [id, timer] = first!;
    this.timers.delete(id);
    this.time = Math.max(this.time, timer.at);
    timer.fn();
  }
}

class SteppedTimer implements ClockTimer {
  real: NodeJS.Timeout | null = null;
  unrefd = false;

  constructor(
    readonly clock: TestClock,
    public at: number,
    readonly fn: () => void,
    /** Set for an interval: the period. */
    readonly every: number | null,
  ) {}

  unref(): ClockTimer {
    this.unrefd = true;
    this.real?.unref();
    return this;
  }
}

export class TestClock implements Clock {
  private offset = 0;
  private readonly live = new Set<SteppedTimer>();

  now(): number {
    return Date.now() + this.offset;
  }

  /** How far `advance` moved this clock ahead of real time. */
  get skewMs(): number {
    return this.offset;
  }

  setTimeout(fn: () => void, ms: number): ClockTimer {
    return this.add(fn, ms, null);
  }

  setInterval(fn: () => void, ms: number): ClockTimer {
    return this.add(fn, ms, Math.max(1, ms));
  }

  clearTimeout(timer: unknown): void {
    if (!(timer instanceof SteppedTimer) || timer.clock !== this) return;
    if (timer.real) clearTimeout(timer.real);
    timer.real = null;
    this.live.delete(timer);
  }

  clearInterval(timer: unknown): void {
    this.clearTimeout(timer);
  }

  /**
   * Timers set and neither fired (a timeout) nor cleared, each with the start of its callback's
   * source (read only here: a stack per timer made the gateway's hot paths slow).
   */
  pending(): string[] {
    return [...this.live].map(
      (t) =>
        `${t.every === null ? "timeout" : "interval"} of ${Math.round(t.every ?? t.at - this.now())} ms running ${t.fn.toString().replace(/\s+/g, " ").slice(0, 120)}`,
    );
  }

  /**
   * Moves the clock `ms` ahead and fires, in order, every timer due by then (also those the fired
   * ones set, when due), each with the clock at its due time, letting the promises each one
   * settles run before the next.
   */
  async advance(ms: number): Promise<void> {
    const target = this.now() + ms;
    for (let fired = 0; fired < 10_000; fired++) {
      let first: SteppedTimer | null = null;
      for (const t of this.live) if (t.at <= target && (!first || t.at < first.at)) first = t;
      if (!first) break;
      this.moveTo(first.at);
      this.fire(first);
      await new Promise((resolve) => setImmediate(resolve));
    }
    this.moveTo(target);
    // What is not due yet fires in real time from the new now.
    for (const t of this.live) this.arm(t);
  }

  private moveTo(at: number): void {
    this.offset = Math.max(this.offset, at - Date.now());
  }

  private add(fn: () => void, ms: number, every: number | null): SteppedTimer {
    const timer = new SteppedTimer(this, this.now() + Math.max(0, ms), fn, every);
    this.live.add(timer);
    this.arm(timer);
    return timer;
  }

  private arm(timer: SteppedTimer): void {
    if (timer.real) clearTimeout(timer.real);
    timer.real = setTimeout(() => this.fire(timer), Math.max(0, timer.at - this.now()));
    if (timer.unrefd) timer.real.unref();
  }

  private fire(timer: SteppedTimer): void {
    if (!this.live.has(timer)) return;
    if (timer.every === null) {
      this.clearTimeout(timer);
    } else {
      timer.at += timer.every;
      this.arm(timer);
    }
    timer.fn();
  }
}
