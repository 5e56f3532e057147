import type { Queryable } from "../db/client.js";

/** Record, inside the flush's transaction, that this flush committed. */
export function eventWriteRecord(q: Queryable, writeId: string) {
  return q`insert into event_writes (write_id) values (${writeId})`;
}

/** Did a flush whose answer was lost commit after all? */
export async function eventWriteCommitted(q: Queryable, writeId: string): Promise<boolean> {
  const rows = await q`select 1 from event_writes where write_id = ${writeId}`;
  return rows.length > 0;
}

/** Retries happen within seconds; an hour of records is plenty. */
export async function eventWritePrune(q: Queryable): Promise<void> {
  await q`delete from event_writes where at < now() - interval '1 hour'`;
}
