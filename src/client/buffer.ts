/**
 * What a run holds for its consumer: a bounded queue between the follower (which reads the
 * network) and the `for await` loop (which may be slow). At the bound it says `full`, and the
 * follower stops reading until the consumer has taken half of it: the events wait in the
 * gateway's log, not in this process's memory.
 */
import type { RunItem } from "./types.js";

export class RunBuffer {
  /** The largest it has been (events, bytes). */
  readonly peak = { events: 0, bytes: 0 };
  private readonly queue: { item: RunItem; bytes: number }[] = [];
  private bytes = 0;
  private full = false;
  private iterating = false;
  /** Nobody will iterate: items are dropped (handlers still hear events). */
  private discarding = false;
  private ended: { error?: unknown } | null = null;
  private drainWaiters: (() => void)[] = [];
  private itemWaiter: (() => void) | null = null;

  constructor(
    private readonly maxEvents: number,
    private readonly maxBytes: number,
  ) {}

  /** At the bound: take nothing more until `drained()`. */
  get isFull(): boolean {
    return this.full;
  }

  push(item: RunItem, bytes: number): void {
    if (this.discarding) return;
    this.queue.push({ item, bytes });
    this.bytes += bytes;
    this.peak.events = Math.max(this.peak.events, this.queue.length);
    this.peak.bytes = Math.max(this.peak.bytes, this.bytes);
    if (this.queue.length >= this.maxEvents || this.bytes >= this.maxBytes) this.full = true;
    this.wake();
  }

  /** Resolves once the consumer has taken half of what the bound allows (or the run stopped). */
  drained(): Promise<void> {
    if (!this.full) return Promise.resolve();
    return new Promise((resolve) => this.drainWaiters.push(resolve));
  }

  /** No iterator is coming (done() was called first, or the consumer left): keep nothing. */
  discard(): void {
    if (this.iterating) return;
    this.discarding = true;
    this.queue.length = 0;
    this.bytes = 0;
    this.maybeResume();
  }

  /** The run is over: the iterator ends after what is queued (or throws `error`). */
  end(error?: unknown): void {
    this.ended = error === undefined ? {} : { error };
    this.releaseDrainWaiters();
    this.wake();
  }

  releaseDrainWaiters(): void {
    for (const resolve of this.drainWaiters.splice(0)) resolve();
  }

  async *items(): AsyncGenerator<RunItem> {
    this.iterating = true;
    try {
      for (;;) {
        const next = this.queue.shift();
        if (next) {
          this.bytes -= next.bytes;
          this.maybeResume();
          yield next.item;
          continue;
        }
        if (this.ended) {
          if (this.ended.error !== undefined) throw this.ended.error;
          return;
        }
        await new Promise<void>((resolve) => {
          this.itemWaiter = resolve;
        });
      }
    } finally {
      // A consumer that left (break) keeps nothing buffered; done() still resolves.
      this.iterating = false;
      if (!this.ended) this.discard();
    }
  }

  private maybeResume(): void {
    if (!this.full || this.queue.length > this.maxEvents / 2 || this.bytes > this.maxBytes / 2) return;
    this.full = false;
    this.releaseDrainWaiters();
  }

  private wake(): void {
    const waiter = this.itemWaiter;
    this.itemWaiter = null;
    waiter?.();
  }
}
