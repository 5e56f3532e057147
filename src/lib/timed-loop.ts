import { type Clock, type ClockTimer, realClock } from "../clock.js";

/**
 * A task run every `everyMs`, the next run timed from the end of the last (so a slow run never
 * overlaps itself). One timer at a time and a stopped flag: `stop()` clears the one pending timer,
 * a run already in flight schedules nothing after it, and `stop()` resolves once that run is over,
 * so nothing of the loop runs after shutdown (the sweeper once kept only its last few timers and
 * its slower loops ran on after `stop()`).
 *
 * Its `start`/`stop` keep the service lifecycle's rules (lib/service.ts: stop safe before start
 * and twice, started again after a stop), but a loop is no entry of the gateway's list: it is a
 * part of the service that owns it, whose start has steps of its own around the loop's (a
 * registration first, a check whether it is needed, several loops at once, a bus subscription).
 */
export class TimedLoop {
  private timer: ClockTimer | null = null;
  private running: Promise<void> | null = null;
  private stopped = true;
  /** A wake arrived while a run was in flight: run again as soon as it ends. */
  private again = false;

  constructor(
    private readonly everyMs: number,
    private readonly run: () => Promise<unknown> | unknown,
    /** A failed run is reported here; the next run goes on as scheduled. */
    private readonly onError: (err: unknown) => void = () => {},
    private readonly clock: Clock = realClock,
  ) {}

  /**
   * Schedules the first run `everyMs` from now (`now`: runs it at once); a second start while
   * running does nothing.
   */
  start(now = false): void {
    if (!this.stopped) return;
    this.stopped = false;
    // A run still in flight (stopped and started again) schedules the next one when it ends.
    if (this.running) return;
    if (now) this.running = this.tick();
    else this.schedule();
  }

  /** No run starts after this; resolves once a run in flight is over. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) this.clock.clearTimeout(this.timer);
    this.timer = null;
    await this.running;
  }

  /**
   * Run now rather than at the next tick (a hint that work arrived); with a run in flight, once
   * more right after it, so wakes that pile up meanwhile cost one run. The timer is the guarantee.
   */
  wake(): void {
    if (this.stopped) return;
    if (this.running) {
      this.again = true;
      return;
    }
    if (this.timer) this.clock.clearTimeout(this.timer);
    this.timer = null;
    this.running = this.tick();
  }

  get active(): boolean {
    return !this.stopped;
  }

  private schedule(): void {
    if (this.stopped || this.timer) return;
    this.timer = this.clock.setTimeout(() => {
      this.timer = null;
      this.running = this.tick();
    }, this.everyMs);
    this.timer.unref();
  }

  private async tick(): Promise<void> {
    if (this.stopped) return;
    try {
      await this.run();
    } catch (err) {
      this.onError(err);
    } finally {
      this.running = null;
      if (this.again && !this.stopped) {
        this.again = false;
        this.running = this.tick();
      } else this.schedule();
    }
  }
}
