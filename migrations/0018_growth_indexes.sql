-- Found by the growth benchmark's plans (bench/growth.ts, bench/results/notes.md, Growth): a page
-- of GET /v1/sessions read and sorted every session (its order, the creation time cut to the
-- millisecond, matched no index), and the counts of unfinished turns (the gate, every submit)
-- read every task ever run (no partial index matched `status in ('queued', 'running',
-- 'cancelling')`). The page indexes replace the ones on created_at, which nothing else used.
DROP INDEX "sessions_created_idx";--> statement-breakpoint
DROP INDEX "sessions_tenant_created_idx";--> statement-breakpoint
CREATE INDEX "sessions_page_idx" ON "sessions" USING btree (date_trunc('milliseconds', ("created_at" at time zone 'UTC')),"id");--> statement-breakpoint
CREATE INDEX "sessions_tenant_page_idx" ON "sessions" USING btree ("tenant",date_trunc('milliseconds', ("created_at" at time zone 'UTC')),"id");--> statement-breakpoint
CREATE INDEX "tasks_unfinished_idx" ON "tasks" USING btree ("session_id") WHERE status in ('queued', 'running', 'cancelling');