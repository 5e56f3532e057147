CREATE TABLE "transcript_chunks" (
	"session_id" uuid NOT NULL,
	"agent_session_id" text NOT NULL,
	"byte_offset" bigint NOT NULL,
	"bytes" "bytea" NOT NULL,
	"at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "transcript_chunks_session_id_agent_session_id_byte_offset_pk" PRIMARY KEY("session_id","agent_session_id","byte_offset")
);
--> statement-breakpoint
ALTER TABLE "transcript_chunks" ADD CONSTRAINT "transcript_chunks_session_id_sessions_id_fk" FOREIGN KEY ("session_id") REFERENCES "public"."sessions"("id") ON DELETE cascade ON UPDATE no action;