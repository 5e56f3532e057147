/**
 * One mooring session's conversation with Claude Code: a warm CLI process, the resume cursor, and
 * the recovery rules of docs/api.md, Restarts, resume and recovery (never resume a conversation that was proven unsaved; start
 * fresh once when a resume fails).
 */
import { contextPercent, contextWindowOf } from "../context.js";
import { randomUUID } from "node:crypto";
import { existsSync } from "node:fs";
import { stat } from "node:fs/promises";
import { join } from "node:path";
import type { Logger } from "pino";
import {
  AgentFailure,
  type AgentConversation,
  type AgentUsage,
  type OpenConversationOptions,
  type ResumeCursor,
  type Rewind,
  type RunTurnOptions,
  type TurnInput,
  type TurnOutcome,
  type TurnSink,
} from "../driver.js";
import { type CarryOver, carriedOverField, noticeWithCarryOver } from "../carry-over.js";
import { ClaudeApprovals } from "./approvals.js";
import { MarkerStrippingSink, selfReportInstruction, stripMarker } from "./context-marker.js";
import { type ClaudeCodeConfig, readClaudeCodeConfig } from "./config.js";
import { judgeTurn, type TurnVerdict } from "./outcome.js";
import { AgentProcess } from "./process.js";
import { type StreamLine, streamJsonArgs, userMessage } from "./protocol.js";
import {
  claudeConfigDir,
  expectedTranscriptPath,
  findTranscript,
  type TranscriptLookup,
} from "./transcript.js";
import { TurnTranslator } from "./events.js";
import { TranscriptMirror } from "./transcript-store.js";
import { waitForTurnEnd } from "./turn.js";

/**
 * The contract's restart notice ends "Send your message again to continue.", which fits when the
 * interrupted turn is settled; here the notice comes at the start of a turn that does run, in a
 * fresh conversation, so asking the user to resend it would be wrong (docs/claude-code.md).
 */
export const unsavedNotice =
  "The server restarted before this conversation was saved, so its context was lost. This message starts a fresh conversation.";
export const resumeFailedNotice = "Session context was too large to resume — starting fresh.";
/** Added to a fresh-start notice when the workspace has a CLAUDE.md, which the new conversation reads again. */
export const projectContextNote = "Project context is preserved in CLAUDE.md.";

/** A verdict together with what the turn observed, so the caller can report usage and text. */
interface Attempt {
  verdict: TurnVerdict;
  translator: TurnTranslator;
  result: StreamLine | null;
}

export class ClaudeConversation implements AgentConversation {
  private proc: AgentProcess | null = null;
  private cursor: ResumeCursor;
  private closed = false;
  private busy = false;
  /** The process was started with `--resume` and has not finished a turn: a failure is a failed resume. */
  private resuming = false;
  private model: string | undefined;
  private saving: Promise<void> = Promise.resolve();
  /** The fork or rollback this process's `--resume … --fork-session` applies, until the CLI names the branch. */
  private rewinding: Rewind | null = null;
  /** The recap a fresh start carries over, sent ahead of the next prompt (agents/carry-over.ts). */
  private recap: CarryOver | null = null;
  private readonly config: ClaudeCodeConfig;
  private readonly env: NodeJS.ProcessEnv;
  private readonly log: Logger;
  /** Where the CLI runs: the workspace as resolved and checked for this turn (options.resolveWorkspace). */
  private cwd: string;
  /** `permissions: "ask"`: the CLI asks the host (approvals.ts); else it never asks and denies. */
  private readonly asking: boolean;
  private readonly approvals: ClaudeApprovals;
  /** The transcript kept in Postgres (transcript-store.ts); null without a store. */
  private readonly mirror: TranscriptMirror | null;

  constructor(private readonly options: OpenConversationOptions) {
    this.cursor = structuredClone(options.cursor);
    this.config = readClaudeCodeConfig(options.agentConfig);
    this.env = options.env;
    this.cwd = options.workspace;
    this.log = options.log.child({ sessionId: options.sessionId, agent: options.entry.name });
    this.asking = options.entry.permissions === "ask";
    this.approvals = new ClaudeApprovals(this.log);
    this.mirror = options.transcripts ? new TranscriptMirror(options.transcripts, this.log) : null;
  }

  get alive(): boolean {
    return !this.closed && (this.proc === null || this.proc.alive);
  }

  /** pid of the current CLI process, if one runs (diagnostics and tests). */
  get pid(): number | undefined {
    return this.proc?.alive ? this.proc.pid : undefined;
  }

  /** The running turn's steered input (RunTurnOptions.input), while a turn runs. */
  private input: TurnInput | null = null;

  async runTurn({ prompt, sink: pipelineSink, signal, input }: RunTurnOptions): Promise<TurnOutcome> {
    if (this.closed) throw new AgentFailure("AGENT_CRASHED", "The agent conversation was already closed.");
    if (this.busy) throw new Error("claude-code runs one turn at a time per conversation");
    this.busy = true;
    this.input = input ?? null;
    // With self-reported context the marker never reaches the pipeline (context-marker.ts).
    const sink = this.config.selfReportContext ? new MarkerStrippingSink(pipelineSink) : pipelineSink;
    try {
      // Checked at every turn, so a warm process whose folder was swapped since does not go on.
      this.cwd = await this.options.resolveWorkspace();
      const first = await this.attempt(prompt, sink, signal, true);
      if (first.verdict.kind !== "resume_failed") return this.conclude(first, sink);
      return await this.startOver(first.verdict.error, prompt, sink, signal);
    } finally {
      await this.saving;
      // The turn's transcript is stored before the turn settles, so a host that takes the
      // session over next finds all of it.
      await this.syncTranscript();
      this.input = null;
      this.busy = false;
    }
  }

  async close(mode: "graceful" | "kill"): Promise<void> {
    this.closed = true;
    try {
      await this.proc?.close(mode);
    } catch (err) {
      this.log.warn({ err }, "claude-code close failed");
    }
  }

  /** Run the prompt on the warm process, starting (or resuming) one first when there is none. */
  private async attempt(
    prompt: string,
    sink: TurnSink,
    signal: AbortSignal,
    countTurn: boolean,
  ): Promise<Attempt> {
    const cancelled = (translator: TurnTranslator): Attempt => ({
      verdict: { kind: "cancelled" },
      translator,
      result: null,
    });
    if (signal.aborted) return cancelled(new TurnTranslator(noHooks));
    if (!this.proc?.alive) await this.start(sink);
    const proc = this.proc as AgentProcess;
    if (this.closed) {
      // Closed while the transcript check ran: the process just started must not outlive it.
      await proc.close("kill");
      return cancelled(new TurnTranslator(noHooks));
    }
    const translator = new TurnTranslator(
      {
        emit: (event) => sink.emit(event),
        sessionId: (id) => {
          if (id === this.cursor.agentSessionId) return;
          this.cursor.agentSessionId = id;
          // The CLI named the branch it forked: the rewind is applied (a crash before this applies it again).
          if (this.rewinding) {
            this.cursor.rewind = null;
            this.rewinding = null;
          }
          void this.save(sink);
        },
        assistantMessage: (uuid) => {
          this.cursor.lastAssistantMessageId = uuid;
          void this.save(sink);
        },
      },
      this.model,
    );
    if (signal.aborted) return cancelled(translator);
    // Counted before the prompt leaves: if we crash now, the cursor shows a turn that may be unsaved.
    if (countTurn) this.cursor.turnCount += 1;
    await this.save(sink);
    // Steered input (docs/claude-code.md, Steering): each goes to stdin as a user message while
    // the turn runs. The CLI echoes every user message it takes (--replay-user-messages); it takes
    // one mid-turn at its next model call, or, when the turn's last call was already under way,
    // runs it as a turn of its own right after this one's `result`. So the turn ends at the first
    // `result` after every message sent was echoed.
    let sent = 1;
    let replayed = 0;
    const ended = waitForTurnEnd(proc, signal, (line) => {
      if (line.type === "user" && line.isReplay === true) {
        replayed += 1;
        return null;
      }
      if (this.asking && this.approvals.handle(line, proc, sink)) return null;
      const result = translator.handle(line);
      if (result && sent > 1 && replayed < sent && !signal.aborted) {
        this.log.info(
          { sent: sent - 1, taken: replayed - 1 },
          "claude-code: steered input runs after this result",
        );
        return null;
      }
      return result;
    });
    proc.send(userMessage(prompt, this.recap?.text));
    this.recap = null;
    const release = this.input?.take((text) => {
      sent += 1;
      proc.send(userMessage(text));
    });
    let end: Awaited<typeof ended>;
    try {
      end = await ended;
    } finally {
      release?.();
    }
    if (translator.model) this.model = translator.model;
    const verdict = judgeTurn(end, {
      aborted: signal.aborted,
      resuming: this.resuming,
      stderr: proc.stderrTail(),
      apiErrorText: translator.apiErrorText,
    });
    if (verdict.kind !== "resume_failed") this.resuming = false;
    if (verdict.kind === "failed" && verdict.failure.code === "AGENT_CRASHED") {
      this.log.error(
        { agentPid: proc.pid, stderr: proc.stderrTail(), message: verdict.failure.message },
        "claude-code crashed",
      );
    }
    return { verdict, translator, result: end.kind === "result" ? end.line : null };
  }

  /**
   * Start a process for the cursor: resume its conversation unless the transcript check proves the
   * agent never saved it (an assistant message observed is proof enough; docs/api.md, Restarts, resume and recovery).
   */
  private async start(sink: TurnSink): Promise<void> {
    if (this.cursor.rewind) return this.startRewound(sink, this.cursor.rewind);
    const id = this.cursor.agentSessionId;
    if (!id) return this.spawnFresh();
    const configDir = claudeConfigDir(this.env);
    // A host that lacks the file (or has less of it) gets the stored copy first; the checks
    // below then find it, so the store also answers the unsaved check.
    await this.mirror?.restore(expectedTranscriptPath(configDir, this.cwd, id), id);
    const saved = this.cursor.lastAssistantMessageId !== null;
    const lookup = saved
      ? await this.quickLookup(configDir, id)
      : await findTranscript(configDir, this.cwd, id);
    if (!saved && lookup.state === "absent") {
      this.log.warn(
        { agentSessionId: id, turnCount: this.cursor.turnCount, configDir, cwd: this.cwd },
        "claude-code conversation was never saved; starting fresh",
      );
      this.forget(id);
      this.recap = (await this.options.carryOver?.()) ?? null;
      sink.emit({
        type: "session.reset",
        reason: "unsaved",
        notice: noticeWithCarryOver(this.withProjectNote(unsavedNotice), this.recap),
        ...carriedOverField(this.recap),
      });
      this.spawnFresh();
      this.log.warn(
        {
          oldAgentSessionId: id,
          newAgentSessionId: this.cursor.agentSessionId,
          cwd: this.cwd,
          reason: "unsaved",
          carriedOverTurns: this.recap?.turns ?? 0,
          carriedOverChars: this.recap?.chars ?? 0,
        },
        "claude-code fresh fallback",
      );
      return;
    }
    this.log.info({ agentSessionId: id, ...describeTranscript(lookup) }, "claude-code resuming conversation");
    this.spawn(["--resume", id], id);
    this.resuming = true;
  }

  /**
   * A fork or rollback (docs/claude-code.md, Fork and rollback): branch the kept conversation with
   * `--resume <id> --fork-session --resume-session-at <last kept assistant message>`, so the CLI
   * writes a new transcript holding the conversation up to that message and leaves the old one as
   * it was (the source session of a fork goes on in it). Without a branch point, or when the
   * transcript is not on this host nor in the store, a fresh conversation with the carried history.
   */
  private async startRewound(sink: TurnSink, rewind: Rewind): Promise<void> {
    const from = rewind.agentSessionId;
    if (from && rewind.messageId) {
      const configDir = claudeConfigDir(this.env);
      await this.mirror?.restore(expectedTranscriptPath(configDir, this.cwd, from), from);
      const lookup = await findTranscript(configDir, this.cwd, from);
      if (lookup.state === "found") {
        this.log.info(
          {
            fromAgentSessionId: from,
            messageId: rewind.messageId,
            kind: rewind.kind,
            ...describeTranscript(lookup),
          },
          "claude-code branching conversation",
        );
        const old = this.cursor.agentSessionId;
        if (old && old !== from && !this.cursor.pastAgentSessionIds.includes(old))
          this.cursor.pastAgentSessionIds.push(old);
        this.cursor.lastAssistantMessageId = null;
        this.rewinding = rewind;
        this.spawn(["--resume", from, "--fork-session", "--resume-session-at", rewind.messageId], from);
        this.resuming = true;
        return;
      }
      this.log.warn(
        { fromAgentSessionId: from, kind: rewind.kind },
        "claude-code transcript to branch is gone; starting fresh",
      );
    }
    await this.freshForRewind(sink, rewind);
    this.spawnFresh();
  }

  /** The fresh start that stands in for a branch: the carried history, a `session.reset` saying so. */
  private async freshForRewind(sink: TurnSink, rewind: Rewind): Promise<void> {
    const old = this.cursor.agentSessionId;
    if (old) this.forget(old);
    this.cursor.rewind = null;
    this.rewinding = null;
    this.recap = (await this.options.carryOver?.()) ?? null;
    const what = rewind.kind === "fork" ? "This fork" : "After the rollback, this conversation";
    sink.emit({
      type: "session.reset",
      reason: rewind.kind,
      notice: noticeWithCarryOver(
        this.withProjectNote(`${what} starts a fresh Claude Code conversation.`),
        this.recap,
      ),
      ...carriedOverField(this.recap),
    });
  }

  /** A resume failed: log it, clear the cursor, and run the turn once in a fresh conversation. */
  private async startOver(
    error: string,
    prompt: string,
    sink: TurnSink,
    signal: AbortSignal,
  ): Promise<TurnOutcome> {
    const oldId = this.cursor.agentSessionId;
    const proc = this.proc as AgentProcess;
    const transcript = oldId ? await findTranscript(claudeConfigDir(this.env), this.cwd, oldId) : undefined;
    this.log.error(
      {
        agentSessionId: oldId,
        error,
        stderr: proc.stderrTail(),
        cwd: this.cwd,
        ...(transcript ? describeTranscript(transcript) : {}),
      },
      "claude-code resume failed",
    );
    await proc.close("kill");
    this.resuming = false;
    const rewind = this.rewinding;
    if (rewind) {
      // The branch failed: the carried history stands in for it.
      await this.freshForRewind(sink, rewind);
      await this.save(sink);
      if (signal.aborted) return this.cancelledOutcome(null);
    } else {
      if (oldId) this.forget(oldId);
      this.recap = (await this.options.carryOver?.()) ?? null;
      await this.save(sink);
      if (signal.aborted) return this.cancelledOutcome(null);
      sink.emit({
        type: "session.reset",
        reason: "resume_failed",
        notice: noticeWithCarryOver(this.withProjectNote(resumeFailedNotice), this.recap),
        ...carriedOverField(this.recap),
      });
    }
    this.cwd = await this.options.resolveWorkspace();
    this.spawnFresh();
    this.log.warn(
      {
        oldAgentSessionId: oldId,
        newAgentSessionId: this.cursor.agentSessionId,
        carriedOverTurns: this.recap?.turns ?? 0,
        carriedOverChars: this.recap?.chars ?? 0,
        cwd: this.cwd,
        reason: "resume_failed",
      },
      "claude-code fresh fallback",
    );
    const second = await this.attempt(prompt, sink, signal, false);
    const { verdict } = second;
    if (verdict.kind === "ok" || verdict.kind === "cancelled") return this.conclude(second, sink);
    const reason = verdict.kind === "failed" ? verdict.failure.message : verdict.error;
    throw new AgentFailure(
      "AGENT_START_FAILED",
      `Could not start a fresh Claude Code conversation: ${reason}`,
    );
  }

  /**
   * Turn a verdict into the driver's answer, reporting usage. The pipeline derives the context
   * indicator from the `usage` event and appends the `[ctx: NN%]` suffix (one place for every driver).
   */
  private conclude({ verdict, translator, result }: Attempt, sink: TurnSink): TurnOutcome {
    const stripping = sink instanceof MarkerStrippingSink ? sink : null;
    stripping?.release();
    const measured = translator.usage(result);
    const usage = measured && stripping ? { ...measured, selfReportedPercent: stripping.percent } : measured;
    if (usage) {
      sink.emit({ type: "usage", usage });
      const window = contextWindowOf(usage, this.options.settings.contextWindow);
      const percent = contextPercent(usage, window);
      this.log.info(
        {
          agentSessionId: this.cursor.agentSessionId,
          inputTokens: usage.inputTokens,
          percent,
          contextWindow: window,
        },
        "claude-code turn context",
      );
      if (usage.selfReportedPercent != null) this.logDrift(usage, percent, usage.selfReportedPercent);
    }
    // The result line and the collected blocks still carry the marker the deltas lost.
    const visible = (text: string) => (stripping ? stripMarker(text).text : text);
    if (verdict.kind === "failed") throw verdict.failure;
    if (verdict.kind === "resume_failed") throw new AgentFailure("AGENT_START_FAILED", verdict.error);
    if (verdict.kind === "cancelled") return this.cancelledOutcome(usage, visible(translator.text()));
    return { text: visible(verdict.text ?? translator.text()), stopReason: verdict.stopReason, usage };
  }

  /** Both context figures side by side, so an operator can judge how far Claude's own guess drifts. */
  private logDrift(usage: AgentUsage, sdkPercent: number, selfReportedPercent: number): void {
    this.log.info(
      {
        sessionId: this.options.sessionId,
        agentSessionId: this.cursor.agentSessionId,
        sdkPercent,
        selfReportedPercent,
        drift: selfReportedPercent - sdkPercent,
        inputTokens: usage.inputTokens + usage.cacheCreationInputTokens + usage.cacheReadInputTokens,
      },
      "context_usage",
    );
  }

  private withProjectNote(notice: string): string {
    return existsSync(join(this.cwd, "CLAUDE.md")) ? `${notice} ${projectContextNote}` : notice;
  }

  private cancelledOutcome(usage: TurnOutcome["usage"], text = ""): TurnOutcome {
    return { text, stopReason: "cancelled", usage };
  }

  private spawnFresh(): void {
    // Choosing the id ourselves puts it in the cursor before the prompt is sent.
    const id = randomUUID();
    this.cursor.agentSessionId = id;
    this.cursor.lastAssistantMessageId = null;
    this.spawn(["--session-id", id], "new");
  }

  private spawn(sessionArgs: string[], logId: string): void {
    const { entry, workspace } = this.options;
    const cwd = this.cwd;
    const args = [...entry.args, ...streamJsonArgs, ...sessionArgs];
    if (this.config.model) args.push("--model", this.config.model);
    if (this.config.permissionMode) args.push("--permission-mode", this.config.permissionMode);
    if (this.asking) args.push("--permission-prompt-tool", "stdio");
    if (this.config.selfReportContext) args.push("--append-system-prompt", selfReportInstruction);
    const proc = new AgentProcess({ command: entry.command ?? "claude", args, cwd, env: this.env }, this.log);
    this.proc = proc;
    this.log.info(
      // cwd: the folder it really runs in (resolved just now), next to the session's workspace.
      { cwd, workspace, agentSessionId: logId, model: this.config.model ?? "default", agentPid: proc.pid },
      "claude-code spawned",
    );
    void proc.exited.then((exit) => {
      this.log.info({ agentPid: proc.pid, code: exit.code, signal: exit.signal }, "claude-code exited");
    });
  }

  /** Drop a conversation id from the cursor, remembering it; the turn count carries over. */
  private forget(id: string): void {
    this.cursor.agentSessionId = null;
    this.cursor.lastAssistantMessageId = null;
    if (!this.cursor.pastAgentSessionIds.includes(id)) this.cursor.pastAgentSessionIds.push(id);
  }

  /** Where the transcript is expected, for logs; no scan of other folders. */
  private async quickLookup(configDir: string, id: string): Promise<TranscriptLookup> {
    const path = expectedTranscriptPath(configDir, this.cwd, id);
    try {
      return { state: "found", path, bytes: (await stat(path)).size };
    } catch (err) {
      return { state: "unknown", reason: `${path}: ${(err as NodeJS.ErrnoException).code ?? "unreadable"}` };
    }
  }

  /** Saves are chained so they land in order; a failed save is logged, never fatal to the turn. */
  private save(sink: TurnSink): Promise<void> {
    const snapshot = structuredClone(this.cursor);
    this.saving = this.saving
      .then(() => sink.saveCursor(snapshot))
      .catch((err) => this.log.warn({ err }, "claude-code could not save the resume cursor"))
      .then(() => this.syncTranscript());
    return this.saving;
  }

  /** Store the new part of the current conversation's transcript file; never rejects. */
  private syncTranscript(): Promise<void> {
    const id = this.cursor.agentSessionId;
    if (!this.mirror || !id) return Promise.resolve();
    return this.mirror.sync(expectedTranscriptPath(claudeConfigDir(this.env), this.cwd, id), id);
  }
}

const noHooks = { emit: () => {}, sessionId: () => {}, assistantMessage: () => {} };

function describeTranscript(lookup: TranscriptLookup): Record<string, unknown> {
  if (lookup.state === "found") return { transcriptPath: lookup.path, transcriptBytes: lookup.bytes };
  if (lookup.state === "absent") return { transcript: "absent" };
  return { transcript: "unknown", transcriptProblem: lookup.reason };
}
