/** Reading the event log: subscription start points and the full payloads behind previews. */
import type { Database } from "../db/client.js";
import { errors } from "../errors.js";
import { eventReadPayload, eventReadAfter } from "../sql/event-read.js";
import { toClientEvent } from "../stream/session-feeds.js";
import type { SessionService } from "./sessions.js";
import type { Tenant } from "./tenants.js";

export class EventService {
  constructor(
    private readonly db: Database,
    private readonly sessions: SessionService,
  ) {}

  /**
   * Where a subscription starts: the session's head and snapshot. A cursor older than what the log
   * still holds cannot be served gap-free: RESYNC_REQUIRED tells the client to reload the snapshot.
   */
  async openSubscription(sessionId: string, afterSeq: number, tenant: Tenant) {
    const row = await this.openRow(sessionId, afterSeq, tenant);
    // The snapshot of the same read (reading the row again cost a round trip per subscribe).
    const session = await this.sessions.viewOf(row);
    return { headSeq: row.lastSeq, session };
  }

  /** Where a stream that sends no snapshot (SSE) starts: the session's head only. */
  async openStream(sessionId: string, afterSeq: number, tenant: Tenant): Promise<{ headSeq: number }> {
    const row = await this.openRow(sessionId, afterSeq, tenant);
    return { headSeq: row.lastSeq };
  }

  private async openRow(sessionId: string, afterSeq: number, tenant: Tenant) {
    // The one check a stream needs: the feed it then joins carries this session's events only.
    const row = await this.sessions.row(sessionId, tenant);
    if (afterSeq < row.prunedSeq) {
      throw errors.resyncRequired(afterSeq, row.prunedSeq + 1, "session");
    }
    return row;
  }

  /**
   * A page of events after `afterSeq`, for clients that poll instead of streaming. Only a run
   * contiguous with the cursor is returned, so a client that moves its cursor to the last item
   * never skips a seq. `nextAfterSeq` is set when more events lie beyond this page.
   */
  async page(sessionId: string, afterSeq: number, limit: number, tenant: Tenant) {
    const row = await this.sessions.row(sessionId, tenant);
    if (afterSeq < row.prunedSeq) {
      throw errors.resyncRequired(afterSeq, row.prunedSeq + 1, "task");
    }
    const rows = await eventReadAfter(this.db.sql, row.id, afterSeq, limit);
    const items = [];
    for (const e of rows) {
      if (e.seq !== afterSeq + items.length + 1) break;
      items.push(toClientEvent(e));
    }
    const last = items.length > 0 ? items[items.length - 1].seq : afterSeq;
    return { items, headSeq: Math.max(row.lastSeq, last), nextAfterSeq: last < row.lastSeq ? last : null };
  }

  /** The whole payload behind an event's preview (e.g. a full tool result). */
  async payload(sessionId: string, seq: number, tenant: Tenant) {
    await this.sessions.row(sessionId, tenant);
    const row = await eventReadPayload(this.db.sql, sessionId, seq);
    if (!row) throw errors.eventNotFound(sessionId, seq);
    return { sessionId, seq, type: row.type, payload: row.payload ?? row.data };
  }
}
