/**
 * The one registry of error codes (docs/api.md, Routes and Errors): each code with its HTTP status and JSON-RPC
 * code. The domain throws `MooringError`; the transports map it. Nothing else decides a status.
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

export const invalid = (message: string, field?: string) =>
  new MooringError("INVALID_REQUEST", message, field ? { details: { field } } : {});

/**
 * Something only an admin tenant may do (docs/tenants.md), asked by another caller: INVALID_REQUEST
 * with reason `admin_only` (the spec has no "forbidden" code; the request is wrong for this caller).
 */
export const adminOnly = (message: string, field?: string) =>
  new MooringError("INVALID_REQUEST", message, {
    reason: "admin_only",
    ...(field ? { details: { field } } : {}),
  });

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
  if (isDatabaseUnavailable(err)) {
    return new MooringError("NOT_READY", "The database is unreachable; retry shortly.", { retryAfterSeconds: 1 });
  }
  return new MooringError("INTERNAL", "Internal error; the gateway logged the details.");
}
