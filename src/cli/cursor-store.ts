/**
 * The cursor of every followed task, kept under `$XDG_STATE_HOME/mooring/cursors/` (default
 * `~/.local/state/mooring/`), so `mooring attach` after the CLI was killed resumes after the last
 * event it printed instead of repeating output.
 *
 * Saved synchronously right after each event's output is written: the file is never behind what
 * was printed by more than the event being written when a kill -9 came. Each save overwrites a
 * fixed-size record at offset 0 of a file kept open, so a save costs one pwrite, not an
 * open/rename, even at thousands of deltas per second.
 */
import { closeSync, mkdirSync, openSync, readFileSync, writeSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";

const recordBytes = 256;

export function stateDir(env: NodeJS.ProcessEnv = process.env): string {
  const base = env.XDG_STATE_HOME || join(homedir(), ".local", "state");
  return join(base, "mooring");
}

export interface SavedCursor {
  taskId: string;
  sessionId: string;
  cursor: number;
}

/** A task id is a uuid; anything else (a typo on the command line) must not name another path. */
export const isTaskId = (taskId: string): boolean => /^[A-Za-z0-9-]{1,64}$/.test(taskId);

function cursorPath(taskId: string): string {
  if (!isTaskId(taskId)) throw new Error("not a task id");
  return join(stateDir(), "cursors", `${taskId}.json`);
}

export function readCursor(taskId: string): SavedCursor | null {
  try {
    const parsed = JSON.parse(readFileSync(cursorPath(taskId), "utf8").trim());
    return typeof parsed?.cursor === "number" ? parsed : null;
  } catch {
    return null;
  }
}

export class CursorWriter {
  private fd: number | null = null;
  private last = -1;

  constructor(private readonly taskId: string) {}

  save(sessionId: string, cursor: number): void {
    if (cursor === this.last) return;
    this.last = cursor;
    try {
      if (this.fd === null) {
        const path = cursorPath(this.taskId);
        mkdirSync(join(stateDir(), "cursors"), { recursive: true, mode: 0o700 });
        this.fd = openSync(path, "w", 0o600);
      }
      const record = JSON.stringify({ taskId: this.taskId, sessionId, cursor });
      writeSync(this.fd, record.padEnd(recordBytes, " "), 0);
    } catch {
      // A read-only home must not stop a run: attach then replays from the start.
    }
  }

  close(): void {
    if (this.fd !== null) closeSync(this.fd);
    this.fd = null;
  }
}
