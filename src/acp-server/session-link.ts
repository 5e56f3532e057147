/**
 * One ACP connection's hold on one mooring session: it relays the session's events to the client
 * as `session/update`s (each once: a per-task cursor drops what a replay and a live follow both
 * saw), follows the turns running on it, and asks the client the turns' permission requests.
 * Updates are handed to the ACP connection as they are taken, in that order, without waiting for
 * the one before to be written: the connection writes its messages in the order it was given them
 * (one queue), so the client sees seq order, and an update does not wait behind the previous one's
 * write (a turn's run of events went out one write round trip after another). `follow` waits only
 * when `MAX_UNSENT` updates are still being written (a client not reading: the run's buffer fills
 * and its events wait in the gateway's log, not here).
 */
import type {
  AgentContext,
  PermissionOption,
  RequestPermissionRequest,
  RequestPermissionResponse,
  SessionUpdate,
} from "@agentclientprotocol/sdk";
import { MooringApiError } from "../client/errors.js";
import type { MooringClient } from "../client/client.js";
import { isResyncItem, type MooringEvent, type Task } from "../client/types.js";
import type { Run } from "../client/run.js";
import { noticeUpdate, toolKindOf, type UpdateContext, updateOf } from "./updates.js";

/** A pending permission request as events and tasks show it (docs/api.md, Approvals). */
export interface PermissionView {
  requestId: string;
  toolCall: { id?: string; name?: string; title?: string | null; kind?: string | null; input?: unknown };
  options: { optionId: string; name: string; kind: string }[];
  expiresAt?: string;
}

/** Updates handed to the connection and not written yet, beyond which `follow` waits for room. */
export const MAX_UNSENT = 64;

const acpOptionKinds = new Set(["allow_once", "allow_always", "reject_once", "reject_always"]);

export interface LinkDeps {
  mooring: MooringClient;
  acp: () => AgentContext;
  context: UpdateContext;
  /** Aborted when the connection closes or the client closes the session. */
  signal: AbortSignal;
  warn: (message: string, fields?: Record<string, unknown>) => void;
}

export class SessionLink {
  /** The last seq relayed, per task (events without a task: key ""). */
  private readonly cursors = new Map<string, number>();
  /** Tasks followed right now. */
  private readonly following = new Set<string>();
  /** Permission requests the client holds, by request id; aborting withdraws one ($/cancel_request). */
  private readonly asking = new Map<string, AbortController>();
  /** Settles once every update handed over so far was written (or failed). */
  private sending: Promise<void> = Promise.resolve();
  /** Updates handed over and not written yet (or failed). */
  private unsent = 0;
  /** Follows waiting for `unsent` to come down to half of MAX_UNSENT. */
  private roomWaiters: (() => void)[] = [];
  private readonly closer = new AbortController();
  readonly signal: AbortSignal;

  constructor(
    readonly sessionId: string,
    private readonly deps: LinkDeps,
  ) {
    this.signal = AbortSignal.any([deps.signal, this.closer.signal]);
    this.signal.addEventListener("abort", () => {
      for (const ask of this.asking.values()) ask.abort();
    });
  }

  /** The last seq relayed of this task (undefined: none yet). */
  cursorOf(taskId: string): number | undefined {
    return this.cursors.get(taskId);
  }

  /** Relays one event (once). `live`: a permission request in it is asked of the client. */
  relay(event: MooringEvent, live: boolean, context: UpdateContext = this.deps.context): Promise<void> {
    const key = event.taskId ?? "";
    if ((this.cursors.get(key) ?? -1) >= event.seq) return this.sending;
    this.cursors.set(key, event.seq);
    const update = updateOf(event, context);
    this.send(update, (err) => this.deps.warn("acp update not delivered", { err: String(err) }));
    if (event.taskId && event.type === "permission.requested" && live)
      this.ask(event.taskId, event.data as PermissionView, event.seq);
    if (event.type === "permission.resolved")
      this.asking.get(String((event.data as { requestId?: unknown }).requestId))?.abort();
    return this.sending;
  }

  /** Resolves once every update taken so far went out. */
  flushed(): Promise<void> {
    return this.sending;
  }

  /** A notice that is not an event (the gateway restarted): no seq. */
  notice(message: string, mooring: Record<string, unknown>): Promise<void> {
    const update = noticeUpdate(message, this.deps.context, mooring);
    this.send(update, () => {});
    return this.sending;
  }

  /**
   * Hands one update to the connection now, behind every one handed before it (the connection's
   * own queue keeps that order); `sending` settles once it, and all before it, are written or failed.
   */
  private send(update: SessionUpdate, failed: (err: unknown) => void): void {
    let written: Promise<void>;
    try {
      written = this.deps.acp().notify("session/update", { sessionId: this.sessionId, update });
    } catch (err) {
      written = Promise.reject(err);
    }
    this.unsent++;
    const settled = written.catch(failed).finally(() => {
      this.unsent--;
      if (this.roomWaiters.length > 0 && this.unsent <= MAX_UNSENT / 2)
        for (const wake of this.roomWaiters.splice(0)) wake();
    });
    const before = this.sending;
    this.sending = before.then(() => settled);
  }

  /** Resolves once fewer than MAX_UNSENT updates are still being written (at once when so). */
  private room(): Promise<void> | null {
    if (this.unsent < MAX_UNSENT) return null;
    return new Promise((resolve) => this.roomWaiters.push(resolve));
  }

  /** Relays a run's events until its terminal one; resolves with the terminal task. */
  async follow(run: Run): Promise<Task> {
    this.following.add(run.taskId);
    run.on("state", (change) => {
      if (change.state === "restart") void this.notice(change.reason, { taskId: run.taskId, restart: true });
    });
    try {
      for await (const item of run) {
        if (isResyncItem(item)) continue;
        void this.relay(item, true);
        const room = this.room();
        if (room) await room;
      }
      const task = await run.done();
      // The prompt's answer goes after every update of its turn.
      await this.sending;
      return task;
    } finally {
      this.following.delete(run.taskId);
    }
  }

  /**
   * Follows a task this link does not follow yet (a reloaded client), after `floor` (what the client
   * already has) or what this link relayed of it, whichever is later.
   */
  followInBackground(task: Task, floor: number): void {
    if (this.following.has(task.id) || this.signal.aborted) return;
    const afterSeq = Math.max(floor, this.cursors.get(task.id) ?? 0);
    const run = this.deps.mooring.tasks.follow(task.id, {
      ...(afterSeq > 0 ? { afterSeq } : {}),
      signal: this.signal,
      followContinuation: true,
    });
    this.follow(run).catch((err) => {
      if (!this.signal.aborted) this.deps.warn("acp follow ended", { err: String(err), taskId: task.id });
    });
  }

  /** Asks the client a pending request of a task (again, after a reload). */
  askPending(task: Task): void {
    for (const request of (task.pendingPermissions ?? []) as PermissionView[])
      this.ask(task.id, request, null);
  }

  private ask(taskId: string, request: PermissionView, seq: number | null): void {
    if (this.asking.has(request.requestId) || this.signal.aborted) return;
    const options = request.options.filter((o) => acpOptionKinds.has(o.kind)) as PermissionOption[];
    if (options.length === 0) return; // a question: no ACP form; answered through the API
    const withdraw = new AbortController();
    this.asking.set(request.requestId, withdraw);
    const name = request.toolCall.name ?? "tool";
    const params: RequestPermissionRequest = {
      sessionId: this.sessionId,
      toolCall: {
        toolCallId: request.toolCall.id ?? request.requestId,
        title: request.toolCall.title ?? name,
        kind: toolKindOf(name),
        status: "pending",
        rawInput: request.toolCall.input,
      },
      options,
      _meta: { mooring: { taskId, requestId: request.requestId, expiresAt: request.expiresAt, seq } },
    };
    // Handed over now, as an update is: behind the updates before it (its own event's) and before any after it.
    let answered: Promise<RequestPermissionResponse>;
    try {
      answered = this.deps
        .acp()
        .request("session/request_permission", params, { cancellationSignal: withdraw.signal });
    } catch (err) {
      answered = Promise.reject(err);
    }
    void answered
      .then(async (answer) => {
        if (answer.outcome.outcome !== "selected" || withdraw.signal.aborted) return;
        await this.deps.mooring.permissions.respond(taskId, request.requestId, {
          optionId: answer.outcome.optionId,
        });
      })
      .catch((err) => {
        // Answered elsewhere first, or withdrawn: the first answer won; nothing to do.
        if (
          err instanceof MooringApiError &&
          (err.code === "PERMISSION_RESOLVED" || err.code === "PERMISSION_NOT_FOUND")
        )
          return;
        if (!withdraw.signal.aborted)
          this.deps.warn("acp permission request failed", { err: String(err), taskId });
      })
      .finally(() => this.asking.delete(request.requestId));
  }

  /** `session/close`: this connection lets go; the session and its turns go on. */
  close(): void {
    this.closer.abort();
  }
}
