import type { Queryable } from "../db/client.js";

/**
 * Keeps the last `keep` events of each session. Only sessions with more than that are touched
 * (found through their `last_seq - pruned_seq`), so a sweep over a quiet database does no work;
 * `pruned_seq` moves with the delete in one statement so a subscriber never sees a hole it is not
 * told about (it gets RESYNC_REQUIRED instead). Bounded per call to keep the sweep short.
 *
 * The new `pruned_seq` comes from `last_seq` as this statement's snapshot sees it, not from the row
 * the update locks: a flush that commits while the statement runs moves the locked row's
 * `last_seq`, but its events are invisible to the delete (same snapshot), so pruning up to the
 * locked value would leave events below `pruned_seq` that no later sweep removes. Every event up
 * to the snapshot's `last_seq` is visible (a flush commits events and `last_seq` together); the
 * next sweep catches up with what came later. `greatest` keeps `pruned_seq` from moving back.
 */
export async function eventPrune(q: Queryable, keep: number, maxSessions = 100): Promise<number> {
  const [row] = await q<{ deleted: number }[]>`
    with seen as (
      select id, last_seq - ${keep} as upto from sessions
      where last_seq - pruned_seq > ${keep} limit ${maxSessions}
    ), due as (
      update sessions s set pruned_seq = greatest(s.pruned_seq, seen.upto)
      from seen where s.id = seen.id
      returning s.id, seen.upto
    ), gone as (
      delete from events e using due where e.session_id = due.id and e.seq <= due.upto
      returning 1
    )
    select count(*)::int as deleted from gone`;
  return row.deleted;
}
