/**
 * The durable state of mooring (drizzle schema; `npm run db:generate` writes the migration SQL).
 * Sessions own a gap-free event sequence; tasks are the turns; instances are the gateway
 * processes that own running tasks through leases.
 */
import { sql } from "drizzle-orm";
import {
  bigint,
  customType,
  bigserial,
  boolean,
  index,
  integer,
  jsonb,
  pgTable,
  primaryKey,
  text,
  timestamp,
  uniqueIndex,
  uuid,
} from "drizzle-orm/pg-core";
import type { AnyPgColumn } from "drizzle-orm/pg-core";
import {
  activeStatuses,
  type TaskStatus,
  terminalStatuses,
  unfinishedStatuses,
} from "../contract/task-status.js";

/**
 * A status set as the SQL list a partial index's predicate names, `('running', 'cancelling')`: the
 * text sql/task-status-sets.ts splices into the statements that must match these indexes.
 */
const statusList = (statuses: readonly TaskStatus[]) =>
  sql.raw(`(${statuses.map((s) => `'${s}'`).join(", ")})`);
const ACTIVE = statusList(activeStatuses);
const TERMINAL = statusList(terminalStatuses);
const UNFINISHED = statusList(unfinishedStatuses);

/**
 * A session's place in a list page: its creation time cut to the millisecond (what a page cursor
 * carries, domain/page-cursor.ts), in UTC so that the expression is immutable and can be indexed.
 * sql/session-read.ts orders and compares by this exact expression.
 */
const pageTime = (createdAt: AnyPgColumn) =>
  sql`date_trunc('milliseconds', (${createdAt} at time zone 'UTC'))`;

/**
 * A branch or truncation of the agent's conversation the next turn must make first (a fork, a
 * rollback; docs/api.md, Fork and rollback). Stored on the session; the drivers read it from the
 * resume cursor (agents/driver.ts) and save the cursor without it once they applied it.
 */
export interface Rewind {
  kind: "fork" | "rollback";
  /** The agent conversation to branch from, as it stood at the kept turn's end; null: none (start fresh). */
  agentSessionId: string | null;
  /** The last assistant message to keep in it; null: none known (start fresh). */
  messageId: string | null;
  /** The last mooring turn kept (-1: none). */
  turnIndex: number;
  /**
   * A fork taken at the newest state of the source's agent conversation (its last turn, no rewind
   * of its own pending): an agent that can only fork a conversation whole (ACP `session/fork`) may
   * branch it. Absent or false: only a branch at `messageId`, or the carried history, is right.
   */
  atSourceHead?: boolean;
}

const ts = (name: string) => timestamp(name, { withTimezone: true, mode: "date" });

export const sessions = pgTable(
  "sessions",
  {
    id: uuid("id").primaryKey().defaultRandom(),
    /** The tenant of the token that created it (docs/tenants.md); `default` without MOORING_TENANTS. */
    tenant: text("tenant").notNull().default("default"),
    /**
     * The instance group whose instances run its turns (MOORING_INSTANCE_GROUP of the instance that
     * created it, or an admin's choice): its workspace exists on those hosts only.
     */
    instanceGroup: text("instance_group").notNull().default("default"),
    /** Normalized absolute path (docs/api.md, Resources and states). */
    workspace: text("workspace").notNull(),
    /** Registered agent name. */
    agent: text("agent").notNull(),
    agentConfig: jsonb("agent_config").$type<Record<string, unknown>>().notNull().default({}),
    title: text("title"),
    metadata: jsonb("metadata").$type<Record<string, unknown>>().notNull().default({}),
    /** A client's key for its create request: a retried create finds the session it made. */
    idempotencyKey: text("idempotency_key"),
    archivedAt: ts("archived_at"),
    /** Resume cursor (docs/api.md, Restarts, resume and recovery), written by guarded updates from what the agent reports. */
    agentSessionId: text("agent_session_id"),
    turnCount: integer("turn_count").notNull().default(0),
    lastAssistantMessageId: text("last_assistant_message_id"),
    pastAgentSessionIds: jsonb("past_agent_session_ids").$type<string[]>().notNull().default([]),
    contextUsage: jsonb("context_usage").$type<{
      inputTokens: number;
      contextWindow: number;
      percent: number;
    }>(),
    /** Last event seq handed out; the next event of the session gets lastSeq + 1. */
    lastSeq: bigint("last_seq", { mode: "number" }).notNull().default(0),
    /** Events with seq <= this were pruned; a cursor before it must resync. */
    prunedSeq: bigint("pruned_seq", { mode: "number" }).notNull().default(0),
    /** Turns submitted so far; the next task gets this as its turnIndex. */
    nextTurnIndex: integer("next_turn_index").notNull().default(0),
    /** Bumped by every guarded write of the cursor/context fields. */
    version: integer("version").notNull().default(0),
    /** A fork's source: `{sessionId, turnIndex}` (docs/api.md, Fork and rollback); null otherwise. */
    forkedFrom: jsonb("forked_from").$type<{ sessionId: string; turnIndex: number }>(),
    /**
     * What the agent must do to its conversation before the next turn (a fork's branch, a
     * rollback's truncation; domain/changes/fork.ts, rollback.ts), cleared by the first cursor
     * save that applied it.
     */
    rewind: jsonb("rewind").$type<Rewind>(),
    createdAt: ts("created_at").notNull().defaultNow(),
    updatedAt: ts("updated_at").notNull().defaultNow(),
    lastActivityAt: ts("last_activity_at").notNull().defaultNow(),
    /** Workspace checkpoints before and after each turn (docs/api.md, Workspace checkpoints); false: none. */
    checkpoints: boolean("checkpoints").notNull().default(true),
  },
  (t) => [
    index("sessions_workspace_idx").on(t.workspace),
    // List pages, newest first (sql/session-read.ts): an admin's, and a tenant's. On created_at
    // itself they could not give the page order, so every page read and sorted all the sessions.
    index("sessions_page_idx").on(pageTime(t.createdAt), t.id),
    index("sessions_tenant_page_idx").on(t.tenant, pageTime(t.createdAt), t.id),
    // Idempotency keys are per tenant: two tenants using one key get two sessions.
    uniqueIndex("sessions_tenant_idempotency_idx").on(t.tenant, t.idempotencyKey),
    // The retention sweep's scan (sql/session-purge.ts): archived sessions only, oldest archive first.
    index("sessions_archived_idx").on(t.archivedAt).where(sql`archived_at is not null`),
  ],
);

export const tasks = pgTable(
  "tasks",
  {
    id: uuid("id").primaryKey().defaultRandom(),
    sessionId: uuid("session_id")
      .notNull()
      .references(() => sessions.id),
    /** Its session's tenant, copied at insert so quotas and fair claiming need no join. */
    tenant: text("tenant").notNull().default("default"),
    /** Its session's instance group, copied at insert so the claim and the lease sweep need no join. */
    instanceGroup: text("instance_group").notNull().default("default"),
    turnIndex: integer("turn_index").notNull(),
    /** queued | running | cancelling | completed | failed | cancelled | expired | interrupted */
    status: text("status").notNull(),
    prompt: text("prompt").notNull(),
    idempotencyKey: text("idempotency_key"),
    /** Global FIFO order of admission. */
    queueOrder: bigserial("queue_order", { mode: "number" }).notNull(),
    /** Set by ifBusy=interrupt: runs before the session's other waiting turns. */
    jumpsQueue: boolean("jumps_queue").notNull().default(false),
    loadClass: text("load_class"),
    timeoutMs: integer("timeout_ms").notNull(),
    createdAt: ts("created_at").notNull().defaultNow(),
    queueDeadlineAt: ts("queue_deadline_at").notNull(),
    startedAt: ts("started_at"),
    deadlineAt: ts("deadline_at"),
    finishedAt: ts("finished_at"),
    /** Incremented by every claim; fences writes of an older run. */
    attempt: integer("attempt").notNull().default(0),
    ownerInstance: text("owner_instance"),
    ownerBoot: uuid("owner_boot"),
    leaseExpiresAt: ts("lease_expires_at"),
    cancelRequestedAt: ts("cancel_requested_at"),
    result: jsonb("result"),
    error: jsonb("error"),
    firstSeq: bigint("first_seq", { mode: "number" }),
    lastSeq: bigint("last_seq", { mode: "number" }),
    /** The interrupted task this one continues (MOORING_RECOVERY=continue). */
    continuesTaskId: uuid("continues_task_id"),
    /**
     * A chained turn's upstream task (driver `mooring`): `{taskId, position, queueDeadlineAt,
     * retryAt?, released?}`, written by the owner as the upstream reports it (sql/task-upstream.ts).
     */
    upstream: jsonb("upstream"),
    /**
     * Where the agent's conversation stood when the turn ended (`{agentSessionId,
     * lastAssistantMessageId}` of the session's cursor at settlement): the point a fork or a
     * rollback branches the agent's conversation at.
     */
    agentCursor: jsonb("agent_cursor").$type<{
      agentSessionId: string | null;
      lastAssistantMessageId: string | null;
    }>(),
    /** Set by a rollback: the turn is no longer part of the conversation (its events stay). */
    rolledBackAt: ts("rolled_back_at"),
    /** A turn's own webhook URL (`webhook.url` of its submit, inside its tenant's prefixes), or null. */
    webhookUrl: text("webhook_url"),
    /**
     * When the running turn stopped taking steered input (`turn.input`), just before it settles: a
     * steer is accepted only while this is null and the task runs (sql/task-inputs.ts).
     */
    inputClosedAt: ts("input_closed_at"),
    /**
     * The turn's W3C trace context (a `traceparent`): the submit's span, under the client's own
     * traceparent when it sent one; null when neither tracing nor the client gave one. Whoever
     * claims, settles or delivers the turn continues this trace (docs/operations.md, Tracing).
     */
    traceContext: text("trace_context"),
    version: integer("version").notNull().default(0),
  },
  (t) => [
    uniqueIndex("tasks_idempotency_idx").on(t.sessionId, t.idempotencyKey),
    index("tasks_queued_idx").on(t.queueOrder).where(sql`status = 'queued'`),
    index("tasks_session_queued_idx").on(t.sessionId, t.queueOrder).where(sql`status = 'queued'`),
    index("tasks_active_idx").on(t.sessionId).where(sql`status in ${ACTIVE}`),
    index("tasks_lease_idx").on(t.leaseExpiresAt).where(sql`status in ${ACTIVE}`),
    index("tasks_session_idx").on(t.sessionId, t.turnIndex),
    // The unfinished turns (queued, running, cancelling), which the gate keeps few: counted per
    // tenant and group by the gate and by every submit, and probed per session for its status.
    // Neither tasks_queued_idx nor tasks_active_idx matches `status in (all three)`, so those
    // counts read every task ever run (bench/results/notes.md, Growth).
    index("tasks_unfinished_idx").on(t.sessionId).where(sql`status in ${UNFINISHED}`),
    index("tasks_created_idx").on(t.createdAt, t.id),
    index("tasks_tenant_created_idx").on(t.tenant, t.createdAt, t.id),
    // Per-tenant queue and running counts (quotas) and the fair claim's per-tenant queue heads.
    index("tasks_tenant_queued_idx").on(t.tenant, t.queueOrder).where(sql`status = 'queued'`),
    index("tasks_tenant_active_idx").on(t.tenant).where(sql`status in ${ACTIVE}`),
    // Ended chained turns whose upstream task was not let go of yet (domain/upstream-orphans.ts).
    index("tasks_upstream_orphans_idx")
      .on(t.finishedAt)
      .where(
        sql`status in ${TERMINAL} and upstream->>'taskId' is not null and upstream->>'released' is null`,
      ),
  ],
);

export const events = pgTable(
  "events",
  {
    sessionId: uuid("session_id").notNull(),
    seq: bigint("seq", { mode: "number" }).notNull(),
    taskId: uuid("task_id"),
    type: text("type").notNull(),
    at: ts("at").notNull().defaultNow(),
    /** What clients see: large tool input/output replaced by previews. */
    data: jsonb("data").notNull(),
    /** The full payload behind a preview, fetched on demand; null when nothing was cut. */
    payload: jsonb("payload"),
  },
  (t) => [primaryKey({ columns: [t.sessionId, t.seq] })],
);

export const instances = pgTable("instances", {
  /** One row per process start. */
  bootId: uuid("boot_id").primaryKey(),
  instanceId: text("instance_id").notNull(),
  /** MOORING_INSTANCE_GROUP of this boot. */
  instanceGroup: text("instance_group").notNull().default("default"),
  host: text("host").notNull(),
  pid: integer("pid").notNull(),
  version: text("version").notNull(),
  startedAt: ts("started_at").notNull().defaultNow(),
  heartbeatAt: ts("heartbeat_at").notNull().defaultNow(),
  stoppedAt: ts("stopped_at"),
  /**
   * Set by `POST /v1/instances/:instanceId/drain`: the boot reads it back with its heartbeat (the
   * notification that also carries it is only a hint) and drains.
   */
  drainRequestedAt: ts("drain_requested_at"),
});

/**
 * One row per committed event-log flush. A flush whose commit answer was lost (the connection
 * died after COMMIT reached the server) looks failed to the writer; before retrying, the writer
 * asks here whether it landed, so a retry never appends the same events twice. Pruned by the sweep.
 */
export const eventWrites = pgTable(
  "event_writes",
  {
    writeId: uuid("write_id").primaryKey(),
    at: ts("at").notNull().defaultNow(),
  },
  (t) => [index("event_writes_at_idx").on(t.at)],
);

/**
 * An agent's request for permission (a tool call a person must allow or deny), durable so that
 * any instance can take the answer: the answer is written here by a conditional update (the first
 * one wins), and the instance running the turn learns it by a notification or its poll.
 */
export const permissionRequests = pgTable(
  "permission_requests",
  {
    /** The requestId clients answer. */
    id: uuid("id").primaryKey(),
    taskId: uuid("task_id")
      .notNull()
      .references(() => tasks.id),
    sessionId: uuid("session_id").notNull(),
    /** `{id, name, title, kind, input}`, input whole up to MOORING_PERMISSION_INPUT_MAX_BYTES (else a preview, `truncated`). */
    toolCall: jsonb("tool_call").notNull(),
    /** `[{optionId, name, kind}]` as offered. */
    options: jsonb("options").$type<{ optionId: string; name: string; kind: string }[]>().notNull(),
    expiresAt: ts("expires_at").notNull(),
    createdAt: ts("created_at").notNull().defaultNow(),
    /** Null while pending. */
    resolvedAt: ts("resolved_at"),
    optionId: text("option_id"),
    /** client | timeout | cancel | restart */
    resolvedBy: text("resolved_by"),
    message: text("message"),
    answers: jsonb("answers"),
    /** Who answered (a token's name or tenant), for the log; never a token. */
    answeredBy: text("answered_by"),
  },
  (t) => [
    index("permission_requests_task_idx").on(t.taskId),
    index("permission_requests_pending_idx").on(t.taskId).where(sql`resolved_at is null`),
  ],
);

/**
 * The webhook endpoints configured on the instances (MOORING_WEBHOOKS, a tenant's `webhooks`),
 * written at start (sql/webhook-endpoints.ts) so that the outbox trigger can match events to
 * them inside the committing transaction. No secret is stored: the sender holds them in memory.
 */
export const webhookEndpoints = pgTable("webhook_endpoints", {
  /** sha256 of tenant, url and events: the same configuration on every instance has the same id. */
  id: text("id").primaryKey(),
  tenant: text("tenant").notNull(),
  url: text("url").notNull(),
  events: text("events").array().notNull(),
  updatedAt: ts("updated_at").notNull().defaultNow(),
});

/**
 * The webhook outbox: one row per (endpoint or turn URL, event), inserted by the trigger on
 * `events` in the transaction that appends the event (migrations/0010_webhook_outbox.sql), and
 * sent by any instance (sql/webhook-deliveries.ts). Its id is the `webhook-id` of every attempt.
 */
export const webhookDeliveries = pgTable(
  "webhook_deliveries",
  {
    id: uuid("id").primaryKey().defaultRandom(),
    tenant: text("tenant").notNull(),
    /** The configured endpoint, or null for a turn's own `webhook.url`. */
    endpointId: text("endpoint_id"),
    url: text("url").notNull(),
    eventType: text("event_type").notNull(),
    sessionId: uuid("session_id").notNull(),
    seq: bigint("seq", { mode: "number" }).notNull(),
    /** The thin body `{type, timestamp, data}` exactly as it is signed and sent. */
    body: text("body").notNull(),
    /** `pending` (due at next_attempt_at), `delivered` or `failed` (its schedule ran out). */
    status: text("status").notNull().default("pending"),
    attempts: integer("attempts").notNull().default(0),
    nextAttemptAt: ts("next_attempt_at").defaultNow(),
    /** Held by the instance sending it until then (a crashed sender's claim runs out). */
    leaseUntil: ts("lease_until"),
    lastStatusCode: integer("last_status_code"),
    /** The first bytes of the receiver's answer, or what went wrong (timeout, refused, redirect). */
    lastResponse: text("last_response"),
    lastAttemptAt: ts("last_attempt_at"),
    createdAt: ts("created_at").notNull().defaultNow(),
  },
  (t) => [
    index("webhook_deliveries_due_idx").on(t.nextAttemptAt).where(sql`status = 'pending'`),
    index("webhook_deliveries_tenant_idx").on(t.tenant, t.createdAt, t.id),
    // No index on lease_until (0022 dropped webhook_deliveries_leased_idx): the claim counts each
    // URL's deliveries in flight from the pending rows it reads anyway (due_idx), and its UPDATE,
    // which sets only lease_until, stays a HOT update (fillfactor: migrations/0023).
    // A purged session's deliveries (sql/session-purge.ts).
    index("webhook_deliveries_session_idx").on(t.sessionId),
  ],
);

/** Raw bytes (Postgres `bytea`), read and written as a Buffer. */
const bytea = customType<{ data: Buffer }>({ dataType: () => "bytea" });

/**
 * A claude-code conversation's transcript file (`<config dir>/projects/<cwd>/<id>.jsonl`), kept
 * as appended chunks keyed by their byte offset in the file, so that another host can write it back
 * before `--resume` (docs/claude-code.md, Transcript store; sql/transcript-chunks.ts). Part of its
 * session: deleted with it, never served to clients.
 */
export const transcriptChunks = pgTable(
  "transcript_chunks",
  {
    sessionId: uuid("session_id")
      .notNull()
      .references(() => sessions.id, { onDelete: "cascade" }),
    /** The agent's conversation id: the file's name. */
    agentSessionId: text("agent_session_id").notNull(),
    /** Where the chunk starts in the file. */
    byteOffset: bigint("byte_offset", { mode: "number" }).notNull(),
    bytes: bytea("bytes").notNull(),
    at: ts("at").notNull().defaultNow(),
  },
  (t) => [primaryKey({ columns: [t.sessionId, t.agentSessionId, t.byteOffset] })],
);

/**
 * Workspace checkpoints (docs/architecture.md, Workspace checkpoints): one row per commit written
 * under a hidden ref, so the diff and revert routes, and the reconcile after a crash, know what
 * exists without asking git. `name` is the ref's tail: `<turnIndex>/before`, `<turnIndex>/after`,
 * `revert-<n>/before`, `revert-<n>/after`.
 */
export const checkpoints = pgTable(
  "checkpoints",
  {
    sessionId: uuid("session_id")
      .notNull()
      .references(() => sessions.id),
    name: text("name").notNull(),
    /** The turn's task (null for a revert's checkpoints). */
    taskId: uuid("task_id"),
    turnIndex: integer("turn_index"),
    /** The revert's number within its session (null for a turn's checkpoints). */
    revertIndex: integer("revert_index"),
    /** before | after */
    phase: text("phase").notNull(),
    commitSha: text("commit_sha").notNull(),
    /** workspace (the workspace's own repository) | shadow (one under the data folder) */
    store: text("store").notNull(),
    gitDir: text("git_dir").notNull(),
    /** The "after" of a turn whose instance died: taken by the next instance to touch the session. */
    atReconcile: boolean("at_reconcile").notNull().default(false),
    /** Files left out (over the size or count limit): `[{path, reason}]`. */
    skipped: jsonb("skipped").$type<{ path: string; reason: string }[]>().notNull().default([]),
    createdAt: ts("created_at").notNull().defaultNow(),
  },
  (t) => [primaryKey({ columns: [t.sessionId, t.name] }), index("checkpoints_task_idx").on(t.taskId)],
);
