CREATE TABLE "events" (
	"session_id" uuid NOT NULL,
	"seq" bigint NOT NULL,
	"task_id" uuid,
	"type" text NOT NULL,
	"at" timestamp with time zone DEFAULT now() NOT NULL,
	"data" jsonb NOT NULL,
	"payload" jsonb,
	CONSTRAINT "events_session_id_seq_pk" PRIMARY KEY("session_id","seq")
);
--> statement-breakpoint
CREATE TABLE "instances" (
	"boot_id" uuid PRIMARY KEY NOT NULL,
	"instance_id" text NOT NULL,
	"host" text NOT NULL,
	"pid" integer NOT NULL,
	"version" text NOT NULL,
	"started_at" timestamp with time zone DEFAULT now() NOT NULL,
	"heartbeat_at" timestamp with time zone DEFAULT now() NOT NULL,
	"stopped_at" timestamp with time zone
);
--> statement-breakpoint
CREATE TABLE "sessions" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"workspace" text NOT NULL,
	"agent" text NOT NULL,
	"agent_config" jsonb DEFAULT '{}'::jsonb NOT NULL,
	"title" text,
	"metadata" jsonb DEFAULT '{}'::jsonb NOT NULL,
	"archived_at" timestamp with time zone,
	"agent_session_id" text,
	"turn_count" integer DEFAULT 0 NOT NULL,
	"last_assistant_message_id" text,
	"past_agent_session_ids" jsonb DEFAULT '[]'::jsonb NOT NULL,
	"context_usage" jsonb,
	"last_seq" bigint DEFAULT 0 NOT NULL,
	"pruned_seq" bigint DEFAULT 0 NOT NULL,
	"next_turn_index" integer DEFAULT 0 NOT NULL,
	"version" integer DEFAULT 0 NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	"last_activity_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "tasks" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"session_id" uuid NOT NULL,
	"turn_index" integer NOT NULL,
	"status" text NOT NULL,
	"prompt" text NOT NULL,
	"idempotency_key" text,
	"queue_order" bigserial NOT NULL,
	"jumps_queue" boolean DEFAULT false NOT NULL,
	"load_class" text,
	"timeout_ms" integer NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"queue_deadline_at" timestamp with time zone NOT NULL,
	"started_at" timestamp with time zone,
	"deadline_at" timestamp with time zone,
	"finished_at" timestamp with time zone,
	"attempt" integer DEFAULT 0 NOT NULL,
	"owner_instance" text,
	"owner_boot" uuid,
	"lease_expires_at" timestamp with time zone,
	"cancel_requested_at" timestamp with time zone,
	"result" jsonb,
	"error" jsonb,
	"first_seq" bigint,
	"last_seq" bigint,
	"continues_task_id" uuid,
	"version" integer DEFAULT 0 NOT NULL
);
--> statement-breakpoint
ALTER TABLE "tasks" ADD CONSTRAINT "tasks_session_id_sessions_id_fk" FOREIGN KEY ("session_id") REFERENCES "public"."sessions"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "sessions_workspace_idx" ON "sessions" USING btree ("workspace");--> statement-breakpoint
CREATE INDEX "sessions_created_idx" ON "sessions" USING btree ("created_at","id");--> statement-breakpoint
CREATE UNIQUE INDEX "tasks_idempotency_idx" ON "tasks" USING btree ("session_id","idempotency_key");--> statement-breakpoint
CREATE INDEX "tasks_queued_idx" ON "tasks" USING btree ("queue_order") WHERE status = 'queued';--> statement-breakpoint
CREATE INDEX "tasks_session_queued_idx" ON "tasks" USING btree ("session_id","queue_order") WHERE status = 'queued';--> statement-breakpoint
CREATE INDEX "tasks_active_idx" ON "tasks" USING btree ("session_id") WHERE status in ('running', 'cancelling');--> statement-breakpoint
CREATE INDEX "tasks_lease_idx" ON "tasks" USING btree ("lease_expires_at") WHERE status in ('running', 'cancelling');--> statement-breakpoint
CREATE INDEX "tasks_session_idx" ON "tasks" USING btree ("session_id","turn_index");--> statement-breakpoint
CREATE INDEX "tasks_created_idx" ON "tasks" USING btree ("created_at","id");