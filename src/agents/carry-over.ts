/**
 * Carried-over context, the drivers' side (docs/agents.md, Carried-over context): when an agent
 * conversation must start fresh, the first prompt of the new one is preceded by a recap of the
 * session that the pipeline built from its own log (domain/carry-over.ts). A driver only gets the
 * recap as text, sends it ahead of the prompt, and says so in its `session.reset` notice.
 */

/** A recap ready to send: its text and what it holds, for the notice and the event. */
export interface CarryOver {
  text: string;
  /** Turns of the session the recap holds (the newest of them possibly cut). */
  turns: number;
  /** `text.length`. */
  chars: number;
}

/** `agentConfig.carryOverChars` when a session does not choose. */
export const DEFAULT_CARRY_OVER_CHARS = 12_000;
/** The most a session may choose: a recap is part of a prompt the agent must take whole. */
export const MAX_CARRY_OVER_CHARS = 100_000;

/** The problem with a client's `agentConfig.carryOverChars`, or null when it is fine. */
export function carryOverCharsProblem(value: unknown): string | null {
  if (typeof value === "number" && Number.isInteger(value) && value >= 0 && value <= MAX_CARRY_OVER_CHARS)
    return null;
  return `agentConfig.carryOverChars must be an integer from 0 to ${MAX_CARRY_OVER_CHARS}`;
}

/** The budget a validated config asks for (0: carry-over off). */
export function carryOverCharsOf(config: Record<string, unknown>): number {
  const value = config.carryOverChars;
  return typeof value === "number" ? value : DEFAULT_CARRY_OVER_CHARS;
}

/** What a fresh start's `session.reset` carries about the recap. */
export interface CarriedOver {
  turns: number;
  chars: number;
}

/** A fresh start's notice, saying that (and how much) context was carried over when it was. */
export function noticeWithCarryOver(notice: string, carried: CarryOver | null): string {
  if (!carried) return notice;
  const turns = carried.turns === 1 ? "1 turn" : `${carried.turns} turns`;
  return `${notice} Context carried over: a recap of the last ${turns} (${carried.chars} characters) from the session's log.`;
}

/** The `session.reset` field about the recap: `carriedOver` only when one was carried. */
export function carriedOverField(carried: CarryOver | null): { carriedOver?: CarriedOver } {
  return carried ? { carriedOver: { turns: carried.turns, chars: carried.chars } } : {};
}
