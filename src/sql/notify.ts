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
