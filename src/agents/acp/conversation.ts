/**
 * One mooring session's conversation with an ACP agent: a warm process and ACP session reused by
 * every turn until the process dies or the pipeline closes it.
 */
import type { ClientConnection, PromptResponse, SessionNotification } from "@agentclientprotocol/sdk";
import type { Logger } from "pino";
import type { CarryOver } from "../carry-over.js";
import {
  AgentFailure,
  type AgentConversation,
  type OpenConversationOptions,
  type ResumeCursor,
  type RunTurnOptions,
  type TurnOutcome,
  type TurnSink,
} from "../driver.js";
import { connectToAgent, drainReceived } from "./connection.js";
import { answerPermission, permissionAnswer, relayedAnswer } from "./permissions.js";
import { AgentProcess, describeExit } from "./process.js";
import { mcpServersOf } from "./mcp-servers.js";
import { startAgentSession } from "./session-start.js";
import { EXIT_SETTLE_MS, StepFailure, step } from "./step.js";
import { TurnRecorder } from "./turn-recorder.js";

/** After `session/cancel`, how long the agent has to answer the prompt before it is terminated. */
const CANCEL_GRACE_MS = 3000;
/** Between SIGTERM and SIGKILL. */
const TERM_GRACE_MS = 2000;
/** Between closing the agent's stdin (its cue to save and exit) and SIGTERM. */
const EOF_GRACE_MS = 500;

interface Live {
  proc: AgentProcess;
  conn: ClientConnection;
  agentSessionId: string;
}

export class AcpConversation implements AgentConversation {
  private proc: AgentProcess | null = null;
  private live: Live | null = null;
  private recorder: TurnRecorder | null = null;
  private cursor: ResumeCursor;
  private dead = false;
  private closed = false;
  private busy = false;
  /** The running turn's sink and signal: where a permission request is relayed to (`ask`). */
  private turn: { sink: TurnSink; signal: AbortSignal } | null = null;
  private readonly log: Logger;
  /** The recap a fresh start carries over, sent ahead of the next prompt (agents/carry-over.ts). */
  private recap: CarryOver | null = null;

  constructor(private readonly options: OpenConversationOptions) {
    this.cursor = options.cursor;
    this.log = options.log.child({ sessionId: options.sessionId, agent: options.entry.name, driver: "acp" });
  }

  get alive(): boolean {
    return !this.dead && !this.closed;
  }

  async runTurn({ prompt, sink, signal }: RunTurnOptions): Promise<TurnOutcome> {
    if (signal.aborted) throw new AgentFailure("CANCELLED", "The turn was cancelled before it started.");
    if (!this.alive) throw new AgentFailure("AGENT_CRASHED", "The agent process is no longer running.");
    if (this.busy)
      throw new AgentFailure("AGENT_ERROR", "Another turn is still running in this conversation.");
    this.busy = true;
    this.turn = { sink, signal };
    try {
      // Checked at every turn, so a warm agent whose folder was swapped since does not go on.
      const cwd = await this.options.resolveWorkspace();
      const live = this.live ?? (await this.start(cwd, sink, signal));
      return await this.prompt(live, prompt, sink, signal);
    } finally {
      this.busy = false;
      this.turn = null;
    }
  }

  close(mode: "graceful" | "kill"): Promise<void> {
    this.closed = true;
    const proc = this.proc;
    if (!proc) return Promise.resolve();
    if (!proc.exitInfo) this.log.info({ mode, agentPid: proc.pid }, "closing agent");
    const stopped = mode === "kill" ? proc.kill() : proc.stop(EOF_GRACE_MS, TERM_GRACE_MS);
    return stopped.catch(() => {}).finally(() => this.live?.conn.close());
  }

  /** Spawn the agent in `cwd` (the workspace as resolved for this turn) and open its ACP session there. */
  private async start(cwd: string, sink: TurnSink, signal: AbortSignal): Promise<Live> {
    const { entry } = this.options;
    let proc: AgentProcess;
    try {
      proc = this.spawn(cwd);
    } catch (err) {
      this.dead = true;
      this.log.error({ err: (err as Error).message, command: entry.command, cwd }, "agent spawn failed");
      // The message a client sees names the agent, never the program's path.
      throw new AgentFailure("AGENT_START_FAILED", `The agent "${entry.name}" could not start.`);
    }
    const conn = connectToAgent(proc, {
      onUpdate: (notification) => this.route(notification),
      onPermission: async (request) => {
        const policy = permissionAnswer(entry, this.options.agentConfig);
        const turn = this.turn;
        if (policy === "ask") {
          // Relayed with the agent's options as they are; a stop of the turn answers `cancelled`.
          if (!turn?.sink.requestPermission || turn.signal.aborted)
            return { outcome: { outcome: "cancelled" } };
          const call = request.toolCall;
          const answer = await turn.sink.requestPermission({
            toolCall: {
              id: call.toolCallId,
              name: call.title ?? call.kind ?? "tool",
              title: call.title ?? call.toolCallId,
              kind: call.kind ?? "other",
              input: call.rawInput ?? null,
            },
            options: request.options.map((o) => ({ optionId: o.optionId, name: o.name, kind: o.kind })),
          });
          return relayedAnswer(answer, request.options);
        }
        const answer = policy;
        const response = answerPermission(answer, request.options);
        this.log.info(
          { tool: request.toolCall.title ?? request.toolCall.toolCallId, answer, outcome: response.outcome },
          "agent permission request answered",
        );
        return response;
      },
    });
    try {
      const started = await startAgentSession({
        agentName: entry.name,
        workspace: cwd,
        mcpServers: mcpServersOf(this.options.agentConfig),
        conn,
        proc,
        cursor: this.cursor,
        sink,
        signal,
        log: this.log,
        carryOver: this.options.carryOver,
        forkSourceMovedOn: this.options.forkSourceMovedOn,
      });
      this.cursor = started.cursor;
      this.live = { proc, conn, agentSessionId: started.agentSessionId };
      this.recap = started.recap ?? null;
      return this.live;
    } catch (err) {
      // A half-started agent is of no use to a later turn; the next conversation starts over.
      this.dead = true;
      void proc.stop(EOF_GRACE_MS, TERM_GRACE_MS).finally(() => conn.close());
      throw err;
    }
  }

  private spawn(cwd: string): AgentProcess {
    const { entry, workspace, env } = this.options;
    if (!entry.command) throw new Error("its registry entry has no command");
    const proc = new AgentProcess(entry, cwd, env, this.log);
    this.proc = proc;
    this.log.info(
      {
        // The folder it really runs in (resolved just now), next to the session's workspace.
        cwd,
        workspace,
        command: entry.command,
        agentPid: proc.pid,
        agentSessionId: this.cursor.agentSessionId ?? "new",
        // mooring does not pick an ACP agent's model: the agent's own default applies.
        model: "agent default",
      },
      "agent spawned",
    );
    void proc.exited.then((info) => {
      this.dead = true;
      const level = this.closed ? "info" : "warn";
      this.log[level]({ code: info.code, signal: info.signal, stderr: proc.stderrTail() }, "agent exited");
    });
    return proc;
  }

  private route(notification: SessionNotification): void {
    if (notification.sessionId !== this.live?.agentSessionId) return;
    this.recorder?.apply(notification.update);
  }

  private async prompt(live: Live, text: string, sink: TurnSink, signal: AbortSignal): Promise<TurnOutcome> {
    const turnCount = this.cursor.turnCount + 1;
    await this.save(sink, { ...this.cursor, agentSessionId: live.agentSessionId, turnCount });
    const writes: Promise<void>[] = [];
    const recorder = new TurnRecorder(
      (event) => sink.emit(event),
      `${live.agentSessionId}:${turnCount}`,
      (messageId) => writes.push(this.save(sink, { ...this.cursor, lastAssistantMessageId: messageId })),
    );
    this.recorder = recorder;
    let response: PromptResponse;
    try {
      const recap = this.recap;
      this.recap = null;
      const request = live.conn.agent.request("session/prompt", {
        sessionId: live.agentSessionId,
        // The recap is a block of its own, so the prompt stays the text the client sent.
        prompt: recap
          ? [
              { type: "text", text: recap.text },
              { type: "text", text },
            ]
          : [{ type: "text", text }],
      });
      response = await this.awaitPrompt(live, request, signal);
    } finally {
      // Updates that arrived just before the answer (or the crash) still belong to this turn.
      await drainReceived();
      this.recorder = null;
      await Promise.allSettled(writes);
    }
    await Promise.all(writes);
    recorder.finish();
    return {
      text: recorder.text,
      stopReason: signal.aborted ? "cancelled" : response.stopReason,
      usage: recorder.usage,
    };
  }

  private async awaitPrompt(
    live: Live,
    request: Promise<PromptResponse>,
    signal: AbortSignal,
  ): Promise<PromptResponse> {
    let escalation: NodeJS.Timeout | undefined;
    const onAbort = () => {
      this.log.info({ agentSessionId: live.agentSessionId }, "cancelling agent turn");
      live.conn.agent.notify("session/cancel", { sessionId: live.agentSessionId }).catch(() => {});
      escalation = setTimeout(() => {
        this.log.warn({ graceMs: CANCEL_GRACE_MS }, "agent ignored session/cancel; terminating it");
        void live.proc.terminate(TERM_GRACE_MS);
      }, CANCEL_GRACE_MS);
    };
    if (signal.aborted) onAbort();
    else signal.addEventListener("abort", onAbort, { once: true });
    try {
      return await step(request, live.proc);
    } catch (err) {
      throw await this.turnFailure(live, err, signal);
    } finally {
      clearTimeout(escalation);
      signal.removeEventListener("abort", onAbort);
    }
  }

  private async turnFailure(live: Live, err: unknown, signal: AbortSignal): Promise<AgentFailure> {
    const failure = err instanceof StepFailure ? err : new StepFailure("broken", String(err), err);
    if (failure.kind === "error") {
      if (signal.aborted) return new AgentFailure("CANCELLED", "The turn was cancelled.");
      this.log.warn({ err: failure.message }, "agent answered the prompt with an error");
      return new AgentFailure("AGENT_ERROR", `The agent reported an error: ${failure.message}`);
    }
    // Whatever broke the connection, the process cannot serve another turn.
    this.dead = true;
    const exit = await live.proc.waitForExit(EXIT_SETTLE_MS);
    void live.proc.stop(0, TERM_GRACE_MS).finally(() => live.conn.close());
    if (signal.aborted) return new AgentFailure("CANCELLED", "The turn was cancelled.");
    const how = exit ? describeExit(exit) : `its connection broke (${failure.message})`;
    this.log.error(
      { err: failure.message, exit, stderr: live.proc.stderrTail() },
      "agent died during a turn",
    );
    return new AgentFailure(
      "AGENT_CRASHED",
      `The agent "${this.options.entry.name}" stopped mid-turn: ${how}.`,
    );
  }

  private async save(sink: TurnSink, cursor: ResumeCursor): Promise<void> {
    this.cursor = cursor;
    await sink.saveCursor(cursor);
  }
}
