-- The admission gate's queue check (0008) made cheap for the common case, with the same refusals.
-- 0008's function ran once per submit (each submit is checked in its own savepoint, after its own
-- claim: src/domain/admission.ts) and cost ~0.2 ms even on an empty queue: its tenant condition
-- was re-planned on every call (Postgres kept choosing custom plans for it), and its counts read
-- every queued row. Now:
--   * it first looks up the submitted tasks that are still queued, by primary key; when the claim
--     that ran before it started them all (a gateway with room), nothing was added to the queue and
--     it returns: no count runs. A submit whose turn started at once is never refused for a full
--     queue (0008 refused it when the queue was already over a lowered limit);
--   * the counts stop at limit + 1 rows (whether the queue is over its limit is all it asks);
--   * each statement is a simple one, planned once per connection (plan_cache_mode).
-- The refusals are 0008's: MG429 when more than `max_queued` tasks are queued in all (checked
-- first), else MG430 when a tenant of the still-queued tasks has more queued than its limit
-- (`tenant_limits` {"<tenant>": {"queued": n}}, else `max_queued`; only a limit below the global
-- one is counted). See src/sql/gate-check.ts.
CREATE OR REPLACE FUNCTION mooring_refuse_if_queues_overflow(task_ids uuid[], max_queued integer, tenant_limits jsonb) RETURNS void
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
  waiting_tenants text[];
  waiting_tenant text;
  tenant_max integer;
BEGIN
  SELECT array_agg(DISTINCT tenant) INTO waiting_tenants
  FROM tasks WHERE id = ANY (task_ids) AND status = 'queued';
  IF waiting_tenants IS NULL THEN
    RETURN;
  END IF;
  IF (SELECT count(*) FROM (SELECT 1 FROM tasks WHERE status = 'queued' LIMIT max_queued + 1) q) > max_queued THEN
    RAISE EXCEPTION 'the queue is full' USING ERRCODE = 'MG429';
  END IF;
  FOREACH waiting_tenant IN ARRAY waiting_tenants LOOP
    tenant_max := coalesce((tenant_limits -> waiting_tenant ->> 'queued')::int, max_queued);
    IF tenant_max < max_queued
       AND (SELECT count(*) FROM (SELECT 1 FROM tasks WHERE tenant = waiting_tenant AND status = 'queued'
                                  LIMIT tenant_max + 1) q) > tenant_max THEN
      RAISE EXCEPTION 'the tenant''s queue is full' USING ERRCODE = 'MG430';
    END IF;
  END LOOP;
END
$$;
