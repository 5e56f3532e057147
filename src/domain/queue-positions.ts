/**
 * Announces `task.position` events when queued tasks move up. Debounced, and only run by the
 * instance that changed the queue, so a burst of claims produces one round of announcements.
 * Each session's announcements are written in a small transaction of their own that checks the
 * task is still queued under the session's row lock (sql/event-append-positions.ts): going through the
 * batched event log instead let a position land after the task had already started.
 */
import { gateListQueuePositions } from "../sql/gate-status.js";
import { announcePositionsChange } from "./changes/announce-positions.js";
import type { Runtime } from "./runtime.js";
import type { ClockTimer } from "../clock.js";
import type { Service } from "../lib/service.js";

/** Positions beyond this are not announced (they still show, live, in every snapshot). */
const ANNOUNCE_LIMIT = 100;
const DEBOUNCE_MS = 25;

export class QueuePositionAnnouncer implements Service {
  readonly name = "queue positions";
  private readonly announced = new Map<string, number>();
  private timer: ClockTimer | null = null;
  /**
   * One round at a time, so a slow round never writes an older position after a newer one. A poke
   * during a round is debounced again after it (not lib/single-flight.ts, which would run at once:
   * measured, that wrote more position events per turn).
   */
  private round: Promise<void> | null = null;
  private again = false;
  private stopped = true;

  constructor(private readonly rt: Runtime) {
    rt.bus.on("queueMoved", () => this.poke());
  }

  poke(): void {
    if (this.timer || this.stopped) return;
    this.timer = this.rt.clock.setTimeout(() => {
      this.timer = null;
      void this.run();
    }, DEBOUNCE_MS);
    this.timer.unref();
  }

  private async run(): Promise<void> {
    if (this.round) {
      this.again = true;
      return;
    }
    this.round = this.announce().catch((err) => {
      this.rt.log.debug({ err: String(err) }, "position announcement failed");
    });
    await this.round;
    this.round = null;
    if (this.again) {
      this.again = false;
      this.poke();
    }
  }

  private async announce(): Promise<void> {
    const queue = await gateListQueuePositions(this.rt.db.sql, ANNOUNCE_LIMIT);
    const seen = new Set<string>();
    const moved = new Map<string, { taskId: string; position: number }[]>();
    for (const { id, sessionId, position, queuedAt } of queue) {
      seen.add(id);
      // First seen here: compare with what its task.queued event said (a submit that is quick
      // enough can move the queue between two rounds; another instance may then have announced
      // the same position already, which costs one repeated event at worst).
      const before = this.announced.get(id) ?? queuedAt ?? undefined;
      this.announced.set(id, position);
      if (before === undefined || before === position) continue;
      const list = moved.get(sessionId) ?? [];
      list.push({ taskId: id, position });
      moved.set(sessionId, list);
    }
    for (const id of this.announced.keys()) if (!seen.has(id)) this.announced.delete(id);
    for (const [sessionId, positions] of moved) {
      if (this.stopped) return;
      await this.rt.committer.commit(announcePositionsChange(sessionId, positions));
    }
  }

  start(): void {
    this.stopped = false;
  }

  /** No round starts after this; resolves once a round in flight is over. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) this.rt.clock.clearTimeout(this.timer);
    this.timer = null;
    await this.round;
  }
}
