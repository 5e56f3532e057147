import type { Queryable } from "../db/client.js";
import type { TaskError, TaskResult, TaskRow, TaskStatus } from "./task-row.js";

export interface Settlement {
  status: Extract<TaskStatus, "completed" | "failed" | "cancelled" | "interrupted">;
  result?: TaskResult | null;
  error?: TaskError | null;
}

/**
 * The owner ends its running task. Fenced by owner boot and attempt: if the lease was taken over
 * (sweep, restart) or the task was already settled, nothing changes and null comes back, so a
 * stale writer never overwrites a newer state. Only the fields a settlement owns are written.
 */
export async function settleOwnedTask(
  q: Queryable,
  taskId: string,
  owner: { bootId: string; attempt: number },
  settlement: Settlement,
): Promise<TaskRow | null> {
  const [row] = await q<TaskRow[]>`
    update tasks set
      status = ${settlement.status},
      result = ${settlement.result ? JSON.stringify(settlement.result) : null}::text::jsonb,
      error = ${settlement.error ? JSON.stringify(settlement.error) : null}::text::jsonb,
      finished_at = now(), lease_expires_at = null, version = version + 1
    where id = ${taskId} and owner_boot = ${owner.bootId} and attempt = ${owner.attempt}
      and status in ('running', 'cancelling')
    returning *`;
  return row ?? null;
}
