import type { Queryable } from "../db/client.js";
import type { StoredEvent } from "./event-append.js";

/**
 * One page of a session's events after a cursor, in seq order: what a polling client reads instead
 * of holding a stream open. Served by the events primary key (session_id, seq).
 */
export async function eventReadAfter(
  q: Queryable,
  sessionId: string,
  afterSeq: number,
  limit: number,
): Promise<StoredEvent[]> {
  return q<StoredEvent[]>`
    select session_id, seq, task_id, type, at, data from events
    where session_id = ${sessionId} and seq > ${afterSeq} order by seq limit ${limit}`;
}

/** One event's whole payload (the full value behind a preview); the events primary key. */
export async function eventReadPayload(
  q: Queryable,
  sessionId: string,
  seq: number,
): Promise<{ type: string; data: unknown; payload: unknown } | null> {
  const [row] = await q<{ type: string; data: unknown; payload: unknown }[]>`
    select type, data, payload from events where session_id = ${sessionId} and seq = ${seq}`;
  return row ?? null;
}
