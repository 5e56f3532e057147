/**
 * `MooringClient`: sessions, turns, tasks and the gate over REST, and runs that follow a task's
 * events through restarts, flaps and overload (follow.ts).
 */
import { type Clock, systemClock } from "./clock.js";
import { type FollowOptions, Follower, type FollowSettings, type Transport } from "./follow.js";
import { type FetchLike, Http } from "./http.js";
import { Run } from "./run.js";
import type { WebSocketFactory } from "./socket.js";
import type { LocalEventSource } from "./stream.js";
import type {
  CreateSessionInput,
  EventPage,
  ForkSessionInput,
  GateStatus,
  Instance,
  ListSessionsFilter,
  ListTasksFilter,
  Page,
  PurgedSession,
  Session,
  SessionWithTurns,
  SteerAnswer,
  SubmitTurnInput,
  Task,
  WorkspaceDiff,
  RevertResult,
  RevertInput,
  DiffPageOptions,
  SessionDiffOptions,
} from "./types.js";

export interface MooringClientOptions {
  /** The gateway's base URL, e.g. http://127.0.0.1:8787. */
  url: string;
  /** A bearer token (MOORING_API_TOKENS); browsers send it as `?access_token=` on the socket. */
  token?: string;
  /** How runs stream: WebSocket (default), Server-Sent Events, or polling only. */
  transport?: Transport;
  /** Transient failures (unreachable, 503 while starting, 429) of a call are retried this long. Default 30 s. */
  readyTimeoutMs?: number;
  /** Used until the gateway's hello says its own interval; also the SSE heartbeat expected. Default 15 s. */
  pingMs?: number;
  /** The gateway's MOORING_LEASE_MS and MOORING_SWEEP_MS, for the deadline rule (R4). Defaults 30 s, 10 s. */
  leaseMs?: number;
  sweepMs?: number;
  /** Reconnect backoff (full jitter). Defaults 250 ms base, 10 s cap. */
  backoffBaseMs?: number;
  backoffMaxMs?: number;
  /** Consecutive streaming failures (while REST answers) before polling. Default 3. */
  pollAfterFailures?: number;
  /** While polling, try streaming again after this long. Default 30 s. */
  streamRetryMs?: number;
  /** The wait of each task long-poll. Default 25 s. */
  longPollMs?: number;
  /** The shortest time between two polling rounds, doubling (to backoffMaxMs) while rounds bring nothing. Default 0. */
  minPollIntervalMs?: number;
  /** Node: opens the WebSocket (default: the `ws` package, imported at run time). */
  webSocket?: WebSocketFactory;
  /**
   * Inside the gateway itself (its `/acp` connections): runs take their events from its own feeds,
   * not over a socket to itself; `transport: "ws"` (the default) then streams through it.
   */
  localEvents?: LocalEventSource;
  /** The bound of a run's buffer for a slow consumer. Defaults 256 events, 1 MiB. */
  maxBufferedEvents?: number;
  maxBufferedBytes?: number;
  fetch?: FetchLike;
  clock?: Clock;
}

export interface SubmitOptions extends Omit<FollowOptions, "afterSeq"> {
  /** A W3C `traceparent`, sent as the header of that name: the parent of the turn's spans (docs/operations.md, Tracing). */
  traceparent?: string;
}

const newKey = (): string => globalThis.crypto.randomUUID();

/** Iterates items across cursor pages. */
function paged<T>(fetchPage: (cursor?: string) => Promise<Page<T>>): AsyncIterable<T> {
  return {
    async *[Symbol.asyncIterator]() {
      let cursor: string | undefined;
      do {
        const page = await fetchPage(cursor);
        yield* page.items;
        cursor = page.nextCursor ?? undefined;
      } while (cursor);
    },
  };
}

export class MooringClient {
  readonly http: Http;
  private readonly settings: FollowSettings;

  constructor(options: MooringClientOptions) {
    const url = options.url.replace(/\/+$/, "");
    const fetchFn = options.fetch ?? ((input: string, init?: RequestInit) => globalThis.fetch(input, init));
    const clock = options.clock ?? systemClock;
    this.http = new Http({
      url,
      token: options.token,
      fetch: fetchFn,
      clock,
      retryTimeoutMs: options.readyTimeoutMs ?? 30_000,
    });
    this.settings = {
      url,
      token: options.token,
      http: this.http,
      fetch: fetchFn,
      clock,
      transport: options.transport ?? "ws",
      pingMs: options.pingMs ?? 15_000,
      leaseMs: options.leaseMs ?? 30_000,
      sweepMs: options.sweepMs ?? 10_000,
      backoffBaseMs: options.backoffBaseMs ?? 250,
      backoffMaxMs: options.backoffMaxMs ?? 10_000,
      pollAfterFailures: options.pollAfterFailures ?? 3,
      streamRetryMs: options.streamRetryMs ?? 30_000,
      longPollMs: options.longPollMs ?? 25_000,
      minPollMs: options.minPollIntervalMs ?? 0,
      webSocket: options.webSocket,
      local: options.localEvents,
      maxBufferedEvents: options.maxBufferedEvents ?? 256,
      maxBufferedBytes: options.maxBufferedBytes ?? 1024 * 1024,
    };
  }

  private async json<T>(
    method: string,
    path: string,
    body?: unknown,
    query?: Record<string, any>,
  ): Promise<T> {
    return (await this.http.request<T>(method, path, { body, query })).body;
  }

  readonly sessions = {
    /** Creates a session; retried with the same idempotency key, so a lost answer makes no second one. */
    create: (input: CreateSessionInput): Promise<Session> =>
      this.json("POST", "/v1/sessions", { ...input, idempotencyKey: input.idempotencyKey ?? newKey() }),
    get: (sessionId: string): Promise<SessionWithTurns> => this.json("GET", `/v1/sessions/${sessionId}`),
    /** Every session matching `filter`, newest first, across pages. */
    list: (filter: Omit<ListSessionsFilter, "cursor"> = {}): AsyncIterable<Session> =>
      paged((cursor) => this.json("GET", "/v1/sessions", undefined, { ...filter, cursor })),
    archive: (sessionId: string): Promise<Session> => this.json("DELETE", `/v1/sessions/${sessionId}`),
    /**
     * Restores the workspace to the checkpoint before turn `toTurn` (or undoes the newest revert
     * with `unrevert: true`); only `paths` when given. WorkspaceConflictError lists files changed
     * since the last checkpoint (send `force: true` to overwrite them).
     */
    revert: (sessionId: string, input: RevertInput): Promise<RevertResult> =>
      this.json("POST", `/v1/sessions/${sessionId}/revert`, input),
    /** One page of what turns `fromTurn`..`toTurn` changed in the workspace (follow `nextCursor`). */
    diff: (sessionId: string, options: SessionDiffOptions = {}): Promise<WorkspaceDiff> =>
      this.json("GET", `/v1/sessions/${sessionId}/diff`, undefined, options),
    /**
     * Archives the session and deletes it with everything of it; resolves once nothing of it is
     * left. A retry after a lost answer finds it gone (SessionNotFound).
     */
    purge: (sessionId: string): Promise<PurgedSession> =>
      this.json("DELETE", `/v1/sessions/${sessionId}`, undefined, { purge: true }),
    /**
     * Forks a session at a turn (default: its last completed one): a new session carrying its
     * history that far. Retried with the same idempotency key, so a lost answer makes no second fork.
     */
    fork: (sessionId: string, input: ForkSessionInput = {}): Promise<Session> =>
      this.json("POST", `/v1/sessions/${sessionId}/fork`, {
        ...input,
        idempotencyKey: input.idempotencyKey ?? newKey(),
      }),
    /**
     * Drops the last `turns` completed turns of an idle session from its conversation. Sent once,
     * never retried (a second one would drop more turns): after a lost answer, read the session.
     */
    rollback: async (sessionId: string, turns: number): Promise<SessionWithTurns> =>
      (
        await this.http.once<SessionWithTurns>("POST", `/v1/sessions/${sessionId}/rollback`, {
          body: { turns },
        })
      ).body,
    /** One page of sessions (for callers that hand the cursor on, as ACP's `session/list`). */
    page: (filter: ListSessionsFilter = {}): Promise<Page<Session>> =>
      this.json("GET", "/v1/sessions", undefined, filter),
    /** One page of a session's events after `afterSeq` (JSON, not a stream): `{items, headSeq, nextAfterSeq}`. */
    events: (sessionId: string, options: { afterSeq?: number; limit?: number } = {}): Promise<EventPage> =>
      this.json("GET", `/v1/sessions/${sessionId}/events`, undefined, options),
  };

  readonly permissions = {
    /** Answers a permission request of a running turn (first answer wins: a later one is PermissionResolvedError). */
    respond: (
      taskId: string,
      requestId: string,
      answer: { optionId: string; message?: string; answers?: Record<string, string> },
    ): Promise<unknown> => this.json("POST", `/v1/tasks/${taskId}/permissions/${requestId}`, answer),
  };

  readonly turns = {
    /**
     * Submits a turn and follows it. The idempotency key is made once here and reused on every
     * retry, so a lost answer never makes a second task.
     */
    submit: async (sessionId: string, input: SubmitTurnInput & SubmitOptions): Promise<Run> => {
      const { transport, followContinuation, giveUpAfterMs, signal, traceparent, ...turn } = input;
      const task = (
        await this.http.request<Task>("POST", `/v1/sessions/${sessionId}/turns`, {
          body: { ...turn, idempotencyKey: turn.idempotencyKey ?? newKey() },
          signal,
          ...(traceparent ? { headers: { traceparent } } : {}),
        })
      ).body;
      return this.runOf(task.id, { transport, followContinuation, giveUpAfterMs, signal }, task);
    },
  };

  readonly tasks = {
    get: (taskId: string, options: { waitMs?: number } = {}): Promise<Task> =>
      this.json("GET", `/v1/tasks/${taskId}`, undefined, options),
    /** Every task matching `filter`, newest first, across pages. */
    list: (filter: Omit<ListTasksFilter, "cursor"> = {}): AsyncIterable<Task> =>
      paged((cursor) => this.json("GET", "/v1/tasks", undefined, { ...filter, cursor })),
    cancel: (taskId: string): Promise<Task> => this.json("POST", `/v1/tasks/${taskId}/cancel`),
    /**
     * Adds `text` to the turn the task runs (steer; docs/api.md, Steering a running turn), retried
     * with one idempotency key. Rejects with TaskNotRunningError or SteerNotSupportedError.
     */
    steer: (taskId: string, text: string, options: { idempotencyKey?: string } = {}): Promise<SteerAnswer> =>
      this.json("POST", `/v1/tasks/${taskId}/input`, {
        text,
        idempotencyKey: options.idempotencyKey ?? newKey(),
      }),
    /** One page of what the turn changed in the workspace: per file its stats and unified diff (follow `nextCursor`). */
    diff: (taskId: string, options: DiffPageOptions = {}): Promise<WorkspaceDiff> =>
      this.json("GET", `/v1/tasks/${taskId}/diff`, undefined, options),
    /** Follows a task, from `afterSeq` (a cursor saved earlier) or from its start. */
    follow: (taskId: string, options: FollowOptions = {}): Run => this.runOf(taskId, options, null),
  };

  gate(): Promise<GateStatus> {
    return this.json("GET", "/v1/gate");
  }

  /** The gateway instances, live ones first (GET /v1/instances). */
  async instances(): Promise<Instance[]> {
    return (await this.json<{ items: Instance[] }>("GET", "/v1/instances")).items;
  }

  private runOf(taskId: string, options: FollowOptions, task: Task | null): Run {
    return new Run(new Follower(this.settings, taskId, options, task), this.http);
  }
}
