-- Wake on commit (docs/api.md, Webhooks): the outbox trigger of 0010 now also notifies
-- mooring_webhooks when it wrote a delivery, so every instance's delivery worker claims at once
-- instead of at its next poll (the poll stays the guarantee). Delivered at commit or never, like
-- the rows. Postgres folds equal notifications of one transaction into one. Only transactions
-- that announce a webhook event to a configured endpoint notify: the event-log flushes that carry
-- them already notify mooring_sessions inside their transaction, so the commit-time lock a
-- NOTIFY takes is not a new cost there; the rest (sweeps, cancels, expiry) are rare.
CREATE OR REPLACE FUNCTION mooring_webhook_outbox() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  v_tenant text;
  v_status text;
  v_url text;
  v_body text;
  v_added boolean;
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
  v_added := FOUND;
  IF v_url IS NOT NULL THEN
    INSERT INTO webhook_deliveries (tenant, endpoint_id, url, event_type, session_id, seq, body)
    VALUES (v_tenant, NULL, v_url, NEW.type, NEW.session_id, NEW.seq, v_body);
    v_added := true;
  END IF;
  IF v_added THEN
    PERFORM pg_notify('mooring_webhooks', '');
  END IF;
  RETURN NULL;
END;
$$;
