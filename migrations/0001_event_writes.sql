CREATE TABLE "event_writes" (
	"write_id" uuid PRIMARY KEY NOT NULL,
	"at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE INDEX "event_writes_at_idx" ON "event_writes" USING btree ("at");