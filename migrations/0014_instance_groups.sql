ALTER TABLE "instances" ADD COLUMN "instance_group" text DEFAULT 'default' NOT NULL;--> statement-breakpoint
ALTER TABLE "instances" ADD COLUMN "drain_requested_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "sessions" ADD COLUMN "instance_group" text DEFAULT 'default' NOT NULL;--> statement-breakpoint
ALTER TABLE "tasks" ADD COLUMN "instance_group" text DEFAULT 'default' NOT NULL;