import type { Queryable } from "../db/client.js";
import { ACTIVE, withSets } from "./task-status-sets.js";

export interface InstanceInfo {
  bootId: string;
  instanceId: string;
  host: string;
  pid: number;
  version: string;
}

/** One row per process start; an earlier boot of the same instanceId keeps its own row. */
export async function registerInstance(q: Queryable, info: InstanceInfo): Promise<void> {
  await q`
    insert into instances (boot_id, instance_id, host, pid, version)
    values (${info.bootId}, ${info.instanceId}, ${info.host}, ${info.pid}, ${info.version})`;
}

export async function heartbeatInstance(q: Queryable, bootId: string): Promise<void> {
  await q`update instances set heartbeat_at = now() where boot_id = ${bootId}`;
}

export async function markInstanceStopped(q: Queryable, bootId: string): Promise<void> {
  await q`update instances set stopped_at = now() where boot_id = ${bootId}`;
}

export interface InstanceRow extends InstanceInfo {
  startedAt: Date;
  heartbeatAt: Date;
  stoppedAt: Date | null;
  /** now() - heartbeat_at on the database clock, so gateways' clocks do not matter. */
  heartbeatAgeMs: number;
  /** Tasks this boot holds running or cancelling (its leases). */
  runningTasks: number;
}

/**
 * Instances heard from within `withinMs` (stopped ones included), live ones first, then the most
 * recent heartbeat first. Rows accumulate one per boot; the window keeps the list to what matters.
 */
export async function listInstances(q: Queryable, withinMs: number, limit: number): Promise<InstanceRow[]> {
  return withSets(q)<InstanceRow[]>`
    select i.boot_id, i.instance_id, i.host, i.pid, i.version, i.started_at, i.heartbeat_at, i.stopped_at,
           floor(extract(epoch from (now() - i.heartbeat_at)) * 1000)::int8::float8 as heartbeat_age_ms,
           (select count(*)::int from tasks t
            where t.owner_boot = i.boot_id and t.status in ${ACTIVE}) as running_tasks
    from instances i
    where i.heartbeat_at > now() - ${withinMs} * interval '1 millisecond'
    order by (i.stopped_at is null) desc, i.heartbeat_at desc
    limit ${limit}`;
}
