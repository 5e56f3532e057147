/**
 * A followed turn: `for await` over its events (each exactly once, in seq order, ending with its
 * terminal event), `done()` for the terminal Task, `cancel()`, `text()`, and handlers for text
 * deltas, tool calls and results, usage and the follower's state.
 */
import type { Follower, StateChange } from "./follow.js";
import type { Http } from "./http.js";
import type { DiffPageOptions, MooringEvent, RunItem, SteerAnswer, Task, WorkspaceDiff } from "./types.js";

export interface RunHandlers {
  text: (delta: string, event: MooringEvent) => void;
  tool: (event: MooringEvent) => void;
  usage: (usage: Record<string, unknown>, event: MooringEvent) => void;
  state: (change: StateChange) => void;
  event: (event: MooringEvent) => void;
}

export class Run implements AsyncIterable<RunItem> {
  constructor(
    private readonly follower: Follower,
    private readonly http: Http,
  ) {}

  /** The task being followed (the continuation's, once `followContinuation` moved on). */
  get taskId(): string {
    return this.follower.taskId;
  }

  /** The last known snapshot of the task. */
  get task(): Task | null {
    return this.follower.task;
  }

  get state(): StateChange["state"] {
    return this.follower.state;
  }

  /** The session seq of the last event taken: save it to follow on later (`tasks.follow`). */
  get cursor(): number {
    return this.follower.cursor;
  }

  /** The largest buffer this run held (events and bytes); bounded by the client's options. */
  get peakBuffered(): { events: number; bytes: number } {
    return { ...this.follower.buffer.peak };
  }

  [Symbol.asyncIterator](): AsyncIterator<RunItem> {
    return this.follower.items();
  }

  /** The terminal Task (whatever its status). Rejects only with StillRunningError, TaskLostError, AbortError or an API error. */
  done(): Promise<Task> {
    return this.follower.done();
  }

  /** Cancels the task and waits for it to end (`task.cancelled`, or whatever ended it first). */
  /** What this turn changed in the workspace (one page; docs/api.md, Workspace checkpoints). */
  async diff(options: DiffPageOptions = {}): Promise<WorkspaceDiff> {
    return (
      await this.http.request<WorkspaceDiff>("GET", `/v1/tasks/${this.follower.taskId}/diff`, { query: options })
    ).body;
  }

  async cancel(): Promise<Task> {
    await this.http.request("POST", `/v1/tasks/${this.follower.taskId}/cancel`);
    return this.done();
  }

  /**
   * Adds `text` to this running turn (steer; docs/api.md, Steering a running turn). Retried with
   * one idempotency key, so a lost answer never adds it twice. Rejects with TaskNotRunningError
   * (queued or finished) or SteerNotSupportedError (the agent cannot take input mid-turn).
   */
  async steer(text: string, options: { idempotencyKey?: string } = {}): Promise<SteerAnswer> {
    const idempotencyKey = options.idempotencyKey ?? globalThis.crypto.randomUUID();
    return (
      await this.http.request<SteerAnswer>("POST", `/v1/tasks/${this.follower.taskId}/input`, {
        body: { text, idempotencyKey },
      })
    ).body;
  }

  /** The turn's final text. */
  async text(): Promise<string> {
    const task = await this.done();
    return task.result?.text ?? "";
  }

  on<K extends keyof RunHandlers>(kind: K, handler: RunHandlers[K]): this {
    if (kind === "state") {
      // Changes made before the handler was added (e.g. `connecting`) are replayed first.
      for (const change of this.follower.stateHistory) (handler as RunHandlers["state"])(change);
      this.follower.stateListeners.push(handler as RunHandlers["state"]);
      return this;
    }
    this.follower.eventListeners.push((e) => {
      if (kind === "event") (handler as RunHandlers["event"])(e);
      else if (kind === "text" && e.type === "message.delta") {
        (handler as RunHandlers["text"])(String((e.data as { text?: unknown }).text ?? ""), e);
      } else if (kind === "tool" && (e.type === "tool.call" || e.type === "tool.result")) {
        (handler as RunHandlers["tool"])(e);
      } else if (kind === "usage" && e.type === "usage") {
        (handler as RunHandlers["usage"])(e.data as Record<string, unknown>, e);
      }
    });
    return this;
  }
}
