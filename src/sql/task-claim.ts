import type { Tx } from "../db/client.js";
import type { StoredEvent } from "./event-append.js";
import type { TaskRow } from "./task-row.js";
import { ACTIVE, taskWithStatusSets } from "./task-status-sets.js";

export interface Claimant {
  instanceId: string;
  bootId: string;
  leaseMs: number;
  /** MOORING_INSTANCE_GROUP: only tasks of this group are claimed (absent: `default`). */
  group?: string;
}

/** A claimed task with the `task.started` event appended for it in the same statement. */
export interface ClaimedTask {
  row: TaskRow;
  started: StoredEvent;
}

/**
 * Moves up to `limit` queued tasks to running for this instance. Called with the gate lock held,
 * so `maxActive - running` is exact, globally and per tenant. A task is runnable when its session
 * has nothing running and it is the head of its session's waiting turns (interrupting turns
 * first, then admission order), so a busy session's backlog never holds up other sessions.
 *
 * Among runnable tasks the claim is fair between tenants (docs/tenants.md, Quotas and fairness):
 * each free slot goes to the tenant with the fewest running turns, ties to the oldest queued turn,
 * never to a tenant at its own limit (`tenantLimits`, the directory's `limitsJson`: a tenant not
 * in it, e.g. rows left from an earlier configuration, has the global limit). Taking slots one by
 * one like that is the same as sorting the runnable tasks by (level, queue_order), where a
 * tenant's k-th runnable task (in admission order) has level `running + k - 1`: the running count
 * its tenant would have when that task is picked. Each tenant's next pick is its lowest level, so
 * the smallest (level, queue_order) over all tenants is always the next greedy pick. The tenant
 * cap is `level < maxActive`, the global cap the LIMIT. With one tenant the order is queue_order,
 * as before tenants existed.
 *
 * Why the query is shaped so: it never ranks the whole queue. `waiting` lists the tenants with
 * queued work by a loose index scan of tasks_tenant_queued_idx (one probe per tenant, not a read
 * of every queued row); for each tenant, `ranked` walks that tenant's queue in admission order
 * (the same index) and stops after the few runnable tasks it may still start (`room`), so the
 * rows sorted are at most tenants x min(limit, free room). The tenant is matched as a range
 * (`>= and <=`), not with `=`: with `=` the planner, taking the tenant for a constant, walks
 * tasks_queued_idx (admission order) filtering by tenant, expecting every tenant's turns spread
 * evenly through the queue; for a tenant whose turns all came after another's backlog (the case
 * fairness is for) that read the whole backlog (EXPLAIN: 2709 rows removed per tenant on 4000
 * queued). As a range, only tasks_tenant_queued_idx yields the (tenant, queue_order) order, and
 * the walk reads the few rows it returns. The window runs before the lock: a window function
 * cannot share a query level with FOR UPDATE. `FOR UPDATE SKIP LOCKED` passes
 * over rows another transaction is cancelling right now instead of waiting on them; a skipped row
 * still used its level, so such a claim may start one task fewer for its tenant (never one more).
 * The rows to lock are found by primary key (`id = any(array(...))`) rather than by joining the
 * queue: the planner cannot size `ranked` and hashed the whole queue for the join.
 *
 * EXPLAIN ANALYZE on 4000 queued tasks over 6 tenants (1000 sessions, 10000 finished tasks),
 * claiming 8: the tenants in 7 index probes, each tenant's walk 1 to 7 rows of
 * tasks_tenant_queued_idx, 34 rows sorted, 8 locked; the previous oldest-first claim read 8 rows
 * of tasks_queued_idx. docs/architecture.md, The gate, has the figures.
 *
 * The `task.started` event of every claimed task goes in with the claim, in the same statement:
 * one round trip however many tasks are claimed, while the gate lock is held (appending them one
 * by one afterwards cost a round trip per task under the lock; bench/results/history.md). Each
 * claimed task is the only one of its session (the head rule), so the session's `last_seq`
 * allocates exactly one seq, gap-free as in event-append.ts, and the task's first/last seq are
 * set by the claim's own update. The event's data is `startedEvent` (domain/task-events.ts)
 * built in SQL: `{attempt, deadlineAt}` with deadlineAt as JavaScript's toISOString writes it.
 *
 * Instance groups (MOORING_INSTANCE_GROUP): a session's workspace may exist on its group's hosts
 * only, so an instance claims only tasks of its own group. The condition sits in each tenant's walk
 * (`ranked`), not in `waiting`: the loose index scan stays one probe per tenant, and a tenant whose
 * queued work is all another group's yields an empty walk. The walk then passes over other groups'
 * queued rows of that tenant to find its own, which the queue limit bounds. The counts (`active`,
 * `free`, a tenant's running turns) stay global: the gate's limits are the whole deployment's, and
 * a group's turns take slots from every group alike.
 */
export async function taskClaim(
  tx: Tx,
  claimant: Claimant,
  maxActive: number,
  tenantLimits: string,
  limit: number,
): Promise<ClaimedTask[]> {
  if (limit <= 0) return [];
  const rows = await taskWithStatusSets(tx)<
    (TaskRow & { eventSeq: number; eventAt: Date; eventData: unknown })[]
  >`
    with recursive active as (
      select tenant, count(*)::int as n from tasks where status in ${ACTIVE} group by tenant
    ), free as (
      select greatest(${maxActive} - coalesce(sum(n), 0), 0) as n from active
    ), waiting as (
      (select tenant from tasks where status = 'queued' order by tenant limit 1)
      union all
      select (select t.tenant from tasks t where t.status = 'queued' and t.tenant > w.tenant order by t.tenant limit 1)
      from waiting w where w.tenant is not null
    ), room as (
      select w.tenant, coalesce(a.n, 0) as running,
             least(${limit}, coalesce((${tenantLimits}::text::jsonb -> w.tenant ->> 'active')::int, ${maxActive}) - coalesce(a.n, 0)) as n
      from waiting w left join active a on a.tenant = w.tenant
      where w.tenant is not null
    ), ranked as (
      select h.id, r.running + h.rank - 1 as level, h.queue_order
      from room r cross join lateral (
        select t.id, t.queue_order, row_number() over (order by t.tenant, t.queue_order) as rank
        from tasks t
        where t.tenant >= r.tenant and t.tenant <= r.tenant and t.status = 'queued'
          and t.instance_group = ${claimant.group ?? "default"}
          and not exists (select 1 from tasks x where x.session_id = t.session_id and x.status in ${ACTIVE})
          and not exists (
            select 1 from tasks h where h.session_id = t.session_id and h.status = 'queued' and h.id <> t.id
              and (h.jumps_queue, -h.queue_order) > (t.jumps_queue, -t.queue_order))
        order by t.tenant, t.queue_order
        limit greatest(r.n, 0)
      ) h
    ), candidates as (
      select t.id, t.session_id from tasks t join ranked k on k.id = t.id
      where t.id = any(array(select id from ranked)) and t.status = 'queued'
      order by k.level, k.queue_order
      limit least(${limit}, (select n from free))
      for update of t skip locked
    ), clock as (
      -- The moment of the claim, not now() (the start of a transaction that may have waited on the
      -- gate lock): startedAt then follows claim order, and the run deadline counts from the start.
      select clock_timestamp() as at
    ), heads as (
      update sessions s set last_seq = s.last_seq + 1, last_activity_at = now(), updated_at = now()
      from candidates c where s.id = c.session_id
      returning s.id as session_id, s.last_seq as seq
    ), claimed as (
      update tasks t set
        status = 'running', attempt = t.attempt + 1, started_at = k.at,
        deadline_at = k.at + make_interval(secs => t.timeout_ms / 1000.0),
        owner_instance = ${claimant.instanceId}, owner_boot = ${claimant.bootId},
        lease_expires_at = k.at + make_interval(secs => ${claimant.leaseMs} / 1000.0),
        first_seq = coalesce(t.first_seq, h.seq), last_seq = h.seq,
        version = t.version + 1
      from candidates c, clock k, heads h where t.id = c.id and h.session_id = c.session_id
      returning t.*
    ), started as (
      insert into events (session_id, seq, task_id, type, data)
      select c.session_id, c.last_seq, c.id, 'task.started',
             jsonb_build_object('attempt', c.attempt,
               'deadlineAt', to_char(c.deadline_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))
      from claimed c
      returning task_id, seq, at, data
    )
    select c.*, e.seq as event_seq, e.at as event_at, e.data as event_data
    from claimed c join started e on e.task_id = c.id
    order by c.queue_order`;
  return rows.map(({ eventSeq, eventAt, eventData, ...row }) => ({
    row: row as TaskRow,
    started: {
      sessionId: row.sessionId,
      seq: eventSeq,
      taskId: row.id,
      type: "task.started",
      at: eventAt,
      data: eventData,
    },
  }));
}
