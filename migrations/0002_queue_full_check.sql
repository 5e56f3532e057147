-- The admission gate's queue limit as a function, so a pipelined submit can decide it in SQL with
-- one prepared statement (a DO block takes no parameters and is parsed and compiled on every call).
-- Raises SQLSTATE MG429 when one of `task_ids` was inserted (by the calling transaction) and more
-- than `max_queued` tasks are queued; the raise aborts the transaction. See src/sql/gate-check.ts.
CREATE FUNCTION mooring_refuse_if_queue_overflows(task_ids uuid[], max_queued integer) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  IF EXISTS (SELECT 1 FROM tasks WHERE id = ANY (task_ids))
     AND (SELECT count(*) FROM tasks WHERE status = 'queued') > max_queued THEN
    RAISE EXCEPTION 'the queue is full' USING ERRCODE = 'MG429';
  END IF;
END
$$;
