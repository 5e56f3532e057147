-- The ifBusy=reject rule as a function, so a pipelined admission decides it in SQL (as the queue
-- limit in 0002): raises SQLSTATE MG409 when the session is open, has a queued, running or
-- cancelling task, and no task of it already holds `idempotency_key` (a repeat answers with that
-- task instead). The raise aborts the transaction. See src/sql/session-busy.ts.
CREATE FUNCTION mooring_refuse_if_session_busy(p_session_id uuid, p_idempotency_key text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  IF EXISTS (SELECT 1 FROM sessions WHERE id = p_session_id AND archived_at IS NULL)
     AND NOT (p_idempotency_key IS NOT NULL AND EXISTS (
       SELECT 1 FROM tasks WHERE session_id = p_session_id AND idempotency_key = p_idempotency_key))
     AND EXISTS (
       SELECT 1 FROM tasks WHERE session_id = p_session_id AND status IN ('queued', 'running', 'cancelling')) THEN
    RAISE EXCEPTION 'the session is busy' USING ERRCODE = 'MG409';
  END IF;
END
$$;
