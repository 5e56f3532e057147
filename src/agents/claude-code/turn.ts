/**
 * Waiting for one turn on a running process: it ends at its own `result` line, or when the
 * process exits first. A cancel is escalated: interrupt, then SIGTERM, then SIGKILL.
 */
import { randomUUID } from "node:crypto";
import type { AgentProcess, ProcessExit } from "./process.js";
import { interruptRequest, type StreamLine } from "./protocol.js";

export type TurnEnd = { kind: "result"; line: StreamLine } | { kind: "exit"; exit: ProcessExit };

/** How long the CLI gets to honour an interrupt, and then SIGTERM, before the next step. */
export const interruptGraceMs = 3000;
export const terminateGraceMs = 2000;

export function waitForTurnEnd(
  proc: AgentProcess,
  signal: AbortSignal,
  onLine: (line: StreamLine) => StreamLine | null,
): Promise<TurnEnd> {
  return new Promise<TurnEnd>((resolve) => {
    const timers: NodeJS.Timeout[] = [];
    let ended = false;
    const end = (value: TurnEnd) => {
      if (ended) return;
      ended = true;
      // Lines after the result (or from a dying process) belong to no turn.
      proc.onLine(() => {});
      for (const timer of timers) clearTimeout(timer);
      signal.removeEventListener("abort", cancel);
      resolve(value);
    };
    function cancel() {
      proc.send(interruptRequest(randomUUID()));
      timers.push(
        setTimeout(() => proc.signal("SIGTERM"), interruptGraceMs),
        setTimeout(() => proc.signal("SIGKILL"), interruptGraceMs + terminateGraceMs),
      );
    }
    proc.onLine((line) => {
      const result = onLine(line);
      if (result) end({ kind: "result", line: result });
    });
    void proc.exited.then((exit) => end({ kind: "exit", exit }));
    if (signal.aborted) cancel();
    else signal.addEventListener("abort", cancel, { once: true });
  });
}
