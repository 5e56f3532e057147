/**
 * Announces `task.position` events when queued tasks move up. Debounced, and only run by the
 * instance that changed the queue, so a burst of claims produces one round of announcements.
 */
import { listQueuePositions } from "../sql/gate-status.js";
import type { Runtime } from "./runtime.js";

/** Positions beyond this are not announced (they still show, live, in every snapshot). */
const ANNOUNCE_LIMIT = 100;
const DEBOUNCE_MS = 25;

export class QueuePositionAnnouncer {
  private readonly announced = new Map<string, number>();
  private timer: NodeJS.Timeout | null = null;

  constructor(private readonly rt: Runtime) {}

  poke(): void {
    if (this.timer) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      void this.announce().catch((err) => this.rt.log.debug({ err: String(err) }, "position announcement failed"));
    }, DEBOUNCE_MS);
    this.timer.unref();
  }

  private async announce(): Promise<void> {
    const queue = await listQueuePositions(this.rt.db.sql, ANNOUNCE_LIMIT);
    const seen = new Set<string>();
    for (const { id, sessionId, position } of queue) {
      seen.add(id);
      const before = this.announced.get(id);
      this.announced.set(id, position);
      if (before === undefined || before === position) continue;
      this.rt.eventLog.append({ sessionId, taskId: id, type: "task.position", data: { position } });
    }
    for (const id of this.announced.keys()) if (!seen.has(id)) this.announced.delete(id);
  }

  stop(): void {
    if (this.timer) clearTimeout(this.timer);
  }
}
