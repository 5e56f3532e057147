/**
 * Cancelling a task, as a state change inside a transaction (a cancel, or an archive cascade): a
 * queued task is cancelled at once with its terminal event; a running one goes `cancelling` and
 * its owner (on whichever instance) stops it and settles `cancelled` itself.
 */
import type { Tx } from "../db/client.js";
import { appendEvents } from "../sql/append-events.js";
import { cancelQueuedTask, markTaskCancelling } from "../sql/cancel-task.js";
import { notifyCancel, notifyGate, notifySessions } from "../sql/notify.js";
import type { TaskRow } from "../sql/task-row.js";
import type { Effects } from "./committer.js";
import { terminalEvent } from "./task-events.js";

/** The task after the cancel (null when it was neither queued nor running) and the effects. */
export async function cancelTaskIn(tx: Tx, task: TaskRow): Promise<{ row: TaskRow | null; effects: Effects }> {
  const queued = await cancelQueuedTask(tx, task.id);
  if (queued) {
    const events = await appendEvents(tx, queued.sessionId, [terminalEvent(queued)]);
    // The answer (and a repeated cancel's answer) must include the terminal event.
    queued.lastSeq = events[events.length - 1].seq;
    await notifySessions(tx, new Map([[queued.sessionId, queued.lastSeq]]));
    await notifyGate(tx);
    return { row: queued, effects: { events, queueMoved: true } };
  }
  const cancelling = await markTaskCancelling(tx, task.id);
  if (!cancelling) return { row: null, effects: {} };
  await notifyCancel(tx, cancelling.id);
  await notifySessions(tx, new Map([[cancelling.sessionId, -1]]));
  return { row: cancelling, effects: { cancel: [cancelling.id], sessionsChanged: [cancelling.sessionId] } };
}

/** Several changes' effects as one. */
export function mergeEffects(all: Effects[]): Effects {
  const merged: Required<Omit<Effects, "notify">> & Pick<Effects, "notify"> = {
    events: [],
    claimed: [],
    cancel: [],
    sessionsChanged: [],
    archived: [],
    gateChanged: false,
    queueMoved: false,
    permissionsResolved: [],
  };
  for (const e of all) {
    merged.events.push(...(e.events ?? []));
    merged.claimed.push(...(e.claimed ?? []));
    merged.cancel.push(...(e.cancel ?? []));
    merged.sessionsChanged.push(...(e.sessionsChanged ?? []));
    merged.archived.push(...(e.archived ?? []));
    merged.permissionsResolved.push(...(e.permissionsResolved ?? []));
    merged.gateChanged ||= e.gateChanged ?? false;
    merged.queueMoved ||= e.queueMoved ?? false;
    if (e.notify) {
      const heads = new Map(merged.notify?.heads);
      for (const [id, seq] of e.notify.heads) heads.set(id, Math.max(seq, heads.get(id) ?? -1));
      merged.notify = { heads, gate: (merged.notify?.gate ?? false) || e.notify.gate };
    }
  }
  return merged;
}
