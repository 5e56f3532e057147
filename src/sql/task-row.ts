import type { tasks } from "../db/schema.js";
import type { UpstreamColumn } from "./task-upstream.js";
import type { TaskStatus } from "../contract/task-status.js";

/**
 * A `tasks` row as the named SQL functions return it (camelCase keys): drizzle's row type of the
 * schema (db/schema.ts, the one declaration of the table), with the status and the json columns
 * typed as the code writes them.
 */
export type TaskRow = Omit<typeof tasks.$inferSelect, "status" | "result" | "error" | "upstream"> & {
  status: TaskStatus;
  result: TaskResult | null;
  error: TaskError | null;
  /** A chained turn's upstream task (sql/task-upstream.ts); null for other drivers. */
  upstream?: UpstreamColumn | null;
};

export { isTerminal, type TaskStatus, terminalStatuses } from "../contract/task-status.js";

export interface TaskResult {
  text: string;
  stopReason: string;
  usage: {
    inputTokens: number;
    outputTokens: number;
    cacheCreationInputTokens: number;
    cacheReadInputTokens: number;
  } | null;
  contextPercent: number | null;
  /** The agent's own context estimate, when it was asked for one (agentConfig.selfReportContext). */
  selfReportedPercent?: number | null;
}

export interface TaskError {
  code: string;
  message: string;
  reason?: string;
}
