/**
 * Model-based test: random sequences of commands against two real gateway processes on
 * one database, checked after every step against a small reference model and the database rows.
 *
 * Commands: create a session; submit a turn on the simulated agent (`[sleep N] [deltas N]`,
 * sometimes `[history]` or `[fail AGENT_ERROR]`, each prompt tagged `~tN~`) with each `ifBusy`
 * (`steer` too: into the running turn, else queued as a turn) and with repeated idempotency keys; cancel a
 * task; steer a task (POST /v1/tasks/:id/input, on either instance); archive a session; fork a
 * session (its history must be the source's prefix); roll back one or two turns (refused while
 * busy, for too many, once archived; sometimes once the session's turns ended); ask a session's
 * agent what its conversation holds (`[history]`, once its turns ended); a turn, its rollback and
 * such a recall in a row; wait until the queued tasks left the queue (started or
 * expired: the queue timeout is short); wait for a task to end; kill -9 an instance and start it
 * again.
 *
 * Checked after every step: the gate never over its limits (also sampled from the database while
 * turns run); every answer as the model predicts (archived → SESSION_ARCHIVED, a repeated key → 200
 * with the same task, SESSION_BUSY only for ifBusy=reject, no task written for a refused submit);
 * a terminal state never changes; per task at most one `task.started` and one terminal event, the
 * terminal event last; each session's seqs 1..n without gaps; one turn at a time per session; one
 * key, one task; turn indexes never reused in a session (rollbacks included); what the agent held
 * before a turn (its `[history]` answer, a recap included) comes only from earlier turns of that
 * session, none of them rolled back before the turn ran. At the end of a run, once every task ended: each accepted task ended in exactly
 * one terminal state, a completed turn's output appears exactly once (a restart never ran it
 * twice), each steer was accepted (202: its `turn.input` event stored once, on its task, and the
 * agent saw it once in a completed turn, at most once in any other) or refused with
 * TASK_NOT_RUNNING (nothing stored), expired tasks never started and carry GATEWAY_BUSY/queue_timeout, interrupted ones
 * GATEWAY_RESTART, and no gateway logged an uncaught error or died on its own.
 *
 * Replay and longer runs (docs/architecture.md, Tests): MOORING_MODEL_SEED=<seed> replays a run
 * (the seed is printed at the start and in every failure), MOORING_MODEL_PATH=<path> with it
 * (and MOORING_MODEL_REPLAY=<replayPath> from the counterexample) replays the shrunk
 * counterexample directly, MOORING_MODEL_RUNS=<n> runs more sequences,
 * MOORING_MODEL_SHRINK=0 reports the first failure without shrinking.
 */
import fc from "fast-check";
import { expect, it } from "vitest";
import type { TestDatabase } from "../support/db.js";
import type { Answer } from "../support/gateway.js";
import { Processes, useProcessSuite } from "../support/lifecycle.js";
import {
  idempotencyProblems,
  overlapProblems,
  queuedTaskIds,
  readTaskFacts,
  seqProblems,
  TERMINAL,
  taskEventProblems,
} from "../support/model-checks.js";
import { ModelCluster } from "../support/model-cluster.js";

const LIMITS = { maxActive: 2, maxQueued: 3, queueTimeoutMs: 1500 };
const RUNS = Number(process.env.MOORING_MODEL_RUNS ?? 3);
const SEED = process.env.MOORING_MODEL_SEED ? Number(process.env.MOORING_MODEL_SEED) : Date.now() % 2 ** 31;
const PATH = process.env.MOORING_MODEL_PATH || undefined;
/** The commands' own replay hint, printed in a counterexample as `/*replayPath="…"*\/`. */
const REPLAY = process.env.MOORING_MODEL_REPLAY || undefined;
const MAX_COMMANDS = 16;
/** Sessions every run starts with (more are created by commands). */
const INITIAL_SESSIONS = 3;
/** kill -9 and restart costs seconds of process start on a loaded machine: at most this many per run. */
const KILLS_PER_RUN = 1;

const procs = new Processes();
let db: TestDatabase;
let workspace: string;
useProcessSuite("ws-model-", procs, (d, w) => {
  db = d;
  workspace = w;
});

// ---------------------------------------------------------------------------------------------
// The reference model

interface ModelSession {
  id: string;
  archived: boolean;
  /** idempotency key → the task it named */
  keys: Map<string, string>;
}

interface ModelTask {
  id: string;
  sessionId: string;
  expectedText: string;
  fails: boolean;
  /** Made by an `ifBusy: "steer"` submit that found nothing running: a prompt with no directives. */
  bare: boolean;
  /** The terminal state once seen; it must never change. */
  terminal: string | null;
}

/** A steer sent (its text is unique in the run, so its echo can be counted). */
interface ModelSteer {
  text: string;
  taskId: string;
  accepted: boolean;
}

interface Model {
  sessions: ModelSession[];
  tasks: ModelTask[];
  steers: ModelSteer[];
  /** Tasks a fork copied from its source (no submit made them). */
  carried: Set<string>;
  /** The next prompt tag (`~tN~`, unique in the run): what the agent saw can be traced to its turn. */
  nextTag: number;
  /** What the end of the run checked, for its summary line. */
  summary: string;
  kills: number;
  /** What each command saw, for the failure message. */
  trace: string[];
}

interface Real {
  cluster: ModelCluster;
}

const terminalStates = new Set<string>(TERMINAL);

function fail(m: Model, problem: string): never {
  throw new Error(`${problem}\ntrace of this run:\n  ${m.trace.join("\n  ")}`);
}

function pickSession(m: Model, index: number): ModelSession {
  return m.sessions[index % m.sessions.length];
}

// ---------------------------------------------------------------------------------------------
// Commands

type Cmd = fc.AsyncCommand<Model, Real>;

class CreateSession implements Cmd {
  constructor(readonly instance: number) {}
  check = () => true;
  async run(m: Model, r: Real) {
    const res = await r.cluster.request(this.instance, "POST", "/v1/sessions", {
      workspace,
      agent: "simulated",
    });
    m.trace.push(`${this} → ${res.status} on ${res.instance}`);
    if (res.status !== 201) fail(m, `session not created: ${res.status} ${JSON.stringify(res.body)}`);
    m.sessions.push({ id: res.body.id, archived: false, keys: new Map() });
    await checkStep(m, r);
  }
  toString = () => `createSession(on ${this.instance})`;
}

type IfBusy = "enqueue" | "reject" | "interrupt" | "steer" | undefined;

/**
 * One turn to submit: which session (an index into the model's), where, how, what. An `ifBusy:
 * "steer"` submit's prompt has no directives (`steer-submit`): steered into a running turn it is
 * that turn's input, echoed, or its follow-up prompt, which would run any directive it held.
 */
class TurnSpec {
  constructor(
    readonly session: number,
    readonly instance: number,
    readonly ifBusy: IfBusy,
    readonly key: string | null,
    readonly sleepMs: number,
    readonly deltas: number,
    readonly fails: boolean,
    /** `[history]`: the turn answers what its agent conversation held before it. */
    readonly history: boolean,
  ) {}
  get steers(): boolean {
    return this.ifBusy === "steer";
  }
  get prompt(): string {
    if (this.steers) return "steer-submit";
    return `[sleep ${this.sleepMs}] [deltas ${this.deltas}]${this.history ? " [history]" : ""}${this.fails ? " [fail AGENT_ERROR]" : ""}`;
  }
  toString = () =>
    `{session ${this.session}, on ${this.instance}, ifBusy ${this.ifBusy ?? "-"}, key ${this.key ?? "-"}, "${this.prompt}"}`;
}

interface SubmitAnswer {
  spec: TurnSpec;
  /** The prompt sent: the spec's, tagged `~tN~` (text outside directives, which the agent ignores). */
  prompt: string;
  session: ModelSession;
  res: Answer & { instance: string };
  /** The task the key named before this submit was sent (submits sent together race each other). */
  knownBefore: string | undefined;
}

async function send(m: Model, r: Real, spec: TurnSpec): Promise<SubmitAnswer> {
  const session = pickSession(m, spec.session);
  const knownBefore = spec.key ? session.keys.get(spec.key) : undefined;
  const prompt = `${spec.prompt} ~t${m.nextTag++}~`;
  const body = {
    prompt,
    ...(spec.ifBusy ? { ifBusy: spec.ifBusy } : {}),
    ...(spec.key ? { idempotencyKey: spec.key } : {}),
  };
  const res = await r.cluster.request(spec.instance, "POST", `/v1/sessions/${session.id}/turns`, body);
  return { spec, prompt, session, res, knownBefore };
}

/**
 * The model's verdict on a submit's answer. A key known before the submit was sent must answer
 * 200 with its task. Submits sent together race: their answers are judged new tasks first, and a
 * key one of them made may answer the others 200 with that task, or what a new key may answer.
 */
function judge(m: Model, { spec, prompt, session, res, knownBefore: known }: SubmitAnswer): void {
  const code = res.body?.error?.code;
  m.trace.push(
    `  ${spec} "${prompt}" on session ${session.id.slice(0, 8)} → ${res.status} ${code ?? res.body?.status ?? ""} ${res.body?.id ?? ""} on ${res.instance}`,
  );
  const madeTogether = spec.key && !known ? session.keys.get(spec.key) : undefined;
  // A repeated key answers its task whatever the session's state (docs/decisions.md); found by
  // this test when only ifBusy=enqueue did so on an archived session.
  if (session.archived && !known) {
    if (res.status !== 409 || code !== "SESSION_ARCHIVED")
      fail(m, `a turn for an archived session answered ${res.status} ${code}`);
  } else if (known) {
    if (res.status !== 200 || res.body.id !== known)
      fail(
        m,
        `a repeated idempotency key answered ${res.status} ${res.body?.id ?? code}, not 200 with task ${known}`,
      );
  } else if (madeTogether && res.status === 200) {
    if (res.body.id !== madeTogether)
      fail(m, `a key made by a submit sent together answered 200 with ${res.body.id}, not ${madeTogether}`);
  } else if (spec.steers && res.status === 200) {
    // Steered into the session's running turn: a task of this run, in this session, not seen ended.
    const task = m.tasks.find((t) => t.id === res.body.id);
    if (!task || task.sessionId !== session.id)
      fail(m, `ifBusy steer answered 200 with task ${res.body.id}, not one of this session's`);
    if (task.terminal) fail(m, `ifBusy steer went to task ${task.id}, seen ${task.terminal} before`);
    m.steers.push({ text: prompt, taskId: task.id, accepted: true });
  } else if (res.status === 202) {
    if (madeTogether) fail(m, `key ${spec.key} made two tasks: ${madeTogether} and ${res.body.id}`);
    if (!["queued", "running"].includes(res.body.status)) fail(m, `a new task is ${res.body.status}`);
    if (res.body.sessionId !== session.id || res.body.prompt !== prompt)
      fail(m, "the new task is not the one submitted");
    if (m.tasks.some((t) => t.id === res.body.id)) fail(m, `202 for a task id seen before: ${res.body.id}`);
    m.tasks.push({
      id: res.body.id,
      sessionId: session.id,
      expectedText: spec.steers ? `You said: ${prompt}` : chunks(spec.deltas),
      fails: spec.fails && !spec.steers,
      bare: spec.steers,
      terminal: null,
    });
    if (spec.key) session.keys.set(spec.key, res.body.id);
  } else if (res.status === 409 && code === "SESSION_BUSY") {
    if (spec.ifBusy !== "reject") fail(m, `SESSION_BUSY for ifBusy=${spec.ifBusy}`);
  } else if (!(res.status === 429 && code === "GATEWAY_BUSY" && res.body.error.reason === "queue_full")) {
    fail(m, `unexpected answer to a submit: ${res.status} ${JSON.stringify(res.body)}`);
  }
}

/**
 * Submit turns all at once (one alone is a plain submit), spread over both instances; `ifBusy:
 * "steer"` ones right after the others.
 */
class Submit implements Cmd {
  constructor(readonly specs: TurnSpec[]) {}
  check = (m: Readonly<Model>) => m.sessions.length > 0;
  async run(m: Model, r: Real) {
    m.trace.push(`${this}:`);
    // Steer submits go once the others were answered, so that they find the turns those started.
    const answers = await Promise.all(
      this.specs.filter((spec) => !spec.steers).map((spec) => send(m, r, spec)),
    );
    answers.push(
      ...(await Promise.all(this.specs.filter((spec) => spec.steers).map((spec) => send(m, r, spec)))),
    );
    const created = (a: SubmitAnswer) => (a.res.status === 202 ? 0 : 1);
    for (const answer of [...answers].sort((a, b) => created(a) - created(b))) judge(m, answer);
    await checkStep(m, r);
  }
  toString = () => `submit(${this.specs.map(String).join(", ")})`;
}

/** A command on the `target`-th task or session of the model, sent to instance `instance`. */
abstract class Targeted {
  constructor(
    readonly target: number,
    readonly instance: number,
  ) {}
}

class Cancel extends Targeted implements Cmd {
  check = (m: Readonly<Model>) => m.tasks.length > 0;
  async run(m: Model, r: Real) {
    const task = m.tasks[this.target % m.tasks.length];
    const res = await r.cluster.request(this.instance, "POST", `/v1/tasks/${task.id}/cancel`);
    m.trace.push(
      `${this} → ${res.status} ${res.body?.status} (task ${task.id.slice(0, 8)}) on ${res.instance}`,
    );
    if (res.status !== 200) fail(m, `cancel answered ${res.status} ${JSON.stringify(res.body)}`);
    if (task.terminal && res.body.status !== task.terminal)
      fail(m, `cancel changed terminal task ${task.id}: ${task.terminal} → ${res.body.status}`);
    if (!task.terminal && !["cancelling", ...TERMINAL].includes(res.body.status))
      fail(m, `a cancelled task is ${res.body.status}`);
    await checkStep(m, r);
  }
  toString = () => `cancel(task ${this.target}, on ${this.instance})`;
}

/** Steer a task: 202 while it runs, else 409 TASK_NOT_RUNNING; never anything else. */
class Steer extends Targeted implements Cmd {
  check = (m: Readonly<Model>) => m.tasks.length > 0;
  async run(m: Model, r: Real) {
    // A task not seen ended yet when there is one: most of those still run, so steers get taken.
    const open = m.tasks.filter((t) => !t.terminal);
    const pool = open.length > 0 ? open : m.tasks;
    const task = pool[this.target % pool.length];
    const text = `steer${m.steers.length}x`;
    const res = await r.cluster.request(this.instance, "POST", `/v1/tasks/${task.id}/input`, { text });
    const code = res.body?.error?.code;
    m.trace.push(
      `${this} → ${res.status} ${code ?? ""} (task ${task.id.slice(0, 8)}, "${text}") on ${res.instance}`,
    );
    if (res.status === 202) {
      if (res.body.taskId !== task.id || res.body.text !== text || res.body.created !== true)
        fail(m, `a steer answered 202 with ${JSON.stringify(res.body)}`);
      if (task.terminal) fail(m, `a steer of terminal task ${task.id} (${task.terminal}) was accepted`);
      m.steers.push({ text, taskId: task.id, accepted: true });
    } else if (res.status === 409 && code === "TASK_NOT_RUNNING") {
      m.steers.push({ text, taskId: task.id, accepted: false });
    } else {
      fail(m, `unexpected answer to a steer: ${res.status} ${JSON.stringify(res.body)}`);
    }
    await checkStep(m, r);
  }
  toString = () => `steer(open task ${this.target}, on ${this.instance})`;
}

class Archive extends Targeted implements Cmd {
  check = (m: Readonly<Model>) => m.sessions.length > 0;
  async run(m: Model, r: Real) {
    const session = pickSession(m, this.target);
    const res = await r.cluster.request(this.instance, "DELETE", `/v1/sessions/${session.id}`);
    m.trace.push(
      `${this} → ${res.status} ${res.body?.status} (session ${session.id.slice(0, 8)}) on ${res.instance}`,
    );
    if (res.status !== 200 || res.body.status !== "archived")
      fail(m, `archive answered ${res.status} ${JSON.stringify(res.body)}`);
    session.archived = true;
    await checkStep(m, r);
  }
  toString = () => `archive(session ${this.target}, on ${this.instance})`;
}

/** Fork a session at its last completed turn: the fork's history is the source's prefix. */
class Fork extends Targeted implements Cmd {
  check = (m: Readonly<Model>) => m.sessions.length > 0;
  async run(m: Model, r: Real) {
    const source = pickSession(m, this.target);
    const res = await r.cluster.request(this.instance, "POST", `/v1/sessions/${source.id}/fork`, {});
    m.trace.push(
      `${this} → ${res.status} ${res.body?.error?.code ?? res.body?.id ?? ""} (session ${source.id.slice(0, 8)}) on ${res.instance}`,
    );
    if (
      res.status === 400 &&
      res.body.error.code === "INVALID_REQUEST" &&
      res.body.error.field === "atTurn"
    ) {
      const [done] = await db.sql`select 1 from tasks where session_id = ${source.id} and status = 'completed'
        and rolled_back_at is null and finished_at < now() - interval '1 second'`;
      if (done) fail(m, "fork refused for a session with a completed turn");
    } else if (res.status === 201) {
      const at = res.body.forkedFrom?.turnIndex;
      if (res.body.forkedFrom?.sessionId !== source.id)
        fail(m, `fork's forkedFrom is ${JSON.stringify(res.body.forkedFrom)}`);
      const shape = (rows: any[]) =>
        rows.map((t) => `${t.turnIndex}:${t.status}:${t.rolledBack}:${t.prompt}`).join(" | ");
      const carried =
        await db.sql`select id, turn_index, status, rolled_back_at is not null as rolled_back, prompt
        from tasks where session_id = ${res.body.id} order by turn_index`;
      const prefix =
        await db.sql`select turn_index, status, rolled_back_at is not null as rolled_back, prompt from tasks
        where session_id = ${source.id} and turn_index <= ${at} and status in ('completed', 'failed', 'cancelled', 'expired', 'interrupted')
          and last_seq <= (select last_seq from tasks where session_id = ${source.id} and turn_index = ${at})
        order by turn_index`;
      if (shape(carried) !== shape(prefix))
        fail(m, `fork history ${shape(carried)} is not the source's prefix ${shape(prefix)}`);
      for (const t of carried) m.carried.add(t.id as string);
      m.sessions.push({ id: res.body.id, archived: false, keys: new Map() });
    } else fail(m, `fork answered ${res.status} ${JSON.stringify(res.body)}`);
    await checkStep(m, r);
  }
  toString = () => `fork(session ${this.target}, on ${this.instance})`;
}

/**
 * Roll back 1 or 2 turns: refused while busy, for too many, for an archived session; else marked.
 * `settled`: once the session's turns ended, so that the rollback itself is what is tested.
 */
class Rollback extends Targeted implements Cmd {
  constructor(
    target: number,
    instance: number,
    readonly turns: number,
    readonly settled: boolean,
  ) {
    super(target, instance);
  }
  check = (m: Readonly<Model>) => m.sessions.length > 0;
  async run(m: Model, r: Real) {
    const session = pickSession(m, this.target);
    if (this.settled) await settle(m, r, session);
    const res = await r.cluster.request(this.instance, "POST", `/v1/sessions/${session.id}/rollback`, {
      turns: this.turns,
    });
    const code = res.body?.error?.code;
    m.trace.push(
      `${this} → ${res.status} ${code ?? ""} (session ${session.id.slice(0, 8)}) on ${res.instance}`,
    );
    if (session.archived) {
      if (res.status !== 409 || code !== "SESSION_ARCHIVED")
        fail(m, `rollback of an archived session answered ${res.status} ${code}`);
    } else if (res.status === 200) {
      const marked = res.body.turns.filter((t: { rolledBack: boolean }) => t.rolledBack).length;
      if (marked < this.turns) fail(m, `rollback of ${this.turns} shows ${marked} rolled-back turns`);
    } else if (
      !(res.status === 409 && code === "SESSION_BUSY") &&
      !(res.status === 400 && code === "INVALID_REQUEST")
    ) {
      fail(m, `rollback answered ${res.status} ${JSON.stringify(res.body)}`);
    }
    await checkStep(m, r);
  }
  toString = () =>
    `rollback(session ${this.target}, ${this.turns} turns, on ${this.instance}${this.settled ? ", settled" : ""})`;
}

/** Wait until every turn of the session the model knows of has ended. */
async function settle(m: Model, r: Real, session: ModelSession): Promise<void> {
  for (const task of m.tasks)
    if (task.sessionId === session.id) await waitFor(m, r, task.id, (s) => terminalStates.has(s));
}

/**
 * Ask a session's agent what its conversation holds (`[history]`), after the session's turns ended,
 * and wait for the answer: the history invariant (checkStep) then has an answer to check.
 */
class Recall extends Targeted implements Cmd {
  check = (m: Readonly<Model>) => m.sessions.length > 0;
  async run(m: Model, r: Real) {
    const session = pickSession(m, this.target);
    await settle(m, r, session);
    const prompt = `[history] ~t${m.nextTag++}~`;
    const res = await r.cluster.request(this.instance, "POST", `/v1/sessions/${session.id}/turns`, {
      prompt,
    });
    const code = res.body?.error?.code;
    m.trace.push(
      `${this} "${prompt}" → ${res.status} ${code ?? res.body?.status ?? ""} ${res.body?.id ?? ""} on ${res.instance}`,
    );
    if (session.archived) {
      if (res.status !== 409 || code !== "SESSION_ARCHIVED")
        fail(m, `a turn for an archived session answered ${res.status} ${code}`);
    } else if (res.status === 202) {
      m.tasks.push({
        id: res.body.id,
        sessionId: session.id,
        expectedText: "",
        fails: false,
        bare: false,
        terminal: null,
      });
      const status = await waitFor(m, r, res.body.id, (s) => terminalStates.has(s));
      m.trace.push(`  → ${status}`);
    } else if (!(res.status === 429 && code === "GATEWAY_BUSY")) {
      fail(m, `unexpected answer to a submit: ${res.status} ${JSON.stringify(res.body)}`);
    }
    await checkStep(m, r);
  }
  toString = () => `recall(session ${this.target}, on ${this.instance})`;
}

/**
 * Two turns, the rollback of the second and a recall on one session, on the instances given (the
 * recall on the process that ran the turns: the agent branches its own memory at the kept turn;
 * on another: it starts fresh from the recap), so that the history invariant meets a rolled-back
 * turn in most runs, not only when random commands line up.
 */
class Undo extends Targeted implements Cmd {
  constructor(
    target: number,
    readonly instances: [number, number, number],
  ) {
    super(target, instances[0]);
  }
  check = (m: Readonly<Model>) => m.sessions.length > 0;
  async run(m: Model, r: Real) {
    const [turnOn, rollbackOn, recallOn] = this.instances;
    const session = pickSession(m, this.target);
    m.trace.push(`${this}:`);
    await settle(m, r, session);
    for (let i = 0; i < 2; i++) {
      await new Submit([new TurnSpec(this.target, turnOn, undefined, null, 0, 1, false, true)]).run(m, r);
      await settle(m, r, session);
    }
    await new Rollback(this.target, rollbackOn, 1, true).run(m, r);
    await new Recall(this.target, recallOn).run(m, r);
  }
  toString = () =>
    `undo(session ${this.target}, turn on ${this.instances[0]}, rollback on ${this.instances[1]}, recall on ${this.instances[2]})`;
}

/** Let queue timeouts pass: wait until every task queued now has left the queue (started or expired). */
class AwaitQueue implements Cmd {
  check = (m: Readonly<Model>) => m.tasks.length > 0;
  async run(m: Model, r: Real) {
    const queued = await queuedTaskIds(db.sql);
    m.trace.push(`${this}: ${queued.length} queued`);
    await Promise.all(queued.map((id) => waitFor(m, r, id, (status) => status !== "queued")));
    await checkStep(m, r);
  }
  toString = () => "awaitQueue()";
}

/** Let a turn finish (or its lease be taken over). */
class AwaitTask implements Cmd {
  constructor(readonly task: number) {}
  check = (m: Readonly<Model>) => m.tasks.length > 0;
  async run(m: Model, r: Real) {
    const task = m.tasks[this.task % m.tasks.length];
    const status = await waitFor(m, r, task.id, (s) => terminalStates.has(s));
    m.trace.push(`${this} → ${status} (task ${task.id.slice(0, 8)})`);
    await checkStep(m, r);
  }
  toString = () => `awaitTask(${this.task})`;
}

class KillAndRestart implements Cmd {
  constructor(readonly instance: number) {}
  check = (m: Readonly<Model>) => m.kills < KILLS_PER_RUN;
  async run(m: Model, r: Real) {
    m.kills++;
    const id = await r.cluster.killAndRestart(this.instance);
    m.trace.push(`${this}: killed ${id}, starting it again`);
    await checkStep(m, r);
  }
  toString = () => `kill9AndRestart(${this.instance})`;
}

/** What the simulated agent streams for `[deltas n]`. */
function chunks(n: number): string {
  return Array.from({ length: n }, (_, i) => `chunk ${i + 1} `).join("");
}

/** Long-polls a task (on whichever instance is up) until `done(status)`; returns the status. */
async function waitFor(
  m: Model,
  r: Real,
  taskId: string,
  done: (status: string) => boolean,
): Promise<string> {
  for (let polls = 0; ; polls++) {
    const res = await r.cluster.request(polls, "GET", `/v1/tasks/${taskId}?waitMs=2000`);
    if (res.status !== 200) fail(m, `GET task ${taskId}: ${res.status} ${JSON.stringify(res.body)}`);
    if (done(res.body.status)) return res.body.status;
    // A generous bound, only so that a stuck task fails the test with its trace instead of hanging.
    if (polls > 60) fail(m, `task ${taskId} still ${res.body.status} after ${polls} long polls`);
  }
}

// ---------------------------------------------------------------------------------------------
// Checks

/** Everything that must hold after any step. */
async function checkStep(m: Model, r: Real): Promise<void> {
  const { cluster } = r;
  const sql = db.sql;
  const now = await cluster.sampler.sample();
  if (cluster.sampler.violations.length > 0) fail(m, cluster.sampler.violations.join("\n"));
  const gate = await cluster.request(0, "GET", "/v1/gate");
  if (
    gate.status !== 200 ||
    gate.body.maxActive !== LIMITS.maxActive ||
    gate.body.maxQueued !== LIMITS.maxQueued ||
    gate.body.active > LIMITS.maxActive ||
    gate.body.queued > LIMITS.maxQueued
  )
    fail(m, `GET /v1/gate: ${gate.status} ${JSON.stringify(gate.body)} (database: ${JSON.stringify(now)})`);

  const ids = m.sessions.map((s) => s.id);
  const facts = await readTaskFacts(sql, ids);
  const problems = [
    ...taskEventProblems(facts),
    ...(await seqProblems(sql, ids)),
    ...(await overlapProblems(sql, ids)),
    ...(await idempotencyProblems(sql, ids)),
    ...(await steerStoreProblems(m)),
  ];
  const byId = new Map(facts.map((f) => [f.id, f]));
  for (const task of m.tasks) {
    const row = byId.get(task.id);
    if (!row) {
      problems.push(`accepted task ${task.id} is not in the database`);
      continue;
    }
    if (task.terminal && row.status !== task.terminal)
      problems.push(`task ${task.id}: terminal ${task.terminal} became ${row.status}`);
    if (terminalStates.has(row.status)) task.terminal = row.status;
  }
  // No task written for a refused submit, none twice for one accepted.
  for (const row of facts) {
    if (!m.tasks.some((t) => t.id === row.id) && !m.carried.has(row.id))
      problems.push(`task ${row.id} (${row.status}) was written, but no submit was accepted for it`);
  }
  for (const session of m.sessions) {
    for (const [key, taskId] of session.keys) {
      const row = byId.get(taskId);
      if (row && row.idempotencyKey !== key)
        problems.push(`task ${taskId}: key ${row.idempotencyKey}, submitted with ${key}`);
    }
  }
  problems.push(...(await turnIndexProblems(ids)));
  problems.push(...historyProblems(await readHistories(ids)));
  if (problems.length > 0) fail(m, problems.join("\n"));
}

/** The tags (`~tN~`) in a text, in order. */
const tagsIn = (text: string) => text.match(/~t\d+~/g) ?? [];

/**
 * The `[history]` answers in a turn's text, `history: <JSON list> ` each (deltas may be stored
 * merged, so they are found in the text, not by event), or `history: unknown ` (this process never
 * saw the conversation). A list may hold earlier answers (a recap quotes replies): the outer one is
 * taken whole.
 */
function historyAnswersIn(text: string): string[] {
  const found: string[] = [];
  for (let at = text.indexOf("history: "); at >= 0; at = text.indexOf("history: ", at + 1)) {
    if (text.startsWith("history: unknown ", at)) {
      found.push("history: unknown ");
      continue;
    }
    const start = at + "history: ".length;
    for (let end = text.indexOf("] ", start); end >= 0; end = text.indexOf("] ", end + 1)) {
      try {
        JSON.parse(text.slice(start, end + 1));
      } catch {
        continue;
      }
      found.push(text.slice(at, end + 2));
      at = end;
      break;
    }
  }
  return found;
}

interface Histories {
  /** Each `[history]` answer (`history: <JSON> `), with its task. */
  answers: { taskId: string; text: string }[];
  /** The session's turns (a fork's carried ones included), by id. */
  turns: Map<string, { sessionId: string; turnIndex: number; rolledBackAt: Date | null }>;
  /** `<sessionId> <tag>` → the turn whose prompt or steered input carried the tag. */
  tagged: Map<string, string>;
}

async function readHistories(ids: string[]): Promise<Histories> {
  const turns = await db.sql<
    { id: string; sessionId: string; turnIndex: number; rolledBackAt: Date | null; prompt: string }[]
  >`
    select id, session_id, turn_index, rolled_back_at, prompt from tasks where session_id = any(${ids}::uuid[])`;
  const inputs = await db.sql<{ taskId: string; sessionId: string; text: string }[]>`
    select task_id, session_id, data->>'text' as text from events
    where session_id = any(${ids}::uuid[]) and type = 'turn.input'`;
  const texts = await db.sql<{ taskId: string; text: string }[]>`
    select task_id, string_agg(data->>'text', '' order by seq) as text from events
    where session_id = any(${ids}::uuid[]) and type = 'message.delta' and task_id is not null
    group by task_id`;
  const answers = texts.flatMap(({ taskId, text }) =>
    historyAnswersIn(text).map((a) => ({ taskId, text: a })),
  );
  const tagged = new Map<string, string>();
  for (const t of turns) for (const tag of tagsIn(t.prompt)) tagged.set(`${t.sessionId} ${tag}`, t.id);
  for (const i of inputs) for (const tag of tagsIn(i.text)) tagged.set(`${i.sessionId} ${tag}`, i.taskId);
  return { answers, turns: new Map(turns.map((t) => [t.id, t])), tagged };
}

/**
 * What an agent conversation held before a turn (its `[history]` answer: earlier prompts, steered
 * follow-ups, or a recap of them) comes from earlier turns of the turn's own session only (a fork's
 * carried turns are its own), and never from a turn that had been rolled back before this turn ran:
 * a rolled-back turn's content does not reach the agent again. A turn rolled back together with
 * the earlier one (the same rollback, so the same instant) had seen it legitimately.
 */
function historyProblems({ answers, turns, tagged }: Histories): string[] {
  const problems: string[] = [];
  for (const answer of answers) {
    const k = turns.get(answer.taskId);
    if (!k) continue;
    for (const tag of tagsIn(answer.text)) {
      const j = turns.get(tagged.get(`${k.sessionId} ${tag}`) ?? "");
      const where = `turn ${k.turnIndex} of session ${k.sessionId} (task ${answer.taskId})`;
      if (!j)
        problems.push(
          `${where}: its agent held ${tag}, which no turn of its session carried: ${answer.text}`,
        );
      else if (j.turnIndex >= k.turnIndex)
        problems.push(`${where}: its agent held ${tag} of its own or a later turn ${j.turnIndex}`);
      else if (j.rolledBackAt && (!k.rolledBackAt || j.rolledBackAt < k.rolledBackAt))
        problems.push(
          `${where}: its agent held ${tag} of turn ${j.turnIndex}, rolled back before it: ${answer.text}`,
        );
    }
  }
  return problems;
}

/** Each accepted steer's `turn.input` is stored once, on its task; a refused one not at all. */
async function steerStoreProblems(m: Model): Promise<string[]> {
  if (m.steers.length === 0) return [];
  const rows = await db.sql<{ text: string; taskId: string }[]>`
    select data->>'text' as text, task_id from events
    where session_id = any(${m.sessions.map((s) => s.id)}::uuid[]) and type = 'turn.input'`;
  const problems: string[] = [];
  for (const steer of m.steers) {
    const stored = rows.filter((r) => r.text === steer.text);
    if (steer.accepted && (stored.length !== 1 || stored[0].taskId !== steer.taskId))
      problems.push(
        `accepted steer "${steer.text}" of task ${steer.taskId}: ${stored.length} turn.input events (${stored.map((s) => s.taskId).join(", ")})`,
      );
    if (!steer.accepted && stored.length !== 0) problems.push(`refused steer "${steer.text}" was stored`);
  }
  if (rows.length !== m.steers.filter((s) => s.accepted).length)
    problems.push(
      `${rows.length} turn.input events for ${m.steers.filter((s) => s.accepted).length} accepted steers`,
    );
  return problems;
}

/** How often `text` occurs in `haystack`. */
const occurrences = (haystack: string, text: string) => haystack.split(text).length - 1;

/** Turn indexes stay monotonic: none used twice in a session (a rollback never frees one), none past the next. */
async function turnIndexProblems(ids: string[]): Promise<string[]> {
  const rows = await db.sql<{ sessionId: string; turnIndex: number; n: number; next: number }[]>`
    select t.session_id, t.turn_index, count(*)::int as n, s.next_turn_index as next
    from tasks t join sessions s on s.id = t.session_id where t.session_id = any(${ids}::uuid[])
    group by t.session_id, t.turn_index, s.next_turn_index
    having count(*) > 1 or t.turn_index >= s.next_turn_index`;
  return rows.map(
    (r) => `session ${r.sessionId}: turn index ${r.turnIndex} used ${r.n} times (next ${r.next})`,
  );
}

/**
 * The end of a run: every task ended (an instance killed in the run may still be starting again:
 * requests go to the other one, and its turns are settled by the lease sweep or its reconcile),
 * and the end states right.
 */
async function finishRun(m: Model, r: Real): Promise<void> {
  for (const task of m.tasks) await waitFor(m, r, task.id, (s) => terminalStates.has(s));
  await checkStep(m, r);
  const facts = new Map(
    (
      await readTaskFacts(
        db.sql,
        m.sessions.map((s) => s.id),
      )
    ).map((f) => [f.id, f]),
  );
  const { answers, turns } = await readHistories(m.sessions.map((s) => s.id));
  const rolledBack = [...turns.values()].filter((t) => t.rolledBackAt).length;
  const steerSubmits = m.steers.filter((s) => s.text.startsWith("steer-submit")).length;
  m.summary = `${answers.length} history answers (${answers.filter((a) => tagsIn(a.text).length > 0).length} naming earlier turns), ${rolledBack} rolled-back turns, ${steerSubmits} steer submits steered / ${m.tasks.filter((t) => t.bare).length} queued`;
  const problems: string[] = [];
  for (const task of m.tasks) {
    const t = facts.get(task.id)!;
    // The turn's `[history]` answer lists earlier prompts (steered texts among them): not its own output.
    let deltaText = t.deltaText;
    for (const answer of answers)
      if (answer.taskId === task.id) deltaText = deltaText.replace(answer.text, "");
    const api = await r.cluster.request(0, "GET", `/v1/tasks/${task.id}`);
    if (api.body.status !== t.status)
      problems.push(`task ${task.id}: the API says ${api.body.status}, the database ${t.status}`);
    // Each accepted steer seen by the agent once (echoed `steered TEXT `, or in the follow-up
    // prompt's `You said: …` when it came after the agent's last directive) in a completed turn,
    // at most once otherwise.
    const steers = m.steers.filter((s) => s.accepted && s.taskId === task.id);
    for (const steer of steers) {
      const seen = occurrences(deltaText, steer.text);
      if (seen > 1 || (t.status === "completed" && seen !== 1))
        problems.push(`task ${task.id} (${t.status}): steer "${steer.text}" seen ${seen} times by the agent`);
    }
    // The turn's own output, without the steers' echoes and the follow-up's answer. A bare prompt
    // (a steer submit queued as a turn) answers `You said: PROMPT`, unless input echoed first.
    let own = deltaText;
    for (const steer of steers) own = own.replaceAll(`steered ${steer.text} `, "");
    const echoedFirst = task.bare && own !== deltaText && !own.startsWith(task.expectedText);
    if (task.bare && own.startsWith(task.expectedText)) own = own.slice(task.expectedText.length);
    const followUp = steers.length > 0 && /You said: steer/.test(own);
    own = own.replace(/You said: steer[\s\S]*$/, "");
    if (t.status === "completed") {
      if (task.fails) problems.push(`task ${task.id}: completed, but its prompt fails`);
      if (t.started !== 1) problems.push(`task ${task.id}: completed with ${t.started} starts`);
      const expected = task.bare ? "" : task.expectedText;
      if (task.bare && !echoedFirst && !deltaText.startsWith(task.expectedText))
        problems.push(
          `task ${task.id}: output ${JSON.stringify(t.deltaText)}, expected ${JSON.stringify(task.expectedText)} first`,
        );
      if (own !== expected || t.messages !== (followUp ? 2 : 1))
        problems.push(
          `task ${task.id}: output ${JSON.stringify(t.deltaText)} in ${t.messages} messages, expected ${JSON.stringify(task.expectedText)} once`,
        );
    }
    if (t.status === "failed" && t.error?.code !== "AGENT_ERROR")
      problems.push(`task ${task.id}: failed with ${JSON.stringify(t.error)}`);
    if (
      t.status === "expired" &&
      (t.started !== 0 || t.error?.code !== "GATEWAY_BUSY" || t.error.reason !== "queue_timeout")
    )
      problems.push(`task ${task.id}: expired after ${t.started} starts with ${JSON.stringify(t.error)}`);
    if (t.status === "interrupted" && t.error?.code !== "GATEWAY_RESTART")
      problems.push(`task ${task.id}: interrupted with ${JSON.stringify(t.error)}`);
  }
  problems.push(
    ...r.cluster.fatalLines(),
    ...r.cluster.deadOnTheirOwn().map((id) => `${id} died on its own`),
  );
  if (problems.length > 0) fail(m, problems.join("\n"));
}

/** Before a run (also each replay while shrinking): nothing left running or queued. */
async function quiesce(r: Real): Promise<void> {
  const open = await db.sql<
    { id: string }[]
  >`select id from tasks where status in ('queued', 'running', 'cancelling')`;
  await Promise.all(open.map((t) => r.cluster.request(0, "POST", `/v1/tasks/${t.id}/cancel`)));
  const model: Model = {
    sessions: [],
    tasks: [],
    steers: [],
    carried: new Set(),
    nextTag: 0,
    summary: "",
    kills: 0,
    trace: ["(quiesce)"],
  };
  await Promise.all(open.map((t) => waitFor(model, r, t.id, (s) => terminalStates.has(s))));
}

// ---------------------------------------------------------------------------------------------
// Arbitraries

const instance = fc.integer({ min: 0, max: 1 });
const index = fc.nat({ max: 7 });
const turn = fc
  .record({
    session: index,
    instance,
    ifBusy: fc.constantFrom<IfBusy>(undefined, "enqueue", "reject", "interrupt", "steer"),
    key: fc.option(fc.constantFrom("k1", "k2", "k3"), { freq: 2 }),
    sleepMs: fc.constantFrom(0, 100, 400, 1200),
    deltas: fc.integer({ min: 1, max: 4 }),
    fails: fc.integer({ min: 0, max: 9 }).map((n) => n < 2),
    history: fc.integer({ min: 0, max: 2 }).map((n) => n === 0),
  })
  // A steer submit goes without a key: the key of an input (not of a task) is steer-api's to test.
  .map(
    (s) =>
      new TurnSpec(
        s.session,
        s.instance,
        s.ifBusy,
        s.ifBusy === "steer" ? null : s.key,
        s.sleepMs,
        s.deltas,
        s.fails,
        s.history,
      ),
  );
const submit = fc.array(turn, { minLength: 1, maxLength: 5 }).map((specs) => new Submit(specs));

const commands = fc.commands<Model, Real, false>(
  [
    instance.map((i) => new CreateSession(i)),
    submit,
    submit,
    submit,
    fc.tuple(index, instance).map(([t, i]) => new Cancel(t, i)),
    fc.tuple(index, instance).map(([t, i]) => new Steer(t, i)),
    fc.tuple(index, instance).map(([t, i]) => new Steer(t, i)),
    fc.tuple(index, instance).map(([s, i]) => new Archive(s, i)),
    fc.tuple(index, instance).map(([s, i]) => new Fork(s, i)),
    fc
      .tuple(index, instance, fc.integer({ min: 1, max: 2 }), fc.boolean())
      .map(([s, i, n, settled]) => new Rollback(s, i, n, settled)),
    fc.tuple(index, instance).map(([s, i]) => new Recall(s, i)),
    fc.tuple(index, instance, instance, instance).map(([s, a, b, c]) => new Undo(s, [a, b, c])),
    fc.constant(new AwaitQueue()),
    index.map((t) => new AwaitTask(t)),
    instance.map((i) => new KillAndRestart(i)),
  ],
  { maxCommands: MAX_COMMANDS, size: "max", ...(REPLAY ? { replayPath: REPLAY } : {}) },
);

it(`random command sequences against two gateways on one database keep the model's invariants (seed ${SEED}, ${RUNS} runs)`, async () => {
  console.log(`model test: MOORING_MODEL_SEED=${SEED} MOORING_MODEL_RUNS=${RUNS}`);
  const cluster = await ModelCluster.start(procs, db.url, db.sql, LIMITS);
  const real: Real = { cluster };
  let run = 0;
  try {
    await fc.assert(
      fc.asyncProperty(commands, async (cmds) => {
        run++;
        await quiesce(real);
        const model: Model = {
          sessions: [],
          tasks: [],
          steers: [],
          carried: new Set(),
          nextTag: 0,
          summary: "",
          kills: 0,
          trace: [],
        };
        try {
          for (let i = 0; i < INITIAL_SESSIONS; i++) await new CreateSession(i).run(model, real);
          await fc.asyncModelRun(() => ({ model, real }), cmds);
          await finishRun(model, real);
          const ends: Record<string, number> = {};
          for (const t of model.tasks) ends[t.terminal ?? "?"] = (ends[t.terminal ?? "?"] ?? 0) + 1;
          const accepted = model.steers.filter((s) => s.accepted).length;
          console.log(
            `model test: run ${run}: ${model.trace.length} steps, ${model.sessions.length} sessions, tasks ended ${JSON.stringify(ends)}, ${model.kills} kills, steers ${accepted} accepted / ${model.steers.length - accepted} refused, ${model.summary}`,
          );
        } catch (err) {
          console.log(
            `model test: run ${run} failed (MOORING_MODEL_SEED=${SEED}): ${[...cmds].map(String).join(", ")}\n${err}`,
          );
          throw err;
        }
      }),
      {
        seed: SEED,
        numRuns: RUNS,
        ...(PATH ? { path: PATH } : {}),
        endOnFailure: process.env.MOORING_MODEL_SHRINK === "0",
      },
    );
    console.log(
      `model test: ${run} runs, ${cluster.sampler.samples} gate samples, at most ${cluster.sampler.maxActiveSeen} active and ${cluster.sampler.maxQueuedSeen} queued (limits ${LIMITS.maxActive}/${LIMITS.maxQueued})`,
    );
    // The runs did reach the limits (else the gate checks proved little).
    expect(cluster.sampler.maxActiveSeen).toBeGreaterThan(0);
    // Instances started again in the last run are up, and nothing died or logged a fatal line.
    await cluster.settled();
    expect(cluster.fatalLines()).toEqual([]);
    expect(cluster.deadOnTheirOwn()).toEqual([]);
  } finally {
    await cluster.stop();
  }
}, 900_000);
