/**
 * Response schemas of every route: /docs/json describes what each route answers, the client SDK
 * takes its types from here (`Static<>`, types only), and test/api/response-schemas.test.ts checks
 * real answers against them. Known objects are closed (`additionalProperties: false`), so a field
 * added to an answer without its schema fails that test; what is free-form by contract stays open
 * (`metadata`, `agentConfig`, event `data`, a result's `usage`, error details).
 *
 * fastify serializes answers with these schemas through fast-json-stringify, which drops every
 * field a schema does not name; http/app.ts keeps JSON.stringify instead, so a schema documents
 * and the test enforces, but a schema can never silently remove what the API returns.
 */
import { type TSchema, Type } from "typebox";
import { ErrorResponse, SessionStatus, TaskStatus } from "./requests.js";

const Nullable = <T extends TSchema>(t: T) => Type.Union([t, Type.Null()]);
const Open = Type.Record(Type.String(), Type.Unknown());
const Time = Type.String({ description: "ISO 8601 time" });
const Seq = Type.Integer({ minimum: 0 });

export const ContextUsage = Type.Object(
  { inputTokens: Type.Number(), contextWindow: Type.Number(), percent: Type.Number() },
  { title: "ContextUsage", additionalProperties: false },
);

export const Session = Type.Object(
  {
    id: Type.String(),
    tenant: Type.String({ description: "the tenant that owns it (docs/tenants.md)" }),
    group: Type.String({ description: "the instance group whose instances run its turns" }),
    workspace: Type.String(),
    agent: Type.String(),
    agentConfig: Open,
    title: Nullable(Type.String()),
    metadata: Open,
    status: SessionStatus,
    agentSessionId: Nullable(Type.String()),
    turnCount: Type.Integer(),
    forkedFrom: Nullable(
      Type.Object(
        { sessionId: Type.String(), turnIndex: Type.Integer() },
        { additionalProperties: false, description: "a fork's source session and the last turn it carries" },
      ),
    ),
    contextUsage: Nullable(ContextUsage),
    lastSeq: Seq,
    checkpoints: Type.Boolean({ description: "whether its turns get workspace checkpoints (docs/api.md, Workspace checkpoints)" }),
    createdAt: Time,
    updatedAt: Time,
    lastActivityAt: Time,
  },
  { title: "Session", additionalProperties: false },
);

export const TaskResult = Type.Object(
  {
    text: Type.String(),
    stopReason: Type.String(),
    usage: Nullable(Open),
    contextPercent: Nullable(Type.Number()),
    selfReportedPercent: Type.Optional(
      Nullable(
        Type.Number({ description: "the agent's own context estimate (agentConfig.selfReportContext)" }),
      ),
    ),
    textBytes: Type.Optional(
      Type.Integer({ description: "in a session snapshot: the length of the whole text" }),
    ),
  },
  { title: "TaskResult", additionalProperties: false },
);

export const TaskError = Type.Object(
  { code: Type.String(), message: Type.String(), reason: Type.Optional(Type.String()) },
  { title: "TaskError", additionalProperties: true },
);

/** A permission request a running turn waits on (`permission.requested` carries the same). */
export const PermissionRequest = Type.Object(
  {
    requestId: Type.String(),
    toolCall: Type.Object(
      {
        id: Type.String(),
        name: Type.String(),
        title: Type.String(),
        kind: Type.String({ description: "`question` for a question to the person, else the tool's kind" }),
        input: Type.Unknown({
          description:
            "the tool's input, or a preview of at most 2 KiB (`truncated`; the whole is the event's payload)",
        }),
        inputBytes: Type.Optional(Type.Integer()),
        truncated: Type.Optional(Type.Boolean()),
      },
      { additionalProperties: false },
    ),
    options: Type.Array(
      Type.Object(
        { optionId: Type.String(), name: Type.String(), kind: Type.String() },
        { additionalProperties: false },
      ),
    ),
    expiresAt: Time,
  },
  { title: "PermissionRequest", additionalProperties: false },
);

/** How a permission request was resolved (the answer route's 200, and a 409's `resolution`). */
export const PermissionResolution = Type.Object(
  {
    requestId: Type.String(),
    taskId: Type.String(),
    optionId: Nullable(Type.String()),
    by: Type.Union([
      Type.Literal("client"),
      Type.Literal("timeout"),
      Type.Literal("cancel"),
      Type.Literal("restart"),
      Type.Literal("gateway"),
    ]),
    message: Type.Optional(Type.String()),
    answers: Type.Optional(Type.Record(Type.String(), Type.String())),
    resolvedAt: Time,
  },
  { title: "PermissionResolution", additionalProperties: false },
);

/** A steer's answer: the `turn.input` event that holds the text (docs/api.md, Steering a running turn). */
export const SteerAnswer = Type.Object(
  {
    taskId: Type.String(),
    sessionId: Type.String(),
    seq: Type.Integer({ description: "the seq of the turn.input event" }),
    text: Type.String(),
    created: Type.Boolean({ description: "false: a retry with the same idempotencyKey; nothing was added" }),
    at: Time,
  },
  { title: "SteerAnswer", additionalProperties: false },
);

const taskFields = {
  id: Type.String(),
  sessionId: Type.String(),
  tenant: Type.String({ description: "its session's tenant (docs/tenants.md)" }),
  turnIndex: Type.Integer(),
  status: TaskStatus,
  position: Nullable(Type.Integer({ minimum: 1 })),
  prompt: Type.String(),
  createdAt: Time,
  queueDeadlineAt: Time,
  startedAt: Nullable(Time),
  deadlineAt: Nullable(Time),
  finishedAt: Nullable(Time),
  attempt: Type.Integer(),
  result: Nullable(TaskResult),
  error: Nullable(TaskError),
  firstSeq: Nullable(Seq),
  lastSeq: Nullable(Seq),
  pollAfterMs: Nullable(Type.Integer()),
  continuesTaskId: Nullable(Type.String({ description: "the interrupted task this one continues" })),
  traceId: Nullable(
    Type.String({
      pattern: "^[0-9a-f]{32}$",
      description:
        "the W3C trace id of the turn's trace (its submit's traceparent, or the gateway's own when tracing is on): the same id is in the turn's log lines (docs/operations.md, Tracing); null when the turn has no trace",
    }),
  ),
  rolledBack: Type.Boolean({
    description: "dropped from the conversation by a rollback (its events stay in the log)",
  }),
  pendingPermissions: Type.Array(PermissionRequest, {
    description: "permission requests the running turn waits on (status stays running)",
  }),
  waitingForGroup: Type.Optional(
    Type.String({
      description:
        "a queued turn whose session's instance group has no live instance: it waits for one to start",
    }),
  ),
  upstream: Nullable(
    Type.Object(
      {
        position: Nullable(Type.Integer({ minimum: 1 })),
        queueDeadlineAt: Nullable(Time),
        retryAt: Type.Optional(Time),
      },
      {
        additionalProperties: false,
        description: "a running chained turn (driver mooring) waiting in its upstream gateway's queue",
      },
    ),
  ),
};

export const Task = Type.Object(taskFields, { title: "Task", additionalProperties: false });

/** A turn in a session snapshot: a Task with previews (docs/api.md, Wire budget). */
export const CompactTurn = Type.Object(
  { ...taskFields, promptBytes: Type.Optional(Type.Integer()) },
  { title: "CompactTurn", additionalProperties: false },
);

export const SessionWithTurns = Type.Object(
  { ...Session.properties, turns: Type.Array(CompactTurn) },
  { title: "SessionWithTurns", additionalProperties: false },
);

const page = <T extends TSchema>(title: string, item: T) =>
  Type.Object(
    { items: Type.Array(item), nextCursor: Nullable(Type.String()) },
    { title, additionalProperties: false },
  );
export const SessionPage = page("SessionPage", Session);

/** `DELETE /v1/sessions/:id?purge=true`: the session is gone; how many rows of each table went with it. */
export const PurgedSession = Type.Object(
  {
    id: Type.String(),
    purged: Type.Literal(true),
    deleted: Type.Object(
      {
        sessions: Type.Integer(),
        tasks: Type.Integer(),
        events: Type.Integer(),
        permissionRequests: Type.Integer(),
        transcriptChunks: Type.Integer(),
        webhookDeliveries: Type.Integer(),
        checkpoints: Type.Integer(),
      },
      { additionalProperties: false },
    ),
  },
  { title: "PurgedSession", additionalProperties: false },
);
export const TaskPage = page("TaskPage", Task);

export const Event = Type.Object(
  {
    sessionId: Type.String(),
    seq: Type.Integer({ minimum: 1 }),
    taskId: Nullable(Type.String()),
    type: Type.String(),
    at: Time,
    data: Type.Unknown(),
  },
  { title: "Event", additionalProperties: false },
);

export const EventPage = Type.Object(
  {
    items: Type.Array(Event),
    headSeq: Seq,
    nextAfterSeq: Nullable(Seq),
  },
  { title: "EventPage", additionalProperties: false },
);

export const EventPayload = Type.Object(
  { sessionId: Type.String(), seq: Type.Integer(), type: Type.String(), payload: Type.Unknown() },
  { title: "EventPayload", additionalProperties: false },
);

/** One tenant's share of the gate (docs/tenants.md): its running and queued turns and its limits. */
export const TenantUsage = Type.Object(
  {
    name: Type.String(),
    active: Type.Integer(),
    queued: Type.Integer(),
    maxActive: Type.Integer(),
    maxQueued: Type.Integer(),
  },
  { title: "TenantUsage", additionalProperties: false },
);

/** One instance group's share of the gate: its live instances and its running and queued turns. */
export const GroupUsage = Type.Object(
  {
    name: Type.String(),
    instances: Type.Integer({ minimum: 0, description: "live instances of the group" }),
    active: Type.Integer(),
    queued: Type.Integer(),
  },
  { title: "GroupUsage", additionalProperties: false },
);

export const GateStatus = Type.Object(
  {
    maxActive: Type.Integer(),
    maxQueued: Type.Integer(),
    active: Type.Integer(),
    queued: Type.Integer(),
    waitingForInput: Type.Integer({
      description: "active turns waiting on a permission request (they keep their slots)",
    }),
    queueTimeoutMs: Type.Integer(),
    tenant: TenantUsage,
    tenants: Type.Optional(
      Type.Array(TenantUsage, {
        description: "every tenant (admin callers only): configured, or holding turns",
      }),
    ),
    groups: Type.Array(GroupUsage, {
      description: "every instance group with a live instance or unfinished turns (the limits stay global)",
    }),
  },
  { title: "GateStatus", additionalProperties: false },
);

export const Readiness = Type.Object(
  {
    ready: Type.Boolean(),
    error: Type.Optional(
      Type.Object({
        code: Type.String(),
        message: Type.Optional(Type.String()),
        reason: Type.Optional(Type.String()),
      }),
    ),
    // A tokened gateway tells a caller without a token only `ready` (docs/api.md, Routes).
    instanceId: Type.Optional(Type.String()),
    bootId: Type.Optional(Type.String()),
    version: Type.Optional(Type.String()),
    host: Type.Optional(Type.String()),
    pid: Type.Optional(Type.Integer()),
  },
  { title: "Readiness", additionalProperties: false },
);

export const Instance = Type.Object(
  {
    instanceId: Type.String(),
    bootId: Type.String(),
    group: Type.String({
      description: "its MOORING_INSTANCE_GROUP: it runs the turns of that group's sessions only",
    }),
    version: Type.String(),
    status: Type.Union([Type.Literal("live"), Type.Literal("stale"), Type.Literal("stopped")]),
    startedAt: Time,
    heartbeatAt: Time,
    heartbeatAgeMs: Type.Integer({ minimum: 0 }),
    stoppedAt: Nullable(Time),
    runningTasks: Type.Integer({ minimum: 0 }),
    draining: Type.Boolean({
      description: "asked to drain: it claims nothing more and stops once its turns end",
    }),
    self: Type.Boolean({ description: "the instance that answered" }),
    host: Type.Optional(Type.String({ description: "only when API tokens are set" })),
    pid: Type.Optional(Type.Integer({ description: "only when API tokens are set" })),
  },
  { title: "Instance", additionalProperties: false },
);

export const InstanceList = Type.Object(
  { items: Type.Array(Instance) },
  { title: "InstanceList", additionalProperties: false },
);

/** POST /v1/instances/:instanceId/drain: the request was recorded; the instance drains on its own. */
export const DrainAnswer = Type.Object(
  { instanceId: Type.String(), draining: Type.Literal(true) },
  { title: "DrainAnswer", additionalProperties: false },
);

/** GET /v1/agents: the registry names a caller may create sessions with (no launch settings). */
export const AgentList = Type.Object(
  {
    items: Type.Array(
      Type.Object(
        {
          name: Type.String(),
          driver: Type.Union([
            Type.Literal("simulated"),
            Type.Literal("claude-code"),
            Type.Literal("acp"),
            Type.Literal("mooring"),
          ]),
        },
        { additionalProperties: false },
      ),
    ),
  },
  { additionalProperties: false },
);

const JsonRpcAnswer = Type.Object(
  {
    jsonrpc: Type.Literal("2.0"),
    id: Type.Union([Type.String(), Type.Number(), Type.Null()]),
    result: Type.Optional(Type.Unknown()),
    error: Type.Optional(
      Type.Object({ code: Type.Integer(), message: Type.String(), data: Type.Optional(Type.Unknown()) }),
    ),
  },
  { title: "JsonRpcResponse", additionalProperties: false },
);

/** The error shape with its details open (`field`, `oldestSeq`, ...). */
const Failure = Type.Object(
  {
    error: Type.Object({ ...ErrorResponse.properties.error.properties }, { additionalProperties: true }),
  },
  { title: "Error", additionalProperties: false },
);

const failures = { "4xx": Failure, "5xx": Failure };
/** The API's refusals: named where a header goes with them (401, 503: OpenAPI headers), then by class. */
/** One webhook delivery of the outbox (docs/api.md, Webhooks). */
const WebhookDelivery = Type.Object(
  {
    id: Type.String(),
    tenant: Type.String(),
    url: Type.String({ description: "without its query" }),
    eventType: Type.String(),
    sessionId: Type.String(),
    seq: Type.Integer(),
    status: Type.Union([Type.Literal("pending"), Type.Literal("delivered"), Type.Literal("failed")]),
    attempts: Type.Integer(),
    lastStatusCode: Type.Union([Type.Integer(), Type.Null()]),
    lastResponse: Type.Union([Type.String(), Type.Null()]),
    lastAttemptAt: Type.Union([Type.String(), Type.Null()]),
    nextAttemptAt: Type.Union([Type.String(), Type.Null()]),
    createdAt: Type.String(),
  },
  { title: "WebhookDelivery", additionalProperties: false },
);
const WebhookDeliveryPage = Type.Object(
  { items: Type.Array(WebhookDelivery), nextCursor: Type.Union([Type.String(), Type.Null()]) },
  { title: "WebhookDeliveryPage", additionalProperties: false },
);

const apiFailures = { 401: Failure, 503: Failure, ...failures };
/** On POST /v1/rpc every answer is a JSON-RPC envelope, refusals included (docs/api.md, JSON-RPC). */
const rpcFailures = { 401: JsonRpcAnswer, 503: JsonRpcAnswer, "4xx": JsonRpcAnswer, "5xx": JsonRpcAnswer };

/** Socket notifications (not routes; the SDK reads them). */
export const Hello = Type.Object({
  instanceId: Type.String(),
  bootId: Type.String(),
  version: Type.String(),
  pingMs: Type.Optional(Type.Integer()),
});


/** Workspace checkpoints (docs/api.md, Workspace checkpoints). */
const CheckpointRef = Type.Object(
  {
    name: Type.String({ description: "`<turn>/before`, `<turn>/after`, `revert-<n>/before`, `revert-<n>/after`" }),
    commit: Type.String(),
    atReconcile: Type.Boolean({ description: "an \"after\" taken by the next instance, its turn's instance having died" }),
    createdAt: Type.String(),
  },
  { title: "CheckpointRef", additionalProperties: false },
);
const SkippedFile = Type.Object(
  { path: Type.String(), reason: Type.String({ description: "too_large | too_many" }) },
  { title: "SkippedFile", additionalProperties: false },
);
export const FileDiff = Type.Object(
  {
    path: Type.String({ description: "relative to the workspace" }),
    status: Type.Union([Type.Literal("added"), Type.Literal("modified"), Type.Literal("deleted"), Type.Literal("type_changed")]),
    additions: Type.Integer(),
    deletions: Type.Integer(),
    binary: Type.Boolean(),
    bytes: Type.Integer({ description: "size of the new version (the old one for a deleted file)" }),
    patch: Type.String({ description: "the unified diff; for a binary file `binary, N bytes`" }),
    truncated: Type.Boolean({ description: "the patch was cut at the page's byte budget" }),
  },
  { title: "FileDiff", additionalProperties: false },
);
export const WorkspaceDiff = Type.Object(
  {
    sessionId: Type.String(),
    taskId: Nullable(Type.String()),
    fromTurn: Type.Integer(),
    toTurn: Type.Integer(),
    from: CheckpointRef,
    to: CheckpointRef,
    files: Type.Integer({ description: "files changed in all (every page)" }),
    additions: Type.Integer(),
    deletions: Type.Integer(),
    skipped: Type.Array(SkippedFile, { description: "files the checkpoints left out (size or count limit)" }),
    items: Type.Array(FileDiff),
    nextCursor: Nullable(Type.String()),
  },
  { title: "WorkspaceDiff", additionalProperties: false },
);
export const RevertResult = Type.Object(
  {
    sessionId: Type.String(),
    revert: Type.Integer({ description: "this revert's number in the session (undo it with `unrevert`)" }),
    toTurn: Nullable(Type.Integer()),
    unrevert: Type.Boolean(),
    restored: Type.Array(Type.String(), { description: "files written back" }),
    removed: Type.Array(Type.String(), { description: "files removed (absent from the checkpoint)" }),
    before: CheckpointRef,
    after: CheckpointRef,
  },
  { title: "RevertResult", additionalProperties: false },
);

/** Each route's answers by status, keyed `METHOD path` as fastify registers it. */
export const routeResponses = {
  "GET /healthz": {
    200: Type.Object({ ok: Type.Boolean() }, { title: "Health", additionalProperties: false }),
    403: Failure,
  },
  "GET /readyz": { 200: Readiness, 503: Readiness, 403: Failure },
  "GET /metrics": {
    200: {
      description: "Prometheus text exposition format (docs/metrics.md)",
      content: { "text/plain": { schema: Type.String() } },
    },
    401: Failure,
    ...failures,
  },
  "POST /v1/sessions": { 201: Session, 200: Session, ...apiFailures },
  "GET /v1/agents": { 200: AgentList, ...apiFailures },
  "GET /v1/sessions": { 200: SessionPage, ...apiFailures },
  "GET /v1/sessions/:id": { 200: SessionWithTurns, ...apiFailures },
  "DELETE /v1/sessions/:id": { 200: Type.Union([Session, PurgedSession]), ...apiFailures },
  "POST /v1/sessions/:id/fork": { 201: Session, 200: Session, ...apiFailures },
  "POST /v1/sessions/:id/rollback": { 200: SessionWithTurns, ...apiFailures },
  "POST /v1/sessions/:id/turns": { 202: Task, 200: Task, 429: Failure, ...apiFailures },
  "GET /v1/tasks/:id": { 200: Task, ...apiFailures },
  "GET /v1/tasks": { 200: TaskPage, ...apiFailures },
  "POST /v1/tasks/:id/cancel": { 200: Task, ...apiFailures },
  "POST /v1/tasks/:id/input": { 202: SteerAnswer, 200: SteerAnswer, ...apiFailures },
  "GET /v1/tasks/:id/diff": { 200: WorkspaceDiff, ...apiFailures },
  "GET /v1/sessions/:id/diff": { 200: WorkspaceDiff, ...apiFailures },
  "POST /v1/sessions/:id/revert": { 200: RevertResult, ...apiFailures },
  "POST /v1/tasks/:id/permissions/:requestId": { 200: PermissionResolution, ...apiFailures },
  "GET /v1/gate": { 200: GateStatus, ...apiFailures },
  "GET /v1/instances": { 200: InstanceList, ...apiFailures },
  "POST /v1/instances/:instanceId/drain": { 200: DrainAnswer, ...apiFailures },
  "GET /v1/webhooks/deliveries": { 200: WebhookDeliveryPage, ...apiFailures },
  "POST /v1/webhooks/deliveries/:id/retry": { 200: WebhookDelivery, ...apiFailures },
  "GET /v1/sessions/:id/events": {
    200: {
      description: "JSON (a page) when the request accepts application/json, else Server-Sent Events",
      content: {
        "application/json": { schema: EventPage },
        "text/event-stream": {
          schema: Type.String({ description: "`id: <seq>` / `data: <Event JSON>` records" }),
        },
      },
    },
    ...apiFailures,
  },
  "GET /v1/sessions/:id/events/:seq/payload": { 200: EventPayload, ...apiFailures },
  "POST /v1/rpc": {
    200: Type.Union([JsonRpcAnswer, Type.Array(JsonRpcAnswer)]),
    204: Type.Null({ description: "only notifications were sent" }),
    ...rpcFailures,
  },
} satisfies Record<string, Record<string | number, unknown>>;

export type RouteKey = keyof typeof routeResponses;
