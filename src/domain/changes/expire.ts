/**
 * Expiring queued tasks past their queue deadline, one transaction: each becomes `expired` with
 * its terminal event; a slot may be free and the queue moved. Answers the expired tasks.
 */
import type { Tx } from "../../db/client.js";
import { eventAppend } from "../../sql/event-append.js";
import { taskExpireQueued } from "../../sql/task-expire.js";
import { taskTerminalEvent } from "../../sql/task-settle.js";
import type { TaskRow } from "../../sql/task-row.js";
import { type Effects, headsOf } from "../committer.js";

export async function expireQueuedIn(tx: Tx): Promise<{ value: TaskRow[]; effects: Effects }> {
  const rows = await taskExpireQueued(tx);
  // One statement per task, sent together (postgres.js pipelines them on the connection).
  const events = (
    await Promise.all(rows.map((row) => eventAppend(tx, row.sessionId, [taskTerminalEvent(row)])))
  ).flat();
  if (rows.length === 0) return { value: rows, effects: {} };
  const notify = { when: "afterCommit" as const, heads: headsOf(events), gate: true };
  return { value: rows, effects: { events, queueMoved: true, notify } };
}
