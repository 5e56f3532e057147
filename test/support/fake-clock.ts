/** A clock for the client SDK whose time moves only when a test moves it (the deadline rule). */
import type { Clock } from "../../src/client/clock.js";

export class FakeClock implements Clock {
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
