DROP INDEX "sessions_idempotency_idx";--> statement-breakpoint
ALTER TABLE "sessions" ADD COLUMN "tenant" text DEFAULT 'default' NOT NULL;--> statement-breakpoint
ALTER TABLE "tasks" ADD COLUMN "tenant" text DEFAULT 'default' NOT NULL;--> statement-breakpoint
CREATE INDEX "sessions_tenant_created_idx" ON "sessions" USING btree ("tenant","created_at","id");--> statement-breakpoint
CREATE UNIQUE INDEX "sessions_tenant_idempotency_idx" ON "sessions" USING btree ("tenant","idempotency_key");--> statement-breakpoint
CREATE INDEX "tasks_tenant_created_idx" ON "tasks" USING btree ("tenant","created_at","id");--> statement-breakpoint
CREATE INDEX "tasks_tenant_queued_idx" ON "tasks" USING btree ("tenant","queue_order") WHERE status = 'queued';--> statement-breakpoint
CREATE INDEX "tasks_tenant_active_idx" ON "tasks" USING btree ("tenant") WHERE status in ('running', 'cancelling');