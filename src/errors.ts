/**
 * The one registry of error codes (docs/api.md, Routes and Errors): each code with its HTTP status and JSON-RPC
 * code, and beside them the constructors of every refusal a client can get (`errors.taskNotFound(id)`),
 * so each message is written once (fastify's lib/errors.js is the model). The domain and the
 * transports throw what these build; nothing else writes `new MooringError(` (test/unit/error-table.test.ts)
 * and nothing else decides a status.
 */

export const errorCodes = {
  INVALID_REQUEST: { http: 400, rpc: -32602 },
  INVALID_WORKSPACE: { http: 400, rpc: -32602 },
  UNAUTHORIZED: { http: 401, rpc: -32001 },
  WORKSPACE_NOT_ALLOWED: { http: 403, rpc: -32003 },
  ORIGIN_NOT_ALLOWED: { http: 403, rpc: -32003 },
  HOST_NOT_ALLOWED: { http: 403, rpc: -32003 },
  NOT_FOUND: { http: 404, rpc: -32601 },
  METHOD_NOT_ALLOWED: { http: 405, rpc: -32601 },
  SESSION_NOT_FOUND: { http: 404, rpc: -32004 },
  TASK_NOT_FOUND: { http: 404, rpc: -32004 },
  EVENT_NOT_FOUND: { http: 404, rpc: -32004 },
  PERMISSION_NOT_FOUND: { http: 404, rpc: -32004 },
  SESSION_ARCHIVED: { http: 409, rpc: -32009 },
  SESSION_BUSY: { http: 409, rpc: -32009 },
  RESYNC_REQUIRED: { http: 409, rpc: -32010 },
  PERMISSION_RESOLVED: { http: 409, rpc: -32009 },
  TASK_NOT_RUNNING: { http: 409, rpc: -32009 },
  STEER_NOT_SUPPORTED: { http: 409, rpc: -32009 },
  WORKSPACE_CONFLICT: { http: 409, rpc: -32009 },
  CHECKPOINT_NOT_FOUND: { http: 404, rpc: -32004 },
  PAYLOAD_TOO_LARGE: { http: 413, rpc: -32600 },
  UNSUPPORTED_MEDIA_TYPE: { http: 415, rpc: -32600 },
  UPGRADE_REQUIRED: { http: 426, rpc: -32600 },
  GATEWAY_BUSY: { http: 429, rpc: -32002 },
  TENANT_BUSY: { http: 429, rpc: -32002 },
  NOT_READY: { http: 503, rpc: -32003 },
  INTERNAL: { http: 500, rpc: -32603 },
} as const;

export type ErrorCode = keyof typeof errorCodes;

/** Codes a terminal task may carry in its `error` (docs/api.md, Routes and Errors). */
export type TaskErrorCode =
  | "GATEWAY_BUSY"
  | "TURN_TIMEOUT"
  | "GATEWAY_RESTART"
  | "AGENT_START_FAILED"
  | "WORKSPACE_NOT_ALLOWED"
  | "AGENT_CRASHED"
  | "AGENT_ERROR"
  | "CONTEXT_TOO_LARGE"
  | "CANCELLED"
  /** A chained turn (driver `mooring`): the upstream gateway refused the token. */
  | "UPSTREAM_AUTH"
  /** A chained turn: no successful contact with the upstream gateway for MOORING_UPSTREAM_SILENT_MS. */
  | "UPSTREAM_LOST"
  /** A chained turn: the upstream task ended failed, expired, interrupted or cancelled. */
  | "UPSTREAM_FAILED";

export interface ErrorBody {
  code: string;
  message: string;
  reason?: string;
}

/** An error a client is meant to see: a spec code, a message fit for a person, an optional reason. */
export class MooringError extends Error {
  readonly code: ErrorCode;
  readonly reason?: string;
  /** Seconds a client should wait before retrying (sent as `Retry-After`). */
  readonly retryAfterSeconds?: number;
  /** Extra fields for the error body (e.g. the offending `field`). */
  readonly details?: Record<string, unknown>;

  constructor(
    code: ErrorCode,
    message: string,
    options: { reason?: string; retryAfterSeconds?: number; details?: Record<string, unknown> } = {},
  ) {
    super(message);
    this.name = "MooringError";
    this.code = code;
    this.reason = options.reason;
    this.retryAfterSeconds = options.retryAfterSeconds;
    this.details = options.details;
  }

  get httpStatus(): number {
    return errorCodes[this.code].http;
  }

  get rpcCode(): number {
    return errorCodes[this.code].rpc;
  }

  toBody(): ErrorBody & Record<string, unknown> {
    return {
      code: this.code,
      message: this.message,
      ...(this.reason ? { reason: this.reason } : {}),
      ...(this.details ?? {}),
    };
  }
}

/** Why an instance answers NOT_READY: each cause has one message, whichever transport answers. */
export type NotReadyCause = "starting" | "stopping" | "draining" | "database";

const notReadyMessages: Record<NotReadyCause, string> = {
  starting: "The gateway is starting; retry shortly.",
  stopping: "The gateway is shutting down; retry shortly.",
  draining: "The gateway is draining: its running turns finish here, new work goes to other instances.",
  database: "The database is unreachable; retry shortly.",
};

/** Seconds a client is told to wait after NOT_READY (sent as `Retry-After`, or in the JSON-RPC error's data). */
const NOT_READY_RETRY_SECONDS = 1;
/** Seconds a refused submit is told to wait: about one short turn's worth of queue movement. */
const QUEUE_RETRY_SECONDS = 5;

/** A JSON string, quoted, for a value a client sent (a header, a path) named in a message. */
const quoted = (value: string) => JSON.stringify(value);

/**
 * Every refusal a client can get, by what happened. A message says what was wrong and, where the
 * client can do something, what to do; one constructor per wording, so two places never drift.
 */
export const errors = {
  /** A request that does not fit its schema or a rule; `field` names the offending one. */
  invalidRequest: (message: string, field?: string) =>
    new MooringError("INVALID_REQUEST", message, field ? { details: { field } } : {}),
  emptyBody: () => new MooringError("INVALID_REQUEST", "the request body is empty; send a JSON object"),
  invalidJson: () => new MooringError("INVALID_REQUEST", "the request body is not valid JSON"),
  /** The router refused a path segment: longer than fastify's bound, or badly percent-encoded. */
  invalidUrl: (kind: "param_too_long" | "bad_encoding") =>
    new MooringError(
      "INVALID_REQUEST",
      kind === "param_too_long"
        ? "a path parameter is longer than 100 characters"
        : "the URL is not valid (bad percent-encoding)",
    ),
  socketOnly: (method: string) =>
    new MooringError("INVALID_REQUEST", `${method} is only available on WS /v1/ws`),
  invalidWorkspace: (message: string) =>
    new MooringError("INVALID_WORKSPACE", message, { details: { field: "workspace" } }),
  unauthorized: () =>
    new MooringError("UNAUTHORIZED", "a valid bearer token is required (Authorization: Bearer <token>)"),
  /** A workspace outside the roots (the global ones or a tenant's: one wording). */
  workspaceNotAllowed: (workspace: string) =>
    new MooringError("WORKSPACE_NOT_ALLOWED", `workspace ${quoted(workspace)} is outside the allowed roots`, {
      details: { field: "workspace" },
    }),
  originNotAllowed: (origin: string) =>
    new MooringError(
      "ORIGIN_NOT_ALLOWED",
      `pages from ${quoted(origin)} may not use this gateway (the operator can add it to MOORING_CORS_ORIGINS)`,
    ),
  hostNotAllowed: (host: string) =>
    new MooringError(
      "HOST_NOT_ALLOWED",
      `Host ${quoted(host)} is not accepted by this gateway (the operator can add it to MOORING_ALLOWED_HOSTS)`,
    ),
  noRoute: (method: string, path: string) => new MooringError("NOT_FOUND", `no route ${method} ${path}`),
  webhookDeliveryNotFound: (id: string) => new MooringError("NOT_FOUND", `no webhook delivery ${id}`),
  instanceNotFound: (instanceId: string) =>
    new MooringError("NOT_FOUND", `no live instance ${JSON.stringify(instanceId)}`, {
      reason: "instance_not_found",
    }),
  /**
   * Something only an admin tenant may do (docs/tenants.md), asked by another caller: INVALID_REQUEST
   * with reason `admin_only` (the spec has no "forbidden" code; the request is wrong for this caller).
   */
  adminOnly: (message: string, field?: string) =>
    new MooringError("INVALID_REQUEST", message, {
      reason: "admin_only",
      ...(field ? { details: { field } } : {}),
    }),
  methodNotAllowed: (method: string, path: string, allowed: readonly string[]) =>
    new MooringError("METHOD_NOT_ALLOWED", `${path} does not take ${method} (Allow: ${allowed.join(", ")})`),
  sessionNotFound: (id: string) => new MooringError("SESSION_NOT_FOUND", `session ${id} does not exist`),
  taskNotFound: (id: string) => new MooringError("TASK_NOT_FOUND", `task ${id} does not exist`),
  eventNotFound: (sessionId: string, seq: number | string) =>
    new MooringError("EVENT_NOT_FOUND", `session ${sessionId} has no event ${seq}`),
  permissionNotFound: (requestId: string, taskId: string) =>
    new MooringError(
      "PERMISSION_NOT_FOUND",
      `permission request ${requestId} does not exist for task ${taskId}`,
    ),
  sessionArchived: (id: string) => new MooringError("SESSION_ARCHIVED", `session ${id} is archived`),
  /** A rollback asked of a session with a turn queued, running or cancelling. */
  sessionBusyForRollback: (id: string) =>
    new MooringError("SESSION_BUSY", `session ${id} has a turn queued or running; roll back once it is idle`),
  sessionBusy: (id: string) =>
    new MooringError("SESSION_BUSY", `session ${id} is running a turn (ifBusy=reject)`),
  /** A steer of a task that is not running (queued, cancelling or finished): nothing was stored. */
  taskNotRunning: (id: string, status: string) =>
    new MooringError(
      "TASK_NOT_RUNNING",
      `task ${id} is ${status}, not running; input can only be added to a running turn (submit a turn instead)`,
      { details: { status } },
    ),
  /** A steer for an agent whose driver cannot take input while a turn runs (ACP, chained gateways). */
  steerNotSupported: (agent: string) =>
    new MooringError(
      "STEER_NOT_SUPPORTED",
      `the agent ${quoted(agent)} cannot take input while a turn runs; submit a turn (ifBusy enqueue or interrupt) instead`,
    ),
  /**
   * A purge (`DELETE /v1/sessions/:id?purge=true`) could not delete the session within its wait: a
   * turn of it still ending after the archive cancelled it, or its rows held by another
   * transaction. The session stays archived and whole; asking again purges it.
   */
  sessionPurgeBusy: (id: string, retryAfterSeconds: number) =>
    new MooringError(
      "SESSION_BUSY",
      `session ${id} is archived but could not be deleted yet (a turn of it is still ending, or its rows are in use); nothing was deleted, purge it again`,
      { reason: "purge_pending", retryAfterSeconds },
    ),
  /** Events after `afterSeq` were pruned; `reload` says what the client reads again before continuing. */
  resyncRequired: (afterSeq: number, oldestSeq: number, reload: "session" | "task") =>
    new MooringError(
      "RESYNC_REQUIRED",
      `events after seq ${afterSeq} are no longer kept (oldest kept is ${oldestSeq}); ${
        reload === "session"
          ? "reload the session and subscribe from its lastSeq"
          : "reload the task or session and continue from there"
      }`,
      { details: { oldestSeq } },
    ),
  /** A permission request already answered; `resolution` is the winner's answer (its view). */
  permissionResolved: (requestId: string, resolution: unknown) =>
    new MooringError("PERMISSION_RESOLVED", `permission request ${requestId} was already answered`, {
      details: { resolution },
    }),
  /** A revert would overwrite files changed since the session's last checkpoint. */
  workspaceConflict: (paths: string[]) =>
    new MooringError(
      "WORKSPACE_CONFLICT",
      `${paths.length} file(s) changed since the last checkpoint would be overwritten; send force: true to revert anyway`,
      { details: { paths } },
    ),
  /** No checkpoint answers the request (checkpoints off, a turn that never ran, a revert not made). */
  checkpointNotFound: (what: string) => new MooringError("CHECKPOINT_NOT_FOUND", `no checkpoint for ${what}`),
  /** A revert while a turn is queued or running. */
  sessionNotIdle: (id: string) =>
    new MooringError("SESSION_BUSY", `session ${id} has a turn queued or running; revert when it is idle`, {
      reason: "not_idle",
    }),
  payloadTooLarge: () =>
    new MooringError("PAYLOAD_TOO_LARGE", "request body is larger than the gateway accepts"),
  /** A body this gateway does not read: another media type, a Content-Encoding, another charset. */
  unsupportedMediaType: (accepted: string) =>
    new MooringError("UNSUPPORTED_MEDIA_TYPE", `send the body as ${accepted}`),
  bodyEncoded: (encoding: string) =>
    new MooringError(
      "UNSUPPORTED_MEDIA_TYPE",
      `request bodies are not decoded (Content-Encoding: ${encoding}); send the body uncompressed`,
      { reason: "content_encoding" },
    ),
  unsupportedCharset: (charset: string, accepted: string) =>
    new MooringError(
      "UNSUPPORTED_MEDIA_TYPE",
      `charset ${quoted(charset)} is not accepted; send the body as ${accepted}`,
      {
        reason: "charset",
      },
    ),
  upgradeRequired: () =>
    new MooringError("UPGRADE_REQUIRED", "GET /v1/ws takes a WebSocket upgrade (Upgrade: websocket)"),
  /** An admission that would overfill the queue. */
  gatewayBusy: () =>
    new MooringError("GATEWAY_BUSY", "The gateway is busy and its queue is full; retry later.", {
      reason: "queue_full",
      retryAfterSeconds: QUEUE_RETRY_SECONDS,
    }),
  /** A socket past its cap of calls in flight: the whole message is refused, unrun. */
  socketCallsInFlight: (inFlight: number, max: number) =>
    new MooringError(
      "GATEWAY_BUSY",
      `this socket has ${inFlight} calls in flight (at most ${max}); wait for answers before sending more`,
      { reason: "calls_in_flight", retryAfterSeconds: 1 },
    ),
  /**
   * An admission that would overfill its tenant's queue: the tenant's own backlog, which other
   * tenants' turns finishing would not shorten. `maxQueued` is the caller's own limit, which it may
   * be told; unset (an admin submitting into another tenant's session) the message names no number.
   */
  tenantBusy: (maxQueued?: number) =>
    new MooringError(
      "TENANT_BUSY",
      maxQueued === undefined
        ? "The session's tenant already has as many turns queued as it may; retry later."
        : `Your tenant already has ${maxQueued} turns queued; retry later.`,
      { reason: "tenant_queue_full", retryAfterSeconds: QUEUE_RETRY_SECONDS },
    ),
  notReady: (cause: NotReadyCause) =>
    new MooringError("NOT_READY", notReadyMessages[cause], {
      retryAfterSeconds: NOT_READY_RETRY_SECONDS,
      // A load balancer or client tells a drain (go elsewhere) from a passing refusal by this reason.
      ...(cause === "draining" ? { reason: "draining" } : {}),
    }),
  internal: () => new MooringError("INTERNAL", "Internal error; the gateway logged the details."),
};

export const invalid = errors.invalidRequest;

/** Errors that mean "the database is away", not "the request is wrong". */
const unavailableCodes = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ETIMEDOUT",
  "EPIPE",
  "CONNECTION_CLOSED",
  "CONNECTION_ENDED",
  "CONNECTION_DESTROYED",
  "CONNECT_TIMEOUT",
  "57P01", // admin_shutdown
  "57P02", // crash_shutdown
  "57P03", // cannot_connect_now
  "08000",
  "08001",
  "08003",
  "08006",
]);

export function isDatabaseUnavailable(err: unknown): boolean {
  // Drizzle wraps the driver's error (DrizzleQueryError) and keeps it as `cause`: look through.
  for (let e = err, depth = 0; e && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string" && unavailableCodes.has(code)) return true;
  }
  return false;
}

/** Map anything thrown to a MooringError; unknown errors become INTERNAL without their details. */
export function toMooringError(err: unknown): MooringError {
  if (err instanceof MooringError) return err;
  if (isDatabaseUnavailable(err)) return errors.notReady("database");
  return errors.internal();
}
