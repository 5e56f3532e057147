/** Reading the event log: subscription start points and the full payloads behind previews. */
import type { Database } from "../db/client.js";
import { MooringError } from "../errors.js";
import type { SessionService } from "./sessions.js";

export class EventService {
  constructor(
    private readonly db: Database,
    private readonly sessions: SessionService,
  ) {}

  /**
   * Where a subscription starts: the session's head and snapshot. A cursor older than what the log
   * still holds cannot be served gap-free: RESYNC_REQUIRED tells the client to reload the snapshot.
   */
  async openSubscription(sessionId: string, afterSeq: number) {
    const row = await this.sessions.row(sessionId);
    if (afterSeq < row.prunedSeq) {
      throw new MooringError(
        "RESYNC_REQUIRED",
        `events after seq ${afterSeq} are no longer kept (oldest kept is ${row.prunedSeq + 1}); reload the session and subscribe from its lastSeq`,
        { details: { oldestSeq: row.prunedSeq + 1 } },
      );
    }
    const session = await this.sessions.get(sessionId);
    return { headSeq: row.lastSeq, session };
  }

  /** The whole payload behind an event's preview (e.g. a full tool result). */
  async payload(sessionId: string, seq: number) {
    await this.sessions.row(sessionId);
    const [row] = await this.db.sql<{ type: string; data: unknown; payload: unknown }[]>`
      select type, data, payload from events where session_id = ${sessionId} and seq = ${seq}`;
    if (!row) throw new MooringError("EVENT_NOT_FOUND", `session ${sessionId} has no event ${seq}`);
    return { sessionId, seq, type: row.type, payload: row.payload ?? row.data };
  }
}
