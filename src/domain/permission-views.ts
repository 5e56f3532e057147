/** What clients see of a permission request and of its answer, built from the stored row. */
import type { Static } from "typebox";
import type { PermissionRequest, PermissionResolution } from "../contract/responses.js";
import type { PermissionRow } from "../sql/permission.js";
import { previewToolCall } from "./permission-input.js";

/** What clients see of a pending request (`Task.pendingPermissions`, `permission.requested`). */
export type PermissionRequestView = Static<typeof PermissionRequest>;

/** The answer as stored (the winner's, for a 409). */
export type PermissionResolutionView = Static<typeof PermissionResolution>;

/** Streamed and in snapshots with its input as a preview (permission-input.ts); the whole is stored. */
export const requestView = (row: PermissionRow): PermissionRequestView => ({
  requestId: row.id,
  toolCall: previewToolCall(row.toolCall),
  options: row.options,
  expiresAt: row.expiresAt.toISOString(),
});

export const resolutionView = (row: PermissionRow): PermissionResolutionView => ({
  requestId: row.id,
  taskId: row.taskId,
  optionId: row.optionId,
  by: row.resolvedBy ?? "client",
  ...(row.message !== null ? { message: row.message } : {}),
  ...(row.answers !== null ? { answers: row.answers } : {}),
  resolvedAt: (row.resolvedAt ?? new Date()).toISOString(),
});
