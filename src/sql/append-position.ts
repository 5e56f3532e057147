import type { Tx } from "../db/client.js";
import { appendEvents, type StoredEvent } from "./append-events.js";

/**
 * Appends `task.position` events for tasks of one session that are still queued, and for no other.
 * The session row is locked first, in a statement of its own: every move out of `queued` (claim,
 * cancel, expiry, archive) writes its event under that same row lock after changing the status, so
 * the status read by the next statement (a fresh snapshot) is either still `queued` (and this event
 * goes in before theirs) or already moved on (and nothing is written). A position is therefore
 * never announced after a task started or ended. The task rows are only read, never locked: a
 * claim's SKIP LOCKED would pass over a locked head of the queue.
 */
export async function appendPositionEvents(
  tx: Tx,
  sessionId: string,
  positions: { taskId: string; position: number }[],
): Promise<StoredEvent[]> {
  await tx`select 1 from sessions where id = ${sessionId} for update`;
  const ids = positions.map((p) => p.taskId);
  const queued = await tx<{ id: string }[]>`select id from tasks where id = any(${ids}::uuid[]) and status = 'queued'`;
  const still = new Set(queued.map((r) => r.id));
  return appendEvents(
    tx,
    sessionId,
    positions
      .filter((p) => still.has(p.taskId))
      .map((p) => ({ taskId: p.taskId, type: "task.position", data: { position: p.position } })),
  );
}
