/**
 * Interactive approvals for Claude Code (docs/claude-code.md). With the entry's
 * `permissions: "ask"` the CLI runs with `--permission-prompt-tool stdio`: every tool call that
 * needs permission arrives on stdout as `control_request` `can_use_tool`, and the CLI waits,
 * forever, for a `control_response` with exactly that `request_id` (an unknown id is dropped
 * without a word). The gateway relays it to clients with three options:
 *
 * - Allow once → `{behavior: "allow", updatedInput: input}`;
 * - Allow for this session → the same, and the gateway keeps a rule (the tool's name) for this
 *   conversation and answers that tool by itself afterwards. Never the CLI's own
 *   `permission_suggestions`: their `localSettings` destination writes
 *   `.claude/settings.local.json` into the user's workspace;
 * - Deny → `{behavior: "deny", message}`, the client's message verbatim (the model sees it).
 *
 * `AskUserQuestion` (flagged `requires_user_interaction`) is relayed as kind `question`; the
 * client's `answers` go back as `updatedInput.answers`. An interrupt (our cancel) makes the CLI
 * withdraw a pending request (`control_cancel_request`): it is then never answered.
 */
import type { Logger } from "pino";
import type { PermissionAnswer, TurnSink } from "../driver.js";
import type { AgentProcess } from "./process.js";
import { controlResponse, type StreamLine } from "./protocol.js";

const ALLOW = "allow";
const ALLOW_SESSION = "allow_session";
const DENY = "deny";
const ANSWER = "answer";

const toolOptions = [
  { optionId: ALLOW, name: "Allow once", kind: "allow_once" },
  { optionId: ALLOW_SESSION, name: "Allow for this session", kind: "allow_always" },
  { optionId: DENY, name: "Deny", kind: "reject_once" },
];
const questionOptions = [
  { optionId: ANSWER, name: "Answer", kind: "allow_once" },
  { optionId: DENY, name: "Decline", kind: "reject_once" },
];

const denyMessages: Record<PermissionAnswer["by"], string> = {
  client: "The user denied this tool use.",
  timeout: "Nobody answered the permission request in time, so this tool use was denied.",
  cancel: "The turn was cancelled.",
  restart: "The gateway stopped before anyone answered.",
  gateway: "The gateway denied this tool use without asking anyone.",
};

export class ClaudeApprovals {
  /** Tools a person allowed for the rest of this conversation ("Allow for this session"). */
  private readonly sessionRules = new Set<string>();
  /** Requests the CLI withdrew (control_cancel_request): never answered. */
  private readonly withdrawn = new Set<string>();

  constructor(private readonly log: Logger) {}

  /**
   * Handles a permission line; false for every other line. Called synchronously for each stdout
   * line of the turn, so a relayed request is answered later, by its exact id.
   */
  handle(line: StreamLine, proc: AgentProcess, sink: TurnSink): boolean {
    if (line.type === "control_cancel_request" && line.request_id) {
      this.withdrawn.add(line.request_id);
      this.log.info({ requestId: line.request_id }, "claude-code withdrew a permission request");
      return true;
    }
    if (line.type !== "control_request" || line.request?.subtype !== "can_use_tool" || !line.request_id) return false;
    void this.answer(line.request_id, line.request, proc, sink);
    return true;
  }

  private async answer(
    requestId: string,
    request: NonNullable<StreamLine["request"]>,
    proc: AgentProcess,
    sink: TurnSink,
  ): Promise<void> {
    const tool = request.tool_name ?? "tool";
    const input = request.input ?? {};
    const question = tool === "AskUserQuestion" || request.requires_user_interaction === true;
    const reply = (response: unknown) => {
      if (this.withdrawn.delete(requestId)) return; // withdrawn: answering it would be ignored anyway
      proc.send(controlResponse(requestId, response));
    };
    if (!question && this.sessionRules.has(tool)) {
      this.log.info({ tool, toolUseId: request.tool_use_id, by: "session rule" }, "claude-code permission answered by a session rule");
      reply({ behavior: "allow", updatedInput: input });
      return;
    }
    if (!sink.requestPermission) {
      reply({ behavior: "deny", message: denyMessages.restart });
      return;
    }
    const answer = await sink.requestPermission({
      toolCall: {
        id: request.tool_use_id ?? requestId,
        name: tool,
        title: request.title ?? request.description ?? request.display_name ?? tool,
        kind: question ? "question" : "other",
        input,
      },
      options: question ? questionOptions : toolOptions,
    });
    if (answer.optionId === ALLOW || answer.optionId === ALLOW_SESSION || answer.optionId === ANSWER) {
      if (answer.optionId === ALLOW_SESSION) this.sessionRules.add(tool);
      reply({
        behavior: "allow",
        updatedInput: question && answer.answers ? { ...input, answers: answer.answers } : input,
      });
      return;
    }
    reply({ behavior: "deny", message: answer.message ?? denyMessages[answer.by] });
  }
}
