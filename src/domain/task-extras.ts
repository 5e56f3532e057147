/**
 * What task views show beyond their rows: the queue position of a queued task (and the instance
 * group it waits for, when that group has no live instance) and the pending permission requests of
 * a running one. Read for a whole page at once, both queries together, so
 * a list or a session snapshot costs one round trip more than its rows, not one per task or kind.
 */
import type { Queryable } from "../db/client.js";
import { gateQueuePositions } from "../sql/gate-status.js";
import { instanceLiveGroups } from "../sql/instance.js";
import { permissionPendingOf } from "../sql/permission.js";
import type { TaskRow } from "../sql/task-row.js";
import { isActive } from "../contract/task-status.js";
import { type PermissionRequestView, requestView } from "./permission-views.js";

export interface TaskExtras {
  positions: Map<string, number>;
  pending: Map<string, PermissionRequestView[]>;
  /** Queued tasks whose instance group has no live instance, with that group. */
  waitingForGroup: Map<string, string>;
}

/** `liveWithinMs`: an instance heard from within this long is live (MOORING_LEASE_MS, as GET /v1/instances). */
export async function taskExtras(
  q: Queryable,
  rows: readonly TaskRow[],
  liveWithinMs: number,
): Promise<TaskExtras> {
  const queuedRows = rows.filter((r) => r.status === "queued");
  const queued = queuedRows.map((r) => r.id);
  const active = rows.filter((r) => isActive(r.status)).map((r) => r.id);
  const groups = [...new Set(queuedRows.map((r) => r.instanceGroup))];
  const [positions, requests, live] = await Promise.all([
    gateQueuePositions(q, queued),
    permissionPendingOf(q, active),
    instanceLiveGroups(q, groups, liveWithinMs),
  ]);
  const waitingForGroup = new Map<string, string>();
  for (const r of queuedRows) if (!live.has(r.instanceGroup)) waitingForGroup.set(r.id, r.instanceGroup);
  const pending = new Map<string, PermissionRequestView[]>();
  for (const request of requests) {
    const list = pending.get(request.taskId);
    if (list) list.push(requestView(request));
    else pending.set(request.taskId, [requestView(request)]);
  }
  return { positions, pending, waitingForGroup };
}
