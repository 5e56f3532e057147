CREATE TABLE "checkpoints" (
	"session_id" uuid NOT NULL,
	"name" text NOT NULL,
	"task_id" uuid,
	"turn_index" integer,
	"revert_index" integer,
	"phase" text NOT NULL,
	"commit_sha" text NOT NULL,
	"store" text NOT NULL,
	"git_dir" text NOT NULL,
	"at_reconcile" boolean DEFAULT false NOT NULL,
	"skipped" jsonb DEFAULT '[]'::jsonb NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "checkpoints_session_id_name_pk" PRIMARY KEY("session_id","name")
);
--> statement-breakpoint
ALTER TABLE "sessions" ADD COLUMN "checkpoints" boolean DEFAULT true NOT NULL;--> statement-breakpoint
ALTER TABLE "checkpoints" ADD CONSTRAINT "checkpoints_session_id_sessions_id_fk" FOREIGN KEY ("session_id") REFERENCES "public"."sessions"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "checkpoints_task_idx" ON "checkpoints" USING btree ("task_id");