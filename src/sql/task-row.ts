import type { UpstreamColumn } from "./save-upstream.js";
/** A `tasks` row as the named SQL functions return it (camelCase keys). */
export interface TaskRow {
  id: string;
  sessionId: string;
  /** Its session's tenant, copied at insert (README, Tenants). */
  tenant: string;
  turnIndex: number;
  status: TaskStatus;
  prompt: string;
  idempotencyKey: string | null;
  queueOrder: number;
  jumpsQueue: boolean;
  loadClass: string | null;
  timeoutMs: number;
  createdAt: Date;
  queueDeadlineAt: Date;
  startedAt: Date | null;
  deadlineAt: Date | null;
  finishedAt: Date | null;
  attempt: number;
  ownerInstance: string | null;
  ownerBoot: string | null;
  leaseExpiresAt: Date | null;
  cancelRequestedAt: Date | null;
  result: TaskResult | null;
  error: TaskError | null;
  firstSeq: number | null;
  lastSeq: number | null;
  continuesTaskId: string | null;
  /** A chained turn's upstream task (sql/save-upstream.ts); null for other drivers. */
  upstream?: UpstreamColumn | null;
  version: number;
}

export type TaskStatus =
  | "queued"
  | "running"
  | "cancelling"
  | "completed"
  | "failed"
  | "cancelled"
  | "expired"
  | "interrupted";

export const terminalStatuses: readonly TaskStatus[] = ["completed", "failed", "cancelled", "expired", "interrupted"];
export const isTerminal = (status: TaskStatus) => terminalStatuses.includes(status);

export interface TaskResult {
  text: string;
  stopReason: string;
  usage: { inputTokens: number; outputTokens: number; cacheCreationInputTokens: number; cacheReadInputTokens: number } | null;
  contextPercent: number | null;
  /** The agent's own context estimate, when it was asked for one (agentConfig.selfReportContext). */
  selfReportedPercent?: number | null;
}

export interface TaskError {
  code: string;
  message: string;
  reason?: string;
}
