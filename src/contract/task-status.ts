/**
 * A task's statuses and the sets of them, named once for the server, the SQL, the metrics, the
 * console and the client SDK (which takes them as types and checks its run-time table against
 * them, so nothing of the server is bundled with it).
 *
 * The SQL splices these sets into its statements as text (sql/task-status-sets.ts), and db/schema.ts
 * declares the partial indexes with them, so a status added here reaches both.
 */
export const taskStatuses = [
  "queued",
  "running",
  "cancelling",
  "completed",
  "failed",
  "cancelled",
  "expired",
  "interrupted",
] as const;

export type TaskStatus = (typeof taskStatuses)[number];

/** Holding a gate slot: running, or being stopped by its owner. */
export const activeStatuses = ["running", "cancelling"] as const satisfies readonly TaskStatus[];
/** Ended; a terminal status never changes. */
export const terminalStatuses = [
  "completed",
  "failed",
  "cancelled",
  "expired",
  "interrupted",
] as const satisfies readonly TaskStatus[];
/** Not ended: waiting in the queue or holding a slot (the session is busy). */
export const unfinishedStatuses = ["queued", ...activeStatuses] as const satisfies readonly TaskStatus[];
/** What a cancel still acts on (a cancelling task is already being stopped). */
export const cancellableStatuses = ["queued", "running"] as const satisfies readonly TaskStatus[];

export type ActiveStatus = (typeof activeStatuses)[number];
export type TerminalStatus = (typeof terminalStatuses)[number];

export const isTerminal = (status: TaskStatus): status is TerminalStatus =>
  (terminalStatuses as readonly TaskStatus[]).includes(status);
export const isActive = (status: TaskStatus): status is ActiveStatus =>
  (activeStatuses as readonly TaskStatus[]).includes(status);
