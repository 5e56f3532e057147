/** Claiming queued work for this instance, with the `task.started` events in the same transaction. */
import type { Tx } from "../db/client.js";
import type { StoredEvent } from "../sql/append-events.js";
import { appendEvents } from "../sql/append-events.js";
import { claimTasks } from "../sql/claim-tasks.js";
import type { TaskRow } from "../sql/task-row.js";
import type { Runtime } from "./runtime.js";
import { startedEvent } from "./task-events.js";

/** Who runs claimed tasks on this instance. */
export interface TaskRunner {
  /** How many tasks this instance will take now (0 while shutting down). */
  claimLimit(): number;
  /** Start tasks claimed in a transaction that has committed. */
  startClaimed(rows: TaskRow[]): void;
}

/** Must run with the gate lock held. */
export async function claimAndStart(
  tx: Tx,
  rt: Runtime,
  limit: number,
): Promise<{ rows: TaskRow[]; events: StoredEvent[]; heads: Map<string, number> }> {
  const rows = await claimTasks(
    tx,
    { instanceId: rt.identity.instanceId, bootId: rt.identity.bootId, leaseMs: rt.config.leaseMs },
    rt.config.maxActive,
    limit,
  );
  const events: StoredEvent[] = [];
  const heads = new Map<string, number>();
  for (const row of rows) {
    const stored = await appendEvents(tx, row.sessionId, [startedEvent(row)]);
    events.push(...stored);
    heads.set(row.sessionId, stored[stored.length - 1].seq);
    row.firstSeq ??= stored[0].seq;
    row.lastSeq = stored[stored.length - 1].seq; // the row was returned before its event was appended
  }
  return { rows, events, heads };
}
