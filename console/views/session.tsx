/**
 * A session page: the session's figures and context meter, its turns, and the form to send one.
 * Past turns' events are read as JSON pages; every turn not finished yet is followed through the
 * SDK (`tasks.follow`, or the Run `turns.submit` returns), so the page recovers from dropped
 * streams and gateway restarts exactly as a user's own UI would.
 */
import { useEffect, useRef, useState } from "preact/hooks";
import {
  type EventPage,
  isTerminalEvent,
  isTerminalStatus,
  type MooringEvent,
  type Run,
  type SessionWithTurns,
  type Task,
} from "../../src/client/index.js";
import { ago } from "../format.js";
import { useNow } from "../hooks.js";
import { runState, state } from "../store.js";
import { Turn, type TurnModel } from "./turn.js";

/** The page's model of one session: turns by task id, each followed at most once. */
class SessionModel {
  session: SessionWithTurns | null = null;
  turns = new Map<string, TurnModel>();
  error: string | null = null;
  private readonly followed = new Set<string>();
  private readonly abort = new AbortController();

  constructor(
    readonly sessionId: string,
    private readonly changed: () => void,
  ) {}

  stop(): void {
    this.abort.abort();
  }

  /** Read the session and its turns' events, then follow the unfinished ones. */
  async load(): Promise<void> {
    const session = await state.client.sessions.get(this.sessionId);
    this.session = session;
    for (const t of session.turns) this.turnOf(t as Task);
    const seqs = session.turns.map((t) => t.firstSeq).filter((s): s is number => s !== null);
    if (seqs.length > 0) await this.readEvents(Math.min(...seqs) - 1);
    for (const t of session.turns)
      if (!isTerminalStatus(t.status))
        this.follow(state.client.tasks.follow(t.id, { signal: this.abort.signal }));
    this.changed();
  }

  /** Refresh the snapshot (status, context, turns sent from elsewhere). */
  async refresh(): Promise<void> {
    const session = await state.client.sessions.get(this.sessionId);
    this.session = session;
    for (const t of session.turns) {
      const known = this.turns.get(t.id);
      if (!known) this.follow(state.client.tasks.follow(t.id, { signal: this.abort.signal }), t as Task);
      else if (!this.followed.has(t.id)) known.task = { ...known.task, ...t };
      // A followed turn's status comes from its follow; a rollback marks it only in the snapshot.
      else if (known.task.rolledBack !== t.rolledBack) known.task = { ...known.task, rolledBack: t.rolledBack };
    }
    this.changed();
  }

  private turnOf(task: Task): TurnModel {
    let model = this.turns.get(task.id);
    if (!model) {
      model = { task, events: new Map(), follow: null };
      this.turns.set(task.id, model);
    }
    return model;
  }

  private async readEvents(afterSeq: number): Promise<void> {
    let cursor: number | null = afterSeq;
    while (cursor !== null && !this.abort.signal.aborted) {
      const page: EventPage = (
        await state.client.http.request<EventPage>("GET", `/v1/sessions/${this.sessionId}/events`, {
          query: { afterSeq: cursor, limit: 1000 },
          signal: this.abort.signal,
        })
      ).body;
      for (const e of page.items) this.add(e);
      cursor = page.nextAfterSeq;
    }
  }

  private add(e: MooringEvent): void {
    if (!e.taskId) return;
    this.turns.get(e.taskId)?.events.set(e.seq, e);
  }

  /** Follow a run: its events, its state (shown on the turn and in the header), its end. */
  follow(run: Run, task?: Task): void {
    if (this.followed.has(run.taskId)) return;
    this.followed.add(run.taskId);
    const model = this.turnOf(task ?? run.task ?? (this.turns.get(run.taskId)?.task as Task));
    run.on("state", (change) => {
      if (change.state !== "restart") model.follow = change.state;
      runState(run.taskId, change);
      if (run.task) model.task = run.task;
      this.changed();
    });
    run.on("event", (e) => {
      model.events.set(e.seq, e);
      if (e.type === "task.started") {
        model.task = { ...model.task, status: "running", startedAt: e.at };
        // The session is busy now: its figures need not wait for the next refresh.
        void this.refresh().catch(() => {});
      }
      if (run.task) model.task = { ...model.task, ...run.task, status: statusAfter(e, run.task.status) };
      this.changed();
    });
    run.done().then(
      (t) => {
        model.task = t;
        this.changed();
        void this.refresh().catch(() => {});
      },
      (err) => {
        if ((err as Error).name !== "AbortError") model.follow = `ended: ${(err as Error).message}`;
        runState(run.taskId, { state: "done", reason: "", at: Date.now() });
        this.changed();
      },
    );
  }
}

/** A task's status as of one of its events (the snapshot may lag the stream). */
function statusAfter(e: MooringEvent, current: string): Task["status"] {
  if (isTerminalEvent(e.type)) return e.type.slice("task.".length) as Task["status"];
  if (e.type === "task.started" && current === "queued") return "running";
  return current as Task["status"];
}

function SendTurn({ model }: { model: SessionModel }) {
  const [prompt, setPrompt] = useState("");
  const [ifBusy, setIfBusy] = useState("enqueue");
  const [loadClass, setLoadClass] = useState("");
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  return (
    <form
      class="card send"
      aria-label="Send a turn"
      onSubmit={async (e) => {
        e.preventDefault();
        setBusy(true);
        setError(null);
        try {
          const run = await state.client.turns.submit(model.sessionId, {
            prompt,
            ifBusy: ifBusy as "enqueue" | "reject" | "interrupt" | "steer",
            loadClass: (loadClass || undefined) as "short" | "long" | "complex" | undefined,
          });
          model.follow(run);
          setPrompt("");
        } catch (err) {
          setError((err as Error).message);
        } finally {
          setBusy(false);
        }
      }}
    >
      <label class="wide">
        Prompt
        <textarea rows={3} value={prompt} onInput={(e) => setPrompt(e.currentTarget.value)} />
      </label>
      <label>
        If busy
        <select value={ifBusy} onChange={(e) => setIfBusy(e.currentTarget.value)}>
          <option value="enqueue">queue behind</option>
          <option value="reject">refuse</option>
          <option value="interrupt">interrupt the running turn</option>
          <option value="steer">add to the running turn (steer)</option>
        </select>
      </label>
      <label>
        Load class
        <select value={loadClass} onChange={(e) => setLoadClass(e.currentTarget.value)}>
          <option value="">default</option>
          <option value="short">short (10 min)</option>
          <option value="long">long (30 min)</option>
          <option value="complex">complex (60 min)</option>
        </select>
      </label>
      <button type="submit" disabled={busy || prompt.trim() === ""}>
        Send
      </button>
      {error && (
        <p role="alert" class="error">
          {error}
        </p>
      )}
    </form>
  );
}

/** Drops the last completed turn from the conversation (POST /v1/sessions/:id/rollback, one turn). */
function RollBack({ model }: { model: SessionModel }) {
  const [error, setError] = useState<string | null>(null);
  return (
    <p>
      <button
        type="button"
        onClick={async () => {
          if (!confirm("Roll back the last completed turn? Its events stay in the log.")) return;
          try {
            await state.client.sessions.rollback(model.sessionId, 1);
            await model.refresh();
          } catch (err) {
            setError((err as Error).message);
          }
        }}
      >
        Roll back last turn
      </button>
      {error && (
        <span role="alert" class="error">
          {" "}
          {error}
        </span>
      )}
    </p>
  );
}

export function SessionView({ sessionId }: { sessionId: string }) {
  const [, setTick] = useState(0);
  const ref = useRef<SessionModel | null>(null);
  const now = useNow();
  useEffect(() => {
    const model = new SessionModel(sessionId, () => setTick((n) => n + 1));
    ref.current = model;
    model.load().catch((err) => {
      model.error = (err as Error).message;
      setTick((n) => n + 1);
    });
    const timer = setInterval(() => void model.refresh().catch(() => {}), 2000);
    return () => {
      clearInterval(timer);
      model.stop();
    };
  }, [sessionId, state.client]);
  const model = ref.current;
  const session = model?.session;
  if (!model || !session) return <p>{model?.error ?? "Loading the session…"}</p>;
  const turns = [...model.turns.values()].sort((a, b) => a.task.turnIndex - b.task.turnIndex);
  const canRollBack =
    session.status === "idle" && turns.some((t) => t.task.status === "completed" && !t.task.rolledBack);
  const percent = session.contextUsage?.percent ?? 0;
  return (
    <>
      <section class="card" aria-label="Session">
        <h2>{session.title || `Session ${session.id.slice(0, 8)}`}</h2>
        <dl class="facts">
          <dt>Status</dt>
          <dd>
            <span class={`status ${session.status}`}>{session.status}</span>
          </dd>
          <dt>Agent</dt>
          <dd>{session.agent}</dd>
          <dt>Workspace</dt>
          <dd class="path">{session.workspace}</dd>
          <dt>Last activity</dt>
          <dd>{ago(session.lastActivityAt, now)}</dd>
          <dt>Context</dt>
          <dd>
            <meter min={0} max={100} low={60} high={85} optimum={0} value={percent} aria-label="Context" />{" "}
            {session.contextUsage
              ? `${percent}% of ${session.contextUsage.contextWindow} tokens`
              : "not known yet"}
          </dd>
          {session.forkedFrom && (
            <>
              <dt>Forked from</dt>
              <dd>
                <a href={`#/sessions/${session.forkedFrom.sessionId}`}>
                  {session.forkedFrom.sessionId.slice(0, 8)}
                </a>
                , turn {session.forkedFrom.turnIndex + 1}
              </dd>
            </>
          )}
        </dl>
        {canRollBack && <RollBack model={model} />}
      </section>
      {session.status !== "archived" && <SendTurn model={model} />}
      <section aria-label="Turns">
        {turns.length === 0 && <p>No turns yet.</p>}
        {turns
          .slice()
          .reverse()
          .map((t) => (
            <Turn key={t.task.id} model={t} />
          ))}
      </section>
    </>
  );
}
