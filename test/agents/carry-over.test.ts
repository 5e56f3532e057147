/**
 * The recap of a fresh start (src/domain/carry-over.ts): built from turns directly (bounds, order,
 * newest last, cuts), and read from a real database (which turns count, cutting in SQL).
 */
import pino from "pino";
import { describe, expect, it } from "vitest";
import { carryOverCharsOf, carryOverCharsProblem, noticeWithCarryOver } from "../../src/agents/carry-over.js";
import { drivers } from "../../src/agents/drivers.js";
import type { AgentEntry } from "../../src/agents/registry.js";
import {
  buildRecap,
  CUT_MARK,
  cutText,
  RECAP_HEAD,
  RECAP_TAIL,
  type RecapTurn,
  readCarryOver,
} from "../../src/domain/carry-over.js";
import type { Sql } from "../../src/db/client.js";
import { addSession, useSqlTestDatabase } from "../support/sql-fixtures.js";

const turn = (i: number, prompt: string, reply: string | null, status = "completed"): RecapTurn => ({
  turnIndex: i,
  status,
  prompt,
  reply,
});

/** Turns 0..n-1, newest first as the SQL reads them. */
const turns = (n: number, size = 10): RecapTurn[] =>
  Array.from({ length: n }, (_, i) =>
    turn(i, `p${i}:${"a".repeat(size)}`, `r${i}:${"b".repeat(size)}`),
  ).reverse();

describe("buildRecap", () => {
  it("holds every turn when they fit, oldest first and newest last, framed as a recap", () => {
    const recap = buildRecap(turns(3), 12_000);
    expect(recap).not.toBeNull();
    const text = recap!.text;
    expect(text.startsWith(RECAP_HEAD)).toBe(true);
    expect(text.endsWith(RECAP_TAIL)).toBe(true);
    expect(recap).toMatchObject({ turns: 3, chars: text.length });
    const at = (s: string) => text.indexOf(s);
    expect(at("p0:")).toBeGreaterThan(0);
    expect(at("p0:")).toBeLessThan(at("r0:"));
    expect(at("r0:")).toBeLessThan(at("p1:"));
    expect(at("p1:")).toBeLessThan(at("p2:"));
    expect(at("r2:")).toBeLessThan(at(RECAP_TAIL));
    expect(text).toContain("--- turn 1, user ---\np0:");
    expect(text).toContain("--- turn 3, assistant ---\nr2:");
  });

  it("keeps within the budget, leaving the oldest turns out", () => {
    const all = turns(50, 100);
    for (const budget of [600, 1000, 3000, 7777]) {
      const recap = buildRecap(all, budget)!;
      expect(recap.chars).toBeLessThanOrEqual(budget);
      expect(recap.text).toContain("p49:");
      expect(recap.text).not.toContain("p0:");
      expect(recap.turns).toBeLessThan(50);
    }
    // More room, more turns; always the newest ones.
    const small = buildRecap(all, 1500)!;
    const large = buildRecap(all, 4000)!;
    expect(large.turns).toBeGreaterThan(small.turns);
    expect(large.text).toContain(`p${50 - large.turns}:`);
    expect(large.text).not.toContain(`p${49 - large.turns}:`);
  });

  it("cuts the newest turn when it alone is larger than the budget, and marks the cut", () => {
    const big = [turn(7, "x".repeat(50_000), "y".repeat(50_000)), ...turns(3)];
    const recap = buildRecap(big, 2000)!;
    expect(recap.chars).toBeLessThanOrEqual(2000);
    expect(recap.turns).toBe(1);
    expect(recap.text).toContain("--- turn 8, user ---\nxxx");
    expect(recap.text).toContain("--- turn 8, assistant ---\nyyy");
    expect(recap.text.split(CUT_MARK)).toHaveLength(3);
    // The prompt and the reply share the room.
    const xs = recap.text.split("x").length - 1;
    const ys = recap.text.split("y").length - 1;
    expect(Math.abs(xs - ys)).toBeLessThan(10);
  });

  it("gives a short prompt its whole text and the long reply the rest", () => {
    const recap = buildRecap([turn(0, "why?", "z".repeat(10_000))], 1000)!;
    expect(recap.text).toContain("--- turn 1, user ---\nwhy?\n");
    expect(recap.chars).toBeLessThanOrEqual(1000);
    expect(recap.chars).toBeGreaterThan(950);
  });

  it("cuts an older turn to the room left when enough is left, and stops there", () => {
    const recap = buildRecap(
      [turn(2, "new", "newer"), turn(1, "o".repeat(5000), "p".repeat(5000)), turn(0, "old", "older")],
      1500,
    )!;
    expect(recap.turns).toBe(2);
    expect(recap.chars).toBeLessThanOrEqual(1500);
    expect(recap.text).toContain(CUT_MARK);
    expect(recap.text).not.toContain("older");
    expect(recap.text.indexOf("ooo")).toBeLessThan(recap.text.indexOf("newer"));
  });

  it("says how a turn without a reply ended", () => {
    const recap = buildRecap([turn(1, "second", null, "interrupted"), turn(0, "first", "")], 5000)!;
    expect(recap.text).toContain("(no reply: the turn ended interrupted)");
    expect(recap.text).toContain("--- turn 1, assistant ---\n(no text)");
  });

  it("gives nothing when off, empty, or too small to hold a turn", () => {
    expect(buildRecap(turns(3), 0)).toBeNull();
    expect(buildRecap([], 12_000)).toBeNull();
    expect(buildRecap(turns(3), RECAP_HEAD.length + 10)).toBeNull();
  });

  it("never cuts inside a surrogate pair", () => {
    const cut = cutText(`ab${"😀".repeat(10)}`, 2 + CUT_MARK.length + 3);
    expect(cut).toBe(`ab😀${CUT_MARK}`);
    expect(cutText("short", 100)).toBe("short");
    expect(cutText("short", 100, true)).toBe(`short${CUT_MARK}`);
  });

  it("says in the notice how much was carried over, and validates the budget", () => {
    expect(noticeWithCarryOver("Starting fresh.", null)).toBe("Starting fresh.");
    expect(noticeWithCarryOver("Starting fresh.", { text: "", turns: 3, chars: 1234 })).toBe(
      "Starting fresh. Context carried over: a recap of the last 3 turns (1234 characters) from the session's log.",
    );
    expect(carryOverCharsProblem(0)).toBeNull();
    expect(carryOverCharsProblem(12_000)).toBeNull();
    for (const bad of [-1, 1.5, "12000", 100_001, null])
      expect(carryOverCharsProblem(bad)).toMatch(/carryOverChars/);
  });
});

describe("agentConfig.carryOverChars", () => {
  it("is accepted by every driver within its bounds and refused, naming it, outside them", () => {
    for (const driver of Object.values(drivers)) {
      const entry: AgentEntry = {
        name: "x",
        driver: driver.name,
        command: "x",
        args: [],
        env: {},
        permissions: "deny",
        upstream: driver.name === "mooring" ? ({} as AgentEntry["upstream"]) : undefined,
      };
      for (const ok of [0, 500, 100_000]) {
        expect(driver.validateConfig(entry, { carryOverChars: ok }), driver.name).toMatchObject({
          ok: true,
          config: { carryOverChars: ok },
        });
      }
      for (const bad of [-1, 100_001, 2.5, "1000"]) {
        expect(driver.validateConfig(entry, { carryOverChars: bad }), driver.name).toMatchObject({
          ok: false,
          problem: expect.stringMatching(/^agentConfig\.carryOverChars must be an integer from 0 to 100000$/),
        });
      }
    }
    expect(carryOverCharsOf({})).toBe(12_000);
    expect(carryOverCharsOf({ carryOverChars: 0 })).toBe(0);
  });
});

describe("readCarryOver on a real database", () => {
  const db = useSqlTestDatabase();
  const log = pino({ level: "silent" });

  async function addTurn(
    sql: Sql,
    sessionId: string,
    turnIndex: number,
    status: string,
    prompt: string,
    reply: string | null,
    started = true,
  ) {
    await sql`insert into tasks (session_id, turn_index, status, prompt, timeout_ms, queue_deadline_at, started_at, result)
      values (${sessionId}, ${turnIndex}, ${status}, ${prompt}, 60000, now(), ${started ? new Date() : null},
              ${reply === null ? null : JSON.stringify({ text: reply, stopReason: "end_turn" })}::text::jsonb)`;
  }

  it("reads the ended turns that ran, newest last, leaving out the running and never-started ones", async () => {
    const sql = db.sql;
    const sessionId = await addSession(sql);
    const other = await addSession(sql);
    await addTurn(sql, sessionId, 0, "completed", "remember heron", "Noted: heron");
    await addTurn(sql, sessionId, 1, "cancelled", "never ran", null, false);
    await addTurn(sql, sessionId, 2, "failed", "this failed", null);
    await addTurn(sql, sessionId, 3, "completed", "and otter", "Noted: otter");
    await addTurn(sql, sessionId, 4, "running", "the current one", null);
    await addTurn(sql, other, 0, "completed", "someone else's", "not ours");

    const recap = (await readCarryOver(sql, sessionId, 12_000, log))!;
    expect(recap.turns).toBe(3);
    const text = recap.text;
    expect(text).not.toContain("never ran");
    expect(text).not.toContain("the current one");
    expect(text).not.toContain("someone else's");
    expect(text.indexOf("remember heron")).toBeLessThan(text.indexOf("Noted: heron"));
    expect(text.indexOf("Noted: heron")).toBeLessThan(text.indexOf("this failed"));
    expect(text).toContain("(no reply: the turn ended failed)");
    expect(text.indexOf("this failed")).toBeLessThan(text.indexOf("Noted: otter"));
    expect(await readCarryOver(sql, sessionId, 0, log)).toBeNull();
    expect(await readCarryOver(sql, await addSession(sql), 12_000, log)).toBeNull();
  });

  it("cuts a huge prompt in SQL and marks it cut, within the budget", async () => {
    const sql = db.sql;
    const sessionId = await addSession(sql);
    await addTurn(sql, sessionId, 0, "completed", "q".repeat(300_000), "done");
    const recap = (await readCarryOver(sql, sessionId, 3000, log))!;
    expect(recap.chars).toBeLessThanOrEqual(3000);
    expect(recap.text).toContain(`qqq${CUT_MARK}`);
    expect(recap.text).toContain("--- turn 1, assistant ---\ndone");
  });

  it("answers null, logging why, when the log cannot be read", async () => {
    const warnings: unknown[] = [];
    const failing = pino({ level: "warn" }, { write: (line: string) => warnings.push(JSON.parse(line)) });
    expect(await readCarryOver(db.sql, "not-a-uuid", 12_000, failing)).toBeNull();
    expect(warnings).toMatchObject([{ msg: expect.stringMatching(/recap/) }]);
  });
});
