/**
 * The status of a followed turn on stderr: one line redrawn in place on a terminal (with colour
 * unless NO_COLOR), plain lines otherwise, one per change worth a line (not one per delta). What
 * came from the gateway (a tool name, a message) is made visible on a terminal (terminal-text.ts);
 * the line's own cursor and colour codes are the only ones written.
 */
import { createColors } from "picocolors";
import { escapesFor, stderrLine, visible } from "./terminal-text.js";

export interface StatusFacts {
  taskId: string;
  state: string;
  position?: number | null;
  queueDeadlineAt?: string | null;
  startedAt?: string | null;
  deadlineAt?: string | null;
  tool?: string | null;
  contextPercent?: number | null;
  note?: string | null;
}

/**
 * Where the answer on stdout stands, when stdout and stderr are the same terminal: a status drawn
 * while the answer is in the middle of a line would land inside its text.
 */
export interface AnswerPosition {
  midLine(): boolean;
  /** Ends the answer's line on the terminal, so a status that must show gets a line of its own. */
  endLine(): void;
}

export class StatusLine {
  private readonly live: boolean;
  private readonly visibleText: (text: string) => string;
  private readonly colors: ReturnType<typeof createColors>;
  private shown = false;
  private lastPlain = "";
  private facts: StatusFacts;
  private timer: NodeJS.Timeout | null = null;

  constructor(
    taskId: string,
    private readonly stream: NodeJS.WriteStream = process.stderr,
    private readonly answer: AnswerPosition = { midLine: () => false, endLine: () => {} },
    env: NodeJS.ProcessEnv = process.env,
  ) {
    const noColor = env.NO_COLOR !== undefined && env.NO_COLOR !== "";
    this.live = stream.isTTY === true && !noColor && env.TERM !== "dumb";
    this.colors = createColors(this.live);
    this.visibleText = escapesFor(stream) ? visible : (text) => text;
    this.facts = { taskId, state: "connecting" };
    if (this.live) {
      // Elapsed time moves without events; unref so it never keeps the process alive.
      this.timer = setInterval(() => this.draw(), 1000);
      this.timer.unref();
    }
  }

  update(change: Partial<StatusFacts>): void {
    this.facts = { ...this.facts, ...change };
    // A tool call or a lost connection must show even in the middle of the answer (not each
    // delta's redraw, which would break the answer after every word).
    const urgent = Boolean(change.tool) || change.state === "reconnecting" || change.state === "polling";
    this.draw(urgent);
  }

  /** A line that stays (a restart, a cancel request, the end), printed above the status line. */
  say(message: string): void {
    this.clear();
    if (this.answer.midLine()) this.answer.endLine();
    stderrLine(message, this.stream);
    this.draw();
  }

  /** Removes the live line for good (before exit). */
  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    this.clear();
  }

  /** Clears the live line so stdout text does not land on it (both may be the same terminal). */
  clear(): void {
    if (this.live && this.shown) this.stream.write("\r\x1b[2K");
    this.shown = false;
  }

  /** Draws the status; in the middle of the answer only when `urgent`, after ending its line. */
  draw(urgent = false): void {
    const text = this.render();
    if (this.live) {
      if (this.answer.midLine()) {
        if (!urgent) return;
        this.answer.endLine();
      }
      this.stream.write(`\r\x1b[2K${this.colors.dim("mooring")} ${text}`);
      this.shown = true;
      return;
    }
    if (text === this.lastPlain) return;
    this.lastPlain = text;
    if (this.answer.midLine()) this.answer.endLine();
    this.stream.write(`mooring: ${text}\n`);
  }

  private render(): string {
    const f = this.facts;
    const c = this.colors;
    const parts: string[] = [];
    if (f.state === "queued") {
      parts.push(c.yellow(`queued${f.position ? ` at position ${f.position}` : ""}`));
      if (f.queueDeadlineAt) parts.push(`expires ${clockTime(f.queueDeadlineAt)}`);
    } else if (f.state === "running") {
      parts.push(c.green("running"));
      if (this.live && f.startedAt) {
        const elapsed = seconds(Date.now() - Date.parse(f.startedAt));
        const limit = f.deadlineAt ? ` / ${seconds(Date.parse(f.deadlineAt) - Date.parse(f.startedAt))}` : "";
        parts.push(`${elapsed}${limit}`);
      }
      if (f.tool) parts.push(`tool ${this.visibleText(f.tool)}`);
    } else {
      parts.push(f.state === "reconnecting" ? c.yellow(f.state) : f.state);
    }
    if (typeof f.contextPercent === "number") parts.push(`context ${Math.round(f.contextPercent)}%`);
    if (f.note) parts.push(this.visibleText(f.note));
    return parts.join(" · ");
  }
}

function seconds(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  return s >= 60 ? `${Math.floor(s / 60)}m${String(s % 60).padStart(2, "0")}s` : `${s}s`;
}

function clockTime(iso: string): string {
  return new Date(iso).toISOString().slice(11, 19) + "Z";
}
