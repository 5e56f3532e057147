/**
 * The event that marks a task's start (docs/api.md, Streaming) and the notices of a fresh start; its
 * terminal event is built beside its settlement (sql/task-settle.ts).
 */
import type { NewEvent } from "../sql/event-append.js";
import type { TaskRow } from "../sql/task-row.js";

export const startedEvent = (task: TaskRow): NewEvent => ({
  taskId: task.id,
  type: "task.started",
  data: { attempt: task.attempt, deadlineAt: task.deadlineAt?.toISOString() ?? null },
});

export const UNSAVED_NOTICE =
  "The server restarted before this conversation was saved, so its context was lost. Send your message again to continue.";
export const RESUME_FAILED_NOTICE = "Session context was too large to resume — starting fresh.";
export const CONTINUE_PROMPT = "Continue where you left off.";
