/** The events that mark a task's state changes (docs/api.md, Streaming). */
import type { TerminalEventType } from "../contract/events.js";
import type { NewEvent } from "../sql/append-events.js";
import type { TaskRow } from "../sql/task-row.js";

export const startedEvent = (task: TaskRow): NewEvent => ({
  taskId: task.id,
  type: "task.started",
  data: { attempt: task.attempt, deadlineAt: task.deadlineAt?.toISOString() ?? null },
});

/** `task.completed`, `task.failed`, ... with the task's result or error (of a row already settled). */
export const terminalEvent = (task: TaskRow): NewEvent => ({
  taskId: task.id,
  type: `task.${task.status}` as TerminalEventType,
  data: { status: task.status, result: task.result, error: task.error },
});

export const UNSAVED_NOTICE =
  "The server restarted before this conversation was saved, so its context was lost. Send your message again to continue.";
export const RESUME_FAILED_NOTICE = "Session context was too large to resume — starting fresh.";
export const CONTINUE_PROMPT = "Continue where you left off.";
