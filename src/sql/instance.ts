import type { Queryable } from "../db/client.js";
import { ACTIVE, UNFINISHED, taskWithStatusSets } from "./task-status-sets.js";

export interface InstanceInfo {
  bootId: string;
  instanceId: string;
  host: string;
  pid: number;
  version: string;
  /** MOORING_INSTANCE_GROUP: the sessions whose turns this boot may run (absent: `default`). */
  group?: string;
}

/**
 * One row per process start; an earlier boot of the same instanceId keeps its own row. Safe to
 * repeat: a registration retried after its answer was lost, or the row's service started again
 * after a stop, finds its row and makes it live again.
 */
export async function instanceRegister(q: Queryable, info: InstanceInfo): Promise<void> {
  await q`
    insert into instances (boot_id, instance_id, instance_group, host, pid, version)
    values (${info.bootId}, ${info.instanceId}, ${info.group ?? "default"}, ${info.host}, ${info.pid}, ${info.version})
    on conflict (boot_id) do update set stopped_at = null, heartbeat_at = now()`;
}

/**
 * The instance row's heartbeat, which also answers whether a drain was asked for this boot: the
 * drain's notification is a hint, and this read every MOORING_HEARTBEAT_MS is the guarantee.
 */
export async function instanceHeartbeat(q: Queryable, bootId: string): Promise<{ drainRequested: boolean }> {
  const [row] = await q<{ drainRequested: boolean }[]>`
    update instances set heartbeat_at = now() where boot_id = ${bootId}
    returning drain_requested_at is not null as drain_requested`;
  return { drainRequested: row?.drainRequested ?? false };
}

/**
 * Marks every live boot of `instanceId` (not stopped, heartbeat within `liveWithinMs`) as asked to
 * drain; returns their boot ids (none: no such live instance). Only live boots: a row left by a
 * killed boot would take the request and nobody would act on it. A repeated request keeps the
 * first time.
 */
export async function instanceRequestDrain(
  q: Queryable,
  instanceId: string,
  liveWithinMs: number,
): Promise<string[]> {
  const rows = await q<{ bootId: string }[]>`
    update instances set drain_requested_at = coalesce(drain_requested_at, now())
    where instance_id = ${instanceId} and stopped_at is null
      and heartbeat_at > now() - ${liveWithinMs} * interval '1 millisecond'
    returning boot_id`;
  return rows.map((r) => r.bootId);
}

/**
 * A drain begun here (SIGHUP) is recorded like one asked through the API, so the instance list
 * shows it and the group no longer counts this boot as one that takes its turns.
 */
export async function instanceMarkDraining(q: Queryable, bootId: string): Promise<void> {
  await q`update instances set drain_requested_at = coalesce(drain_requested_at, now()) where boot_id = ${bootId}`;
}

export async function instanceMarkStopped(q: Queryable, bootId: string): Promise<void> {
  await q`update instances set stopped_at = now() where boot_id = ${bootId}`;
}

export interface InstanceRow extends InstanceInfo {
  group: string;
  startedAt: Date;
  heartbeatAt: Date;
  stoppedAt: Date | null;
  drainRequestedAt: Date | null;
  /** now() - heartbeat_at on the database clock, so gateways' clocks do not matter. */
  heartbeatAgeMs: number;
  /** Tasks this boot holds running or cancelling (its leases). */
  runningTasks: number;
}

/**
 * Instances heard from within `withinMs` (stopped ones included), live ones first, then the most
 * recent heartbeat first. Rows accumulate one per boot; the window keeps the list to what matters.
 */
export async function instanceList(q: Queryable, withinMs: number, limit: number): Promise<InstanceRow[]> {
  return taskWithStatusSets(q)<InstanceRow[]>`
    select i.boot_id, i.instance_id, i.instance_group as group, i.host, i.pid, i.version, i.started_at, i.heartbeat_at, i.stopped_at, i.drain_requested_at,
           floor(extract(epoch from (now() - i.heartbeat_at)) * 1000)::int8::float8 as heartbeat_age_ms,
           (select count(*)::int from tasks t
            where t.owner_boot = i.boot_id and t.status in ${ACTIVE}) as running_tasks
    from instances i
    where i.heartbeat_at > now() - ${withinMs} * interval '1 millisecond'
    order by (i.stopped_at is null) desc, i.heartbeat_at desc
    limit ${limit}`;
}

/**
 * Of `groups`, those with at least one instance that takes their turns: live (not stopped,
 * heartbeat within `liveWithinMs`, the same rule as a `live` instance in GET /v1/instances) and not
 * draining (a draining instance claims nothing more). A queued turn of any other group waits for an
 * instance of its group to start (Task.waitingForGroup). Asked only for the groups of the queued
 * tasks being shown, so it reads a handful of instance rows.
 */
export async function instanceLiveGroups(
  q: Queryable,
  groups: string[],
  liveWithinMs: number,
): Promise<Set<string>> {
  if (groups.length === 0) return new Set();
  const rows = await q<{ group: string }[]>`
    select distinct instance_group as group from instances
    where instance_group = any(${groups}::text[]) and stopped_at is null and drain_requested_at is null
      and heartbeat_at > now() - ${liveWithinMs} * interval '1 millisecond'`;
  return new Set(rows.map((r) => r.group));
}

export interface GroupUsage {
  name: string;
  /** Distinct ids of the group's live instances that take its turns (draining ones left out). */
  instances: number;
  active: number;
  queued: number;
}

/**
 * The gate by instance group: every group with a live instance or with unfinished turns. The
 * counts are a view, not a limit: the gate's limits stay global (sql/task-claim.ts). A group
 * with queued turns and no instance is the one an operator must start an instance for.
 */
export async function instanceGroupUsage(q: Queryable, liveWithinMs: number): Promise<GroupUsage[]> {
  return taskWithStatusSets(q)<GroupUsage[]>`
    with live as (
      select instance_group as name, count(distinct instance_id)::int as instances from instances
      where stopped_at is null and drain_requested_at is null
        and heartbeat_at > now() - ${liveWithinMs} * interval '1 millisecond'
      group by instance_group
    ), work as (
      select instance_group as name,
             count(*) filter (where status in ${ACTIVE})::int as active,
             count(*) filter (where status = 'queued')::int as queued
      from tasks where status in ${UNFINISHED}
      group by instance_group
    )
    select coalesce(l.name, w.name) as name, coalesce(l.instances, 0) as instances,
           coalesce(w.active, 0) as active, coalesce(w.queued, 0) as queued
    from live l full join work w on w.name = l.name
    order by 1`;
}
