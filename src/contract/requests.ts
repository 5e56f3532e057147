/**
 * Request schemas shared by every transport: REST routes validate with them (and /docs is
 * generated from them); JSON-RPC methods, over HTTP or the socket, validate their params with the
 * same ones.
 */
import { type TLiteral, type TLiteralValue, type TUnion, Type } from "typebox";
import { type ErrorCode, errorCodes } from "../errors.js";
import { GROUP_NAME } from "./group-name.js";
import { taskStatuses } from "./task-status.js";
import { jsonBoundsProblem } from "./client-input.js";

const Uuid = Type.String({ minLength: 1, maxLength: 64, description: "resource id (uuid)" });

/** Bounds of the free-form JSON a client stores on a session (`metadata`, `agentConfig`). */
export const JSON_FIELD_MAX_DEPTH = 16;
export const JSON_FIELD_MAX_BYTES = 16 * 1024;
/**
 * A free-form JSON object, bounded so every later read, serialization and list stays cheap: deep
 * metadata once made every session list answer 500, and a 200 KB `model` failed the agent's spawn.
 * Checked without recursion (contract/client-input.ts).
 */
const Json = Type.Refine(
  Type.Record(Type.String(), Type.Unknown(), {
    description: `a JSON object, at most ${JSON_FIELD_MAX_DEPTH} levels deep and ${JSON_FIELD_MAX_BYTES} bytes as JSON`,
  }),
  (value) => jsonBoundsProblem(value, JSON_FIELD_MAX_DEPTH, JSON_FIELD_MAX_BYTES) === null,
  (value) => jsonBoundsProblem(value, JSON_FIELD_MAX_DEPTH, JSON_FIELD_MAX_BYTES) ?? "is invalid",
);
/** Seqs and other counters: integers Postgres and JavaScript hold exactly. */
const Seq = (minimum: number) => Type.Integer({ minimum, maximum: Number.MAX_SAFE_INTEGER });

export const SessionStatus = Type.Union([
  Type.Literal("idle"),
  Type.Literal("busy"),
  Type.Literal("archived"),
]);
/** A union of literals, typed as the tuple of them (which `map` cannot say): `Static<>` is the literal union. */
type Literals<T extends readonly TLiteralValue[]> = { -readonly [K in keyof T]: TLiteral<T[K]> };
function literalUnion<const T extends readonly TLiteralValue[]>(values: T): TUnion<Literals<T>> {
  return Type.Union(values.map((v) => Type.Literal(v))) as unknown as TUnion<Literals<T>>;
}

/** The statuses of contract/task-status.ts (`Static<>` of it is the SDK's TaskStatus). */
export const TaskStatus = literalUnion(taskStatuses);

export const CreateSessionBody = Type.Object(
  {
    workspace: Type.String({
      minLength: 1,
      maxLength: 4096,
      description: "absolute path of the agent's working folder",
    }),
    agent: Type.String({ minLength: 1, maxLength: 64, description: "a registered agent name" }),
    agentConfig: Type.Optional(Json),
    title: Type.Optional(Type.String({ maxLength: 500 })),
    metadata: Type.Optional(Json),
    idempotencyKey: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 200,
        description: "a retried create with this key returns the same session",
      }),
    ),
    checkpoints: Type.Optional(
      Type.Boolean({
        description: "false: no workspace checkpoints (no diff, no revert) for this session's turns; default true",
      }),
    ),
    group: Type.Optional(
      Type.String({
        pattern: GROUP_NAME.source,
        description:
          "the instance group to run its turns (admin only; default: the group of the instance that creates it)",
      }),
    ),
  },
  { additionalProperties: false },
);

/** `POST /v1/sessions/:id/fork` (docs/api.md, Fork and rollback). */
export const ForkSessionBody = Type.Object(
  {
    atTurn: Type.Optional(
      Type.Integer({
        minimum: 0,
        maximum: 2_147_483_647,
        description: "the last turn (turnIndex) the fork carries; default: the source's last completed turn",
      }),
    ),
    title: Type.Optional(Type.String({ maxLength: 500 })),
    metadata: Type.Optional(Json),
    idempotencyKey: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 200,
        description:
          "a retried fork with this key returns the same session (keys are shared with session creates)",
      }),
    ),
  },
  { additionalProperties: false },
);

/** `POST /v1/sessions/:id/rollback`. */
export const RollbackSessionBody = Type.Object(
  {
    turns: Type.Integer({
      minimum: 1,
      maximum: 100_000,
      description: "how many of the last completed turns to drop",
    }),
  },
  { additionalProperties: false },
);

/** A list's `tenant` filter (docs/tenants.md): an admin's choice; any other caller sees its own tenant only. */
const TenantFilter = Type.Optional(
  Type.String({
    minLength: 1,
    maxLength: 64,
    description:
      "only this tenant's (an admin tenant's filter; other callers always see their own tenant only)",
  }),
);

export const ListSessionsQuery = Type.Object(
  {
    status: Type.Optional(SessionStatus),
    workspace: Type.Optional(Type.String({ minLength: 1, maxLength: 4096 })),
    tenant: TenantFilter,
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 200, default: 50 })),
    cursor: Type.Optional(Type.String({ maxLength: 512 })),
  },
  { additionalProperties: false },
);

export const SessionIdParams = Type.Object({ id: Uuid });
export const DeleteSessionQuery = Type.Object(
  {
    purge: Type.Optional(
      Type.Boolean({
        description:
          "true: archive the session and delete it with everything that belongs to it (its tasks, events, permission requests, transcripts, webhook deliveries); answers once nothing of it is left",
      }),
    ),
  },
  { additionalProperties: false },
);
export const EventPayloadParams = Type.Object({ id: Uuid, seq: Seq(1) });

export const SubmitTurnBody = Type.Object(
  {
    prompt: Type.String({ minLength: 1, description: "the user's message" }),
    idempotencyKey: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
    ifBusy: Type.Optional(
      Type.Union([Type.Literal("enqueue"), Type.Literal("reject"), Type.Literal("interrupt"), Type.Literal("steer")], {
        description:
          "when the session runs a turn: enqueue (default), reject (409 SESSION_BUSY), interrupt it, or steer: add the prompt to the running turn (409 STEER_NOT_SUPPORTED when its agent cannot take it)",
      }),
    ),
    loadClass: Type.Optional(Type.Union([Type.Literal("short"), Type.Literal("long"), Type.Literal("complex")])),
    timeoutMs: Type.Optional(Type.Integer({ minimum: 1, maximum: 3_600_000 })),
    webhook: Type.Optional(
      Type.Object(
        {
          url: Type.String({
            minLength: 1,
            maxLength: 2048,
            description: "must begin with one of the tenant's webhookUrlPrefixes",
          }),
        },
        { additionalProperties: false, description: "this turn's own webhook (docs/api.md, Webhooks)" },
      ),
    ),
  },
  { additionalProperties: false },
);

export const TaskIdParams = Type.Object({ id: Uuid });
/** Input added to a running turn (steer; docs/api.md, Steering a running turn). */
const steerFields = {
  text: Type.String({ minLength: 1, description: "the user's message, given to the agent within the running turn" }),
  idempotencyKey: Type.Optional(
    Type.String({ minLength: 1, maxLength: 200, description: "a retried steer with this key is stored and delivered once" }),
  ),
};
export const SteerBody = Type.Object(steerFields, { additionalProperties: false });
export const GetTaskQuery = Type.Object(
  { waitMs: Type.Optional(Type.Integer({ minimum: 0, maximum: 60_000 })) },
  { additionalProperties: false },
);
export const ListTasksQuery = Type.Object(
  {
    sessionId: Type.Optional(Uuid),
    status: Type.Optional(TaskStatus),
    tenant: TenantFilter,
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 200, default: 50 })),
    cursor: Type.Optional(Type.String({ maxLength: 512 })),
  },
  { additionalProperties: false },
);

/** Workspace checkpoints (docs/api.md, Workspace checkpoints): a diff page. */
const diffPaging = {
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000, default: 200, description: "files per page" })),
  cursor: Type.Optional(Type.String({ maxLength: 64 })),
};
export const TaskDiffQuery = Type.Object(diffPaging, { additionalProperties: false });
export const SessionDiffQuery = Type.Object(
  {
    fromTurn: Type.Optional(Type.Integer({ minimum: 0, description: "the first turn (its \"before\"); default 0" })),
    toTurn: Type.Optional(Type.Integer({ minimum: 0, description: "the last turn (its \"after\"); default the newest" })),
    ...diffPaging,
  },
  { additionalProperties: false },
);
/** The most paths one revert may name. */
export const REVERT_MAX_PATHS = 1000;
export const RevertBody = Type.Object(
  {
    toTurn: Type.Optional(
      Type.Integer({ minimum: 0, description: "restore the workspace as it was before this turn" }),
    ),
    unrevert: Type.Optional(
      Type.Boolean({ description: "undo the newest revert: restore the checkpoint taken just before it" }),
    ),
    paths: Type.Optional(
      Type.Array(Type.String({ minLength: 1, maxLength: 4096 }), {
        minItems: 1,
        maxItems: REVERT_MAX_PATHS,
        description: "only these files or folders, relative to the workspace (default: all)",
      }),
    ),
    force: Type.Optional(Type.Boolean({ description: "overwrite files changed since the last checkpoint" })),
  },
  { additionalProperties: false },
);

/** An answer to an agent's permission request. */
export const PERMISSION_MESSAGE_MAX = 4000;
export const PERMISSION_ANSWERS_MAX = 32;
const permissionAnswerFields = {
  optionId: Type.String({ minLength: 1, maxLength: 200, description: "one of the request's `options`" }),
  message: Type.Optional(
    Type.String({
      maxLength: PERMISSION_MESSAGE_MAX,
      description: "passed to the agent verbatim (a deny's reason)",
    }),
  ),
  answers: Type.Optional(
    Type.Refine(
      Type.Record(Type.String(), Type.String({ maxLength: PERMISSION_MESSAGE_MAX }), {
        maxProperties: PERMISSION_ANSWERS_MAX,
        description: `a question's answers: question text → chosen label or free text (at most ${PERMISSION_ANSWERS_MAX})`,
      }),
      (value) => Object.keys(value).every((k) => k.length <= PERMISSION_MESSAGE_MAX),
      () => `keys must be at most ${PERMISSION_MESSAGE_MAX} characters`,
    ),
  ),
};
export const PermissionParams = Type.Object({ id: Uuid, requestId: Uuid });
export const RespondPermissionBody = Type.Object(permissionAnswerFields, { additionalProperties: false });

export const EventsQuery = Type.Object(
  {
    afterSeq: Type.Optional(Seq(0)),
    limit: Type.Optional(
      Type.Integer({ minimum: 1, maximum: 1000, default: 200, description: "page size of the JSON answer" }),
    ),
  },
  { additionalProperties: false },
);

/** JSON-RPC params of each method (docs/api.md, JSON-RPC). */
export const rpcParams = {
  "sessions.create": CreateSessionBody,
  "sessions.get": Type.Object({ sessionId: Uuid }, { additionalProperties: false }),
  "sessions.list": ListSessionsQuery,
  "sessions.archive": Type.Object({ sessionId: Uuid }, { additionalProperties: false }),
  "sessions.fork": Type.Object(
    { sessionId: Uuid, ...ForkSessionBody.properties },
    { additionalProperties: false },
  ),
  "sessions.rollback": Type.Object(
    { sessionId: Uuid, ...RollbackSessionBody.properties },
    { additionalProperties: false },
  ),
  "turns.submit": Type.Object(
    {
      sessionId: Uuid,
      ...SubmitTurnBody.properties,
      _meta: Type.Optional(
        Type.Object(
          {
            traceparent: Type.Optional(
              Type.String({
                maxLength: 512,
                description: "W3C traceparent: the parent of the turn's spans (docs/operations.md, Tracing); a malformed one is ignored",
              }),
            ),
          },
          { additionalProperties: true, description: "call metadata (as MCP and ACP carry it)" },
        ),
      ),
    },
    { additionalProperties: false },
  ),
  "tasks.get": Type.Object(
    { taskId: Uuid, waitMs: Type.Optional(Type.Integer({ minimum: 0, maximum: 60_000 })) },
    { additionalProperties: false },
  ),
  "tasks.cancel": Type.Object({ taskId: Uuid }, { additionalProperties: false }),
  "turns.steer": Type.Object({ taskId: Uuid, ...steerFields }, { additionalProperties: false }),
  "tasks.list": ListTasksQuery,
  "tasks.diff": Type.Object({ taskId: Uuid, ...diffPaging }, { additionalProperties: false }),
  "sessions.diff": Type.Object({ sessionId: Uuid, ...SessionDiffQuery.properties }, { additionalProperties: false }),
  "sessions.revert": Type.Object({ sessionId: Uuid, ...RevertBody.properties }, { additionalProperties: false }),
  "permissions.respond": Type.Object(
    { taskId: Uuid, requestId: Uuid, ...permissionAnswerFields },
    { additionalProperties: false },
  ),
  "gate.status": Type.Object({}, { additionalProperties: false }),
  ping: Type.Object({}, { additionalProperties: false }),
  "instances.list": Type.Object({}, { additionalProperties: false }),
  "events.subscribe": Type.Object(
    {
      sessionId: Uuid,
      afterSeq: Type.Optional(Seq(0)),
      batch: Type.Optional(
        Type.Boolean({
          description: "false: one `event` notification per frame, never a JSON-RPC batch array",
        }),
      ),
    },
    { additionalProperties: false },
  ),
  "events.unsubscribe": Type.Object({ sessionId: Uuid }, { additionalProperties: false }),
} as const;

/** Every code of the error registry (src/errors.ts): what `error.code` can be (/docs/json lists them). */
const ErrorCodeSchema = Type.Enum(Object.keys(errorCodes) as ErrorCode[], {
  description: "a code of the error registry (docs/api.md, Routes and Errors)",
});

export const ErrorResponse = Type.Object({
  error: Type.Object({
    code: ErrorCodeSchema,
    message: Type.String(),
    reason: Type.Optional(Type.String()),
    field: Type.Optional(Type.String()),
  }),
});

export const ListDeliveriesQuery = Type.Object(
  {
    status: Type.Optional(
      Type.Union([Type.Literal("pending"), Type.Literal("delivered"), Type.Literal("failed")]),
    ),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 200, default: 50 })),
    cursor: Type.Optional(Type.String({ maxLength: 512 })),
  },
  { additionalProperties: false },
);

export const InstanceIdParams = Type.Object({
  instanceId: Type.String({
    minLength: 1,
    maxLength: 200,
    description: "an instance id (GET /v1/instances)",
  }),
});
export const DeliveryIdParams = Type.Object({ id: Type.String({ minLength: 1, maxLength: 64 }) });
