import type { Queryable } from "../db/client.js";

/** Channels mooring uses. Notifications are wake-up hints; polling is the guarantee. */
export const channels = {
  /** Payload: JSON `[[sessionId, headSeq], ...]`, or `*` when too many to list. */
  sessions: "mooring_sessions",
  /** A slot may be free or work was queued: try to claim. */
  gate: "mooring_gate",
  /** Payload: a task id whose owner should stop it. */
  cancel: "mooring_cancel",
} as const;

/** Postgres refuses payloads of 8000 bytes or more. */
const MAX_PAYLOAD = 7900;

/** Sent inside the writer's transaction, so it is delivered at commit or never. */
export async function notifySessions(q: Queryable, heads: Map<string, number>): Promise<void> {
  if (heads.size === 0) return;
  let payload = JSON.stringify([...heads]);
  if (payload.length > MAX_PAYLOAD) payload = "*";
  await q`select pg_notify(${channels.sessions}, ${payload})`;
}

export async function notifyGate(q: Queryable): Promise<void> {
  await q`select pg_notify(${channels.gate}, '')`;
}

export async function notifyCancel(q: Queryable, taskId: string): Promise<void> {
  await q`select pg_notify(${channels.cancel}, ${taskId})`;
}

/**
 * `notifySessions` (and optionally `notifyGate`) for a pipelined transaction (db/pipeline.ts),
 * whose statements cannot use an earlier statement's answer: the heads are read from the session
 * rows this transaction wrote (it holds them locked, so they are its own final values). Same
 * payload and channels; delivered at commit, or never.
 */
export function notifySessionHeads(q: Queryable, sessionIds: string[], gate: boolean): Promise<unknown> {
  return q`
    select pg_notify(${channels.sessions}, case when length(h) > ${MAX_PAYLOAD} then '*' else h end),
           case when ${gate} then pg_notify(${channels.gate}, '') end
    from (select coalesce(json_agg(json_build_array(id, last_seq)), '[]')::text as h
          from sessions where id = any(${sessionIds}::uuid[])) heads`;
}
