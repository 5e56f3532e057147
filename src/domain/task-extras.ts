/**
 * What task views show beyond their rows: the queue position of a queued task and the pending
 * permission requests of a running one. Read for a whole page at once, both queries together, so
 * a list or a session snapshot costs one round trip more than its rows, not one per task or kind.
 */
import type { Queryable } from "../db/client.js";
import { queuePositions } from "../sql/gate-status.js";
import { pendingPermissionsOf } from "../sql/permissions.js";
import type { TaskRow } from "../sql/task-row.js";
import { isActive } from "../contract/task-status.js";
import { type PermissionRequestView, requestView } from "./permissions.js";

export interface TaskExtras {
  positions: Map<string, number>;
  pending: Map<string, PermissionRequestView[]>;
}

export async function taskExtras(q: Queryable, rows: readonly TaskRow[]): Promise<TaskExtras> {
  const queued = rows.filter((r) => r.status === "queued").map((r) => r.id);
  const active = rows.filter((r) => isActive(r.status)).map((r) => r.id);
  const [positions, requests] = await Promise.all([
    queuePositions(q, queued),
    pendingPermissionsOf(q, active),
  ]);
  const pending = new Map<string, PermissionRequestView[]>();
  for (const request of requests) {
    const list = pending.get(request.taskId);
    if (list) list.push(requestView(request));
    else pending.set(request.taskId, [requestView(request)]);
  }
  return { positions, pending };
}
