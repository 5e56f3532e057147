/**
 * Cancelling a task, as a state change inside a transaction (a cancel, or an archive cascade): a
 * queued task is cancelled at once with its terminal event; a running one goes `cancelling` and
 * its owner (on whichever instance) stops it and settles `cancelled` itself.
 */
import type { Tx } from "../../db/client.js";
import { eventAppend } from "../../sql/event-append.js";
import { taskCancelQueued, taskMarkCancelling } from "../../sql/task-cancel.js";
import { taskTerminalEvent } from "../../sql/task-settle.js";
import type { TaskRow } from "../../sql/task-row.js";
import type { Effects } from "../committer.js";

/** The task after the cancel (null when it was neither queued nor running) and the effects. */
export async function cancelTaskIn(
  tx: Tx,
  task: TaskRow,
): Promise<{ value: TaskRow | null; effects: Effects }> {
  const queued = await taskCancelQueued(tx, task.id);
  if (queued) {
    const events = await eventAppend(tx, queued.sessionId, [taskTerminalEvent(queued)]);
    // The answer (and a repeated cancel's answer) must include the terminal event.
    queued.lastSeq = events[events.length - 1].seq;
    const notify = {
      when: "afterCommit" as const,
      heads: new Map([[queued.sessionId, queued.lastSeq]]),
      gate: true,
    };
    return { value: queued, effects: { events, queueMoved: true, notify } };
  }
  const cancelling = await taskMarkCancelling(tx, task.id);
  if (!cancelling) return { value: null, effects: {} };
  return {
    value: cancelling,
    effects: {
      cancel: [cancelling.id],
      sessionsChanged: [cancelling.sessionId],
      // Other instances: the owner stops the turn; subscribers re-read the task.
      notify: {
        when: "afterCommit",
        cancel: [cancelling.id],
        heads: new Map([[cancelling.sessionId, -1]]),
      },
    },
  };
}

/** Several changes' effects as one. */
export function mergeEffects(all: Effects[]): Effects {
  const merged: Required<Omit<Effects, "notify">> & Pick<Effects, "notify"> = {
    events: [],
    claimed: [],
    cancel: [],
    sessionsChanged: [],
    archived: [],
    purged: [],
    gateChanged: false,
    queueMoved: false,
    permissionsResolved: [],
    inputAdded: [],
  };
  for (const e of all) {
    merged.events.push(...(e.events ?? []));
    merged.claimed.push(...(e.claimed ?? []));
    merged.cancel.push(...(e.cancel ?? []));
    merged.sessionsChanged.push(...(e.sessionsChanged ?? []));
    merged.archived.push(...(e.archived ?? []));
    merged.purged.push(...(e.purged ?? []));
    merged.permissionsResolved.push(...(e.permissionsResolved ?? []));
    merged.inputAdded.push(...(e.inputAdded ?? []));
    merged.gateChanged ||= e.gateChanged ?? false;
    merged.queueMoved ||= e.queueMoved ?? false;
    if (e.notify) merged.notify = mergeNotify(merged.notify, e.notify);
  }
  return merged;
}

/**
 * Two changes' notifications as one. Merged into one transaction they go out together: inside it
 * when either asked for that (delivered at its commit), else after the commit.
 */
function mergeNotify(
  a: Effects["notify"],
  b: NonNullable<Effects["notify"]>,
): NonNullable<Effects["notify"]> {
  if (!a) return b;
  const heads = new Map(a.heads);
  for (const [id, seq] of b.heads ?? []) heads.set(id, Math.max(seq, heads.get(id) ?? -1));
  return {
    when: a.when === "inTransaction" || b.when === "inTransaction" ? "inTransaction" : "afterCommit",
    heads,
    gate: Boolean(a.gate || b.gate),
    cancel: [...(a.cancel ?? []), ...(b.cancel ?? [])],
    archived: [...(a.archived ?? []), ...(b.archived ?? [])],
    permissions: [...(a.permissions ?? []), ...(b.permissions ?? [])],
    input: [...(a.input ?? []), ...(b.input ?? [])],
  };
}
