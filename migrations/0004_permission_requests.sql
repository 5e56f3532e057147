CREATE TABLE "permission_requests" (
	"id" uuid PRIMARY KEY NOT NULL,
	"task_id" uuid NOT NULL,
	"session_id" uuid NOT NULL,
	"tool_call" jsonb NOT NULL,
	"options" jsonb NOT NULL,
	"expires_at" timestamp with time zone NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"resolved_at" timestamp with time zone,
	"option_id" text,
	"resolved_by" text,
	"message" text,
	"answers" jsonb,
	"answered_by" text
);
--> statement-breakpoint
ALTER TABLE "permission_requests" ADD CONSTRAINT "permission_requests_task_id_tasks_id_fk" FOREIGN KEY ("task_id") REFERENCES "public"."tasks"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "permission_requests_task_idx" ON "permission_requests" USING btree ("task_id");--> statement-breakpoint
CREATE INDEX "permission_requests_pending_idx" ON "permission_requests" USING btree ("task_id") WHERE resolved_at is null;