import type { Queryable } from "../db/client.js";

/**
 * Keeps the last `keep` events of each session. Only sessions with more than that are touched
 * (found through their `last_seq - pruned_seq`), so a sweep over a quiet database does no work;
 * `pruned_seq` moves with the delete in one statement so a subscriber never sees a hole it is not
 * told about (it gets RESYNC_REQUIRED instead). Bounded per call to keep the sweep short.
 */
export async function pruneEvents(q: Queryable, keep: number, maxSessions = 100): Promise<number> {
  const [row] = await q<{ deleted: number }[]>`
    with due as (
      update sessions set pruned_seq = last_seq - ${keep}
      where id in (
        select id from sessions where last_seq - pruned_seq > ${keep} limit ${maxSessions}
      )
      returning id, pruned_seq
    ), gone as (
      delete from events e using due where e.session_id = due.id and e.seq <= due.pruned_seq
      returning 1
    )
    select count(*)::int as deleted from gone`;
  return row.deleted;
}
