/**
 * Expiring queued tasks past their queue deadline, one transaction: each becomes `expired` with
 * its terminal event; a slot may be free and the queue moved. Answers the expired tasks.
 */
import type { Tx } from "../../db/client.js";
import { appendEvents } from "../../sql/append-events.js";
import { expireQueuedTasks } from "../../sql/expire-queued.js";
import { terminalEvent } from "../../sql/settle-task.js";
import type { TaskRow } from "../../sql/task-row.js";
import { type Effects, headsOf } from "../committer.js";

export async function expireQueuedIn(tx: Tx): Promise<{ value: TaskRow[]; effects: Effects }> {
  const rows = await expireQueuedTasks(tx);
  // One statement per task, sent together (postgres.js pipelines them on the connection).
  const events = (
    await Promise.all(rows.map((row) => appendEvents(tx, row.sessionId, [terminalEvent(row)])))
  ).flat();
  if (rows.length === 0) return { value: rows, effects: {} };
  const notify = { when: "afterCommit" as const, heads: headsOf(events), gate: true };
  return { value: rows, effects: { events, queueMoved: true, notify } };
}
