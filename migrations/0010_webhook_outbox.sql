-- The webhook outbox (docs/api.md, Webhooks). Every event that a webhook may announce is appended
-- through an INSERT into events, whichever path commits it (the event log's flush, a settlement,
-- the sweeper, cancel, expiry, recovery): this trigger is the one place that turns such an event
-- into delivery rows, inside the same transaction, so a crash after the commit loses nothing.
-- It fires only for the announced types (WHEN), so the other events pay nothing. One row per
-- configured endpoint of the session's tenant subscribed to the type, and one for the turn's own
-- webhook URL (tasks.webhook_url). The body is the thin payload, fixed here: retries send it
-- byte for byte, so the signature covers the same bytes every time.
CREATE FUNCTION mooring_webhook_outbox() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  v_tenant text;
  v_status text;
  v_url text;
  v_body text;
BEGIN
  SELECT s.tenant INTO v_tenant FROM sessions s WHERE s.id = NEW.session_id;
  SELECT t.status, t.webhook_url INTO v_status, v_url FROM tasks t WHERE t.id = NEW.task_id;
  v_body := jsonb_build_object(
    'type', NEW.type,
    'timestamp', to_char(NEW.at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
    'data', jsonb_strip_nulls(jsonb_build_object(
      'tenant', v_tenant,
      'sessionId', NEW.session_id,
      'taskId', NEW.task_id,
      'status', coalesce(NEW.data->>'status', v_status),
      'seq', NEW.seq,
      'error', CASE WHEN NEW.data->'error'->>'code' IS NOT NULL
                    THEN jsonb_build_object('code', NEW.data->'error'->>'code') END,
      'requestId', NEW.data->>'requestId'
    ))
  )::text;
  INSERT INTO webhook_deliveries (tenant, endpoint_id, url, event_type, session_id, seq, body)
  SELECT v_tenant, e.id, e.url, NEW.type, NEW.session_id, NEW.seq, v_body
  FROM webhook_endpoints e
  WHERE e.tenant = v_tenant AND NEW.type = ANY (e.events);
  IF v_url IS NOT NULL THEN
    INSERT INTO webhook_deliveries (tenant, endpoint_id, url, event_type, session_id, seq, body)
    VALUES (v_tenant, NULL, v_url, NEW.type, NEW.session_id, NEW.seq, v_body);
  END IF;
  RETURN NULL;
END;
$$;
--> statement-breakpoint
CREATE TRIGGER events_webhook_outbox AFTER INSERT ON events FOR EACH ROW
  WHEN (NEW.type IN ('task.completed', 'task.failed', 'task.cancelled', 'task.interrupted', 'task.expired',
                     'permission.requested', 'permission.resolved', 'session.reset'))
  EXECUTE FUNCTION mooring_webhook_outbox();
