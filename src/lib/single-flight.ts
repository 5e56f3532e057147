/**
 * "One in flight, one more queued": `request()` runs `work` now, or, while a run is in flight,
 * once more after it (however many requests arrived meanwhile). A request during a run may have
 * come after what that run read, so one more run covers it; more would only repeat it. Used where
 * many hints ask for the same work (a claim, a long-poll read, a session feed's pump, the
 * coalesced notifications).
 */
export class SingleFlight {
  private running = false;
  private again = false;
  /** The run in flight (its promise never rejects). */
  private current: Promise<void> | null = null;

  constructor(
    private readonly work: () => Promise<unknown>,
    /** A failed run is reported here; a queued request still runs. */
    private readonly onError: (err: unknown) => void = () => {},
  ) {}

  get busy(): boolean {
    return this.running;
  }

  /**
   * For work that loops until it has nothing left: called where an iteration is about to read, it
   * drops the requests queued so far, since that read covers them (no run after this one for them).
   */
  coverQueued(): void {
    this.again = false;
  }

  request(): void {
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = true;
    this.current = this.run();
  }

  /** Resolves once no run is in flight, the one queued behind it included. */
  async settled(): Promise<void> {
    while (this.current) await this.current;
  }

  private async run(): Promise<void> {
    try {
      await this.work();
    } catch (err) {
      this.onError(err);
    } finally {
      this.running = false;
      this.current = null;
      if (this.again) {
        this.again = false;
        this.request();
      }
    }
  }
}
