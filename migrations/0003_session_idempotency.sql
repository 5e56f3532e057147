ALTER TABLE "sessions" ADD COLUMN "idempotency_key" text;--> statement-breakpoint
CREATE UNIQUE INDEX "sessions_idempotency_idx" ON "sessions" USING btree ("idempotency_key");