/**
 * The recap a fresh agent conversation starts with (docs/agents.md, Carried-over context). When a
 * conversation must start over (a failed resume, an unsaved one, an agent that cannot reload), the
 * agent's own memory of the session is gone, but mooring's log is not: the recent turns' prompts
 * and final replies, newest last, within the session's `agentConfig.carryOverChars`, marked as a
 * recap. The driver sends the text ahead of the prompt (agents/carry-over.ts).
 */
import type { Logger } from "pino";
import type { CarryOver } from "../agents/carry-over.js";
import type { Queryable } from "../db/client.js";
import { type RecapTurnRow, taskReadRecapTurns } from "../sql/task-recap-turns.js";

export const RECAP_HEAD =
  "[mooring recap] This conversation was restarted and your earlier context is gone. Below are the most recent turns of the session, oldest first, from mooring's log. They are background only, not a new request.";
export const RECAP_TAIL = "[end of recap] The new message follows.";
/** Marks text the budget cut. */
export const CUT_MARK = " […cut]";
/** Below this many characters left, a turn that does not fit whole is left out rather than cut. */
const MIN_CUT_TURN_CHARS = 200;
/** The fewest characters a turn's block takes (its headings): bounds how many turns are read. */
const MIN_TURN_CHARS = 40;
/** Turns read at most, whatever the budget. */
const MAX_TURNS = 500;

/** A turn as the recap takes it. */
export interface RecapTurn {
  /** 0-based, as stored; shown 1-based. */
  turnIndex: number;
  status: string;
  prompt: string;
  reply: string | null;
  /** Whether prompt or reply were cut before they got here (the SQL cuts to the budget). */
  promptCut?: boolean;
  replyCut?: boolean;
}

const joined = (parts: string[]) => parts.join("\n\n");

/** `text` cut to at most `max` characters, the cut marked, never inside a surrogate pair. */
export function cutText(text: string, max: number, alreadyCut = false): string {
  if (text.length <= max && !alreadyCut) return text;
  if (max <= CUT_MARK.length) return CUT_MARK.trim().slice(0, Math.max(0, max));
  let end = Math.min(text.length, max - CUT_MARK.length);
  const last = text.charCodeAt(end - 1);
  if (last >= 0xd800 && last <= 0xdbff) end -= 1;
  return text.slice(0, end) + CUT_MARK;
}

function replyOf(turn: RecapTurn): string {
  if (turn.reply !== null && turn.reply !== "") return turn.reply;
  return turn.status === "completed" ? "(no text)" : `(no reply: the turn ended ${turn.status})`;
}

function block(turn: RecapTurn, prompt: string, reply: string): string {
  const n = turn.turnIndex + 1;
  return `--- turn ${n}, user ---\n${prompt}\n--- turn ${n}, assistant ---\n${reply}`;
}

/** The turn's block cut to at most `room` characters: prompt and reply share what is left. */
function cutBlock(turn: RecapTurn, room: number): string | null {
  const frame = block(turn, "", "").length;
  const left = room - frame;
  if (left < 2 * CUT_MARK.length + 20) return null;
  const prompt = turn.prompt;
  const reply = replyOf(turn);
  // The shorter of the two keeps all it needs; the other gets the rest.
  const half = Math.floor(left / 2);
  const promptMax = prompt.length <= half ? prompt.length : Math.max(half, left - reply.length);
  const replyMax = left - Math.min(prompt.length, promptMax);
  return block(turn, cutText(prompt, promptMax, turn.promptCut), cutText(reply, replyMax, turn.replyCut));
}

/**
 * The recap of `turns` (newest first, as read) within `budget` characters, newest last; null when
 * there is nothing to carry or the budget cannot hold even one turn. Whole turns are taken newest
 * first while they fit; the first that does not fit is cut to the room left (when enough is left,
 * always for the newest), and older turns are left out.
 */
export function buildRecap(turns: RecapTurn[], budget: number): CarryOver | null {
  if (budget <= 0 || turns.length === 0) return null;
  const fixed = RECAP_HEAD.length + RECAP_TAIL.length + 4;
  const blocks: string[] = [];
  let used = fixed;
  for (const turn of turns) {
    const sep = blocks.length > 0 ? 2 : 0;
    const room = budget - used - sep;
    const whole = turn.promptCut || turn.replyCut ? null : block(turn, turn.prompt, replyOf(turn));
    if (whole !== null && whole.length <= room) {
      blocks.push(whole);
      used += sep + whole.length;
      continue;
    }
    if (blocks.length === 0 || room >= MIN_CUT_TURN_CHARS) {
      const cut = cutBlock(turn, room);
      if (cut !== null) {
        blocks.push(cut);
        used += sep + cut.length;
      }
    }
    break;
  }
  if (blocks.length === 0) return null;
  const text = joined([RECAP_HEAD, joined(blocks.reverse()), RECAP_TAIL]);
  return { text, turns: blocks.length, chars: text.length };
}

/** The turns to read for a budget: as many as could fit, no more. */
function turnsToRead(budget: number): number {
  return Math.min(MAX_TURNS, Math.ceil(budget / MIN_TURN_CHARS));
}

const fromRow = (row: RecapTurnRow): RecapTurn => ({
  turnIndex: row.turnIndex,
  status: row.status,
  prompt: row.prompt,
  reply: row.reply,
  promptCut: row.promptChars > row.prompt.length,
  replyCut: row.reply !== null && row.replyChars > row.reply.length,
});

/**
 * The recap of a session from the database, or null (nothing to carry, carry-over off). Never
 * throws: a recap that cannot be read is logged and the fresh start goes on without one.
 */
export async function readCarryOver(
  q: Queryable,
  sessionId: string,
  budget: number,
  log: Logger,
): Promise<CarryOver | null> {
  if (budget <= 0) return null;
  try {
    const rows = await taskReadRecapTurns(q, sessionId, turnsToRead(budget), budget);
    return buildRecap(rows.map(fromRow), budget);
  } catch (err) {
    log.warn({ err, sessionId }, "could not read the session's log for a recap; starting fresh without one");
    return null;
  }
}
