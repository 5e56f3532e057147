-- Retention (docs/operations.md, Retention): the sweep finds archived sessions past their
-- retention through a partial index on archived_at (archived rows only), and a purge deletes a
-- session's webhook deliveries by session_id (sql/purge-sessions.ts).
CREATE INDEX "sessions_archived_idx" ON "sessions" USING btree ("archived_at") WHERE archived_at is not null;--> statement-breakpoint
CREATE INDEX "webhook_deliveries_session_idx" ON "webhook_deliveries" USING btree ("session_id");