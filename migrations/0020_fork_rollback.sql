ALTER TABLE "sessions" ADD COLUMN "forked_from" jsonb;--> statement-breakpoint
ALTER TABLE "sessions" ADD COLUMN "rewind" jsonb;--> statement-breakpoint
ALTER TABLE "tasks" ADD COLUMN "agent_cursor" jsonb;--> statement-breakpoint
ALTER TABLE "tasks" ADD COLUMN "rolled_back_at" timestamp with time zone;--> statement-breakpoint
-- A fork copies its source's events (sql/fork-session.ts): those copies are history, not news,
-- so they must not reach webhooks a second time. The copying transaction sets mooring.copying.
DROP TRIGGER events_webhook_outbox ON events;--> statement-breakpoint
CREATE TRIGGER events_webhook_outbox AFTER INSERT ON events FOR EACH ROW
  WHEN (NEW.type IN ('task.completed', 'task.failed', 'task.cancelled', 'task.interrupted', 'task.expired',
                     'permission.requested', 'permission.resolved', 'session.reset')
        AND current_setting('mooring.copying', true) IS DISTINCT FROM 'on')
  EXECUTE FUNCTION mooring_webhook_outbox();
