/**
 * One error class per gateway error code (the registry is src/errors.ts; a test checks that every
 * code there has its class here), plus the client's own: a task still running when the caller
 * stopped waiting, a task lost to an unreachable gateway, a connection that could not be made.
 */
import type { Task } from "./types.js";

export interface ApiErrorInit {
  status?: number;
  reason?: string;
  /** Extra fields of the error body (`field`, `oldestSeq`, ...). */
  details?: Record<string, unknown>;
  retryAfterMs?: number;
}

/** An error the gateway answered, with its spec code. */
export class MooringApiError extends Error {
  readonly code: string;
  readonly status?: number;
  readonly reason?: string;
  readonly details: Record<string, unknown>;
  readonly retryAfterMs?: number;
  constructor(code: string, message: string, init: ApiErrorInit = {}) {
    super(message);
    this.name = new.target.name;
    this.code = code;
    this.status = init.status;
    this.reason = init.reason;
    this.details = init.details ?? {};
    this.retryAfterMs = init.retryAfterMs;
  }
}

export class InvalidRequestError extends MooringApiError {}
export class InvalidWorkspaceError extends MooringApiError {}
export class UnauthorizedError extends MooringApiError {}
export class WorkspaceNotAllowedError extends MooringApiError {}
export class NotFoundError extends MooringApiError {}
export class SessionNotFoundError extends MooringApiError {}
export class TaskNotFoundError extends MooringApiError {}
export class EventNotFoundError extends MooringApiError {}
export class SessionArchivedError extends MooringApiError {}
export class SessionBusyError extends MooringApiError {}
/** The event cursor is older than what the gateway keeps; `oldestSeq` is the first kept. */
export class ResyncRequiredError extends MooringApiError {
  get oldestSeq(): number {
    return Number(this.details.oldestSeq ?? 0);
  }
}
export class PayloadTooLargeError extends MooringApiError {}
export class UnsupportedMediaTypeError extends MooringApiError {}
/** The queue is full; `retryAfterMs` says when to try again. */
export class GatewayBusyError extends MooringApiError {}
export class NotReadyError extends MooringApiError {}
export class InternalError extends MooringApiError {}
export class OriginNotAllowedError extends MooringApiError {}
export class HostNotAllowedError extends MooringApiError {}
export class PermissionNotFoundError extends MooringApiError {}
export class PermissionResolvedError extends MooringApiError {}
export class TenantBusyError extends MooringApiError {}
/** A steer of a task that is not running (queued, cancelling, finished); `details.status` says which. */
export class TaskNotRunningError extends MooringApiError {}
/** A steer of a turn whose agent cannot take input mid-turn: submit with ifBusy enqueue or interrupt instead. */
export class SteerNotSupportedError extends MooringApiError {}
/** A revert would overwrite files changed since the last checkpoint; `paths` names them (retry with `force: true`). */
export class WorkspaceConflictError extends MooringApiError {
  get paths(): string[] {
    return Array.isArray(this.details.paths) ? (this.details.paths as string[]) : [];
  }
}
/** No checkpoint answers the request (checkpoints off, a turn that never ran, no revert to undo). */
export class CheckpointNotFoundError extends MooringApiError {}
/** The path exists but not with this method (the gateway's `Allow` header lists those it takes). */
export class MethodNotAllowedError extends MooringApiError {}
export class UpgradeRequiredError extends MooringApiError {}

type ApiErrorClass = new (code: string, message: string, init?: ApiErrorInit) => MooringApiError;

/** Code → class. Codes the gateway may add later still arrive, as a plain MooringApiError. */
export const errorClasses: Record<string, ApiErrorClass> = {
  INVALID_REQUEST: InvalidRequestError,
  INVALID_WORKSPACE: InvalidWorkspaceError,
  UNAUTHORIZED: UnauthorizedError,
  WORKSPACE_NOT_ALLOWED: WorkspaceNotAllowedError,
  NOT_FOUND: NotFoundError,
  SESSION_NOT_FOUND: SessionNotFoundError,
  TASK_NOT_FOUND: TaskNotFoundError,
  EVENT_NOT_FOUND: EventNotFoundError,
  SESSION_ARCHIVED: SessionArchivedError,
  SESSION_BUSY: SessionBusyError,
  RESYNC_REQUIRED: ResyncRequiredError,
  PAYLOAD_TOO_LARGE: PayloadTooLargeError,
  UNSUPPORTED_MEDIA_TYPE: UnsupportedMediaTypeError,
  GATEWAY_BUSY: GatewayBusyError,
  NOT_READY: NotReadyError,
  INTERNAL: InternalError,
  ORIGIN_NOT_ALLOWED: OriginNotAllowedError,
  HOST_NOT_ALLOWED: HostNotAllowedError,
  PERMISSION_NOT_FOUND: PermissionNotFoundError,
  PERMISSION_RESOLVED: PermissionResolvedError,
  TENANT_BUSY: TenantBusyError,
  TASK_NOT_RUNNING: TaskNotRunningError,
  STEER_NOT_SUPPORTED: SteerNotSupportedError,
  WORKSPACE_CONFLICT: WorkspaceConflictError,
  CHECKPOINT_NOT_FOUND: CheckpointNotFoundError,
  METHOD_NOT_ALLOWED: MethodNotAllowedError,
  UPGRADE_REQUIRED: UpgradeRequiredError,
};

export function apiError(code: string, message: string, init: ApiErrorInit = {}): MooringApiError {
  const Class = Object.hasOwn(errorClasses, code) ? errorClasses[code] : MooringApiError;
  return new Class(code, message, init);
}

/** `giveUpAfterMs` passed and the task is not finished: it still runs, it did not fail. */
export class StillRunningError extends Error {
  constructor(readonly task: Task | null) {
    super(`task ${task?.id ?? "?"} is still ${task?.status ?? "running"}; the caller stopped waiting`);
    this.name = "StillRunningError";
  }
}

/**
 * The gateway stayed unreachable past the task's deadline plus the lease and sweep periods (the
 * latest it could still have settled the task): its outcome is unknown here. Only then.
 */
export class TaskLostError extends Error {
  constructor(readonly task: Task) {
    super(`task ${task.id}: the gateway stayed unreachable past its deadline; its outcome is unknown`);
    this.name = "TaskLostError";
  }
}

/** The gateway could not be reached (connection refused, reset, timed out). */
export class ConnectionError extends Error {
  constructor(
    message: string,
    readonly cause?: unknown,
  ) {
    super(message);
    this.name = "ConnectionError";
  }
}

export class AbortError extends Error {
  constructor(message = "aborted") {
    super(message);
    this.name = "AbortError";
  }
}
