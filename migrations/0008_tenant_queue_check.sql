-- The admission gate's queue limits, the global one and each tenant's (README, Tenants: Quotas and
-- fairness), in one function so a pipelined admission decides both in SQL with one prepared
-- statement, as 0002 did for the global limit alone (0002's function stays for instances not yet
-- upgraded). When one of `task_ids` was inserted (by the calling transaction):
--   * MG429 when more than `max_queued` tasks are queued in all. Checked first, so a gateway with
--     one tenant (whose limit is the global one) refuses as it did before tenants existed.
--   * else MG430 when a tenant of those tasks now has more queued tasks than its limit: the
--     tenant's `queued` in `tenant_limits` ({"<tenant>": {"active": n, "queued": n}}), else
--     `max_queued` (a tenant no longer configured keeps the global limits). Only a tenant whose
--     limit is below the global one is counted: past the global check, no other can be over.
-- Tasks of other tenants never make a tenant's submit fail on its limit. The raise aborts the
-- transaction. See src/sql/gate-check.ts.
CREATE FUNCTION mooring_refuse_if_queues_overflow(task_ids uuid[], max_queued integer, tenant_limits jsonb) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  IF EXISTS (SELECT 1 FROM tasks WHERE id = ANY (task_ids))
     AND (SELECT count(*) FROM tasks WHERE status = 'queued') > max_queued THEN
    RAISE EXCEPTION 'the queue is full' USING ERRCODE = 'MG429';
  END IF;
  IF EXISTS (
    SELECT 1 FROM (SELECT DISTINCT tenant FROM tasks WHERE id = ANY (task_ids)) n
    WHERE coalesce((tenant_limits -> n.tenant ->> 'queued')::int, max_queued) < max_queued
      AND (SELECT count(*) FROM tasks q WHERE q.tenant = n.tenant AND q.status = 'queued')
          > coalesce((tenant_limits -> n.tenant ->> 'queued')::int, max_queued)) THEN
    RAISE EXCEPTION 'the tenant''s queue is full' USING ERRCODE = 'MG430';
  END IF;
END
$$;
