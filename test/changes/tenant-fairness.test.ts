/**
 * Fairness between tenants under a flood of refusals (domain/admission.ts):
 * tenant a, at its quota, floods submits that are refused (TENANT_BUSY for its full queue,
 * SESSION_BUSY for ifBusy=reject into its own busy session) while tenant b submits. A refusal
 * costs the refused submit only: every submit, refused or not, is answered from the one admission
 * transaction it went in with (no batch rolled back and retried one by one), batches mixing a's
 * refusals with b's submits commit b's, and each of b's submits goes into the first admission
 * transaction after it arrives, or the one after that: in the gateway's own log, in order, at most
 * two transactions of a's refusals commit between b's request line and the transaction that admits
 * it, never the queue of a's refusals one by one. Order, not elapsed time, so a loaded machine
 * changes nothing.
 */
import { afterAll, expect, it } from "vitest";
import { useGateway } from "../support/use-gateway.js";
import { cancelOpenTasks, createSession, submit, submitOk, waitTask } from "../support/turns.js";

const TENANTS = JSON.stringify({
  a: { tokens: ["token-a"], maxActive: 1, maxQueued: 1 },
  b: { tokens: ["token-b"] },
});
const auth = (tenant: string) => ({ authorization: `Bearer token-${tenant}` });

/** b's submits under the flood, one after another. */
const SAMPLES = 60;
/** a's concurrent flooding clients. */
const FLOODERS = 4;
/**
 * The admission transactions of a's alone that may commit between b's request line and b's own:
 * one while b's body is read (before b joins the admission queue), and the one in flight when it
 * joins. a's flooders have one submit each in flight, so a stall behind a's refusals (each sent
 * on its own, or queued ahead of b) shows as FLOODERS or more.
 */
const MAX_AHEAD = 2;

/** The gateway's log, in order: b's submit requests arriving, and admission commits. */
type Line =
  | { kind: "b submit"; url: string }
  | { kind: "admission"; submits: number; refused: number; claimed: number };
const lines: Line[] = [];
let retriedOneByOne = 0;

const t = useGateway({
  env: { MOORING_MAX_ACTIVE: "20", MOORING_MAX_QUEUED: "200", MOORING_TENANTS: TENANTS },
  workspace: true,
  gateway: {
    logLevel: "debug",
    onLog: (record) => {
      if (
        record.msg === "incoming request" &&
        record.tenant === "b" &&
        record.req?.method === "POST" &&
        String(record.req?.url).endsWith("/turns")
      )
        lines.push({ kind: "b submit", url: record.req.url });
      if (record.msg === "admission committed")
        lines.push({
          kind: "admission",
          submits: record.submits,
          refused: record.refused,
          claimed: record.claimed,
        });
      if (record.msg === "batched admission failed; admitting one by one") retriedOneByOne++;
    },
  },
});

afterAll(async () => {
  if (t.gw) await cancelOpenTasks(t.url, t.sql, auth("a"));
});

it("a's refused submits cost b nothing: answered in the same round trip, b's submits admitted in the first transactions after they arrive", async () => {
  // a at its quota: one turn running (a's maxActive), one queued (a's maxQueued).
  const [aBusy, aQueued, aSpare] = await Promise.all(
    [0, 1, 2].map(() => createSession(t.url, t.workspace, {}, auth("a"))),
  );
  await submitOk(t.url, aBusy, { prompt: "[hang] a running" }, auth("a"));
  await submitOk(t.url, aQueued, { prompt: "[hang] a queued" }, auth("a"));
  const bSessions = await Promise.all(
    Array.from({ length: SAMPLES }, () => createSession(t.url, t.workspace, {}, auth("b"))),
  );

  // a floods refusals: half on its quota, half ifBusy=reject into its busy session.
  const refusals = { TENANT_BUSY: 0, SESSION_BUSY: 0 };
  const refused = async (i: number) => {
    const answer =
      i % 2 === 0
        ? await submit(t.url, aSpare, { prompt: "over quota" }, auth("a"))
        : await submit(t.url, aBusy, { prompt: "into busy", ifBusy: "reject" }, auth("a"));
    const code = answer.body?.error?.code as keyof typeof refusals;
    expect(answer.status, JSON.stringify(answer.body)).toBe(code === "TENANT_BUSY" ? 429 : 409);
    refusals[code]++;
  };
  lines.length = 0;
  let flooding = true;
  const flood = Array.from({ length: FLOODERS }, async (_, i) => {
    while (flooding) await refused(i);
  });
  // b's submits, one after another, while a floods; each flooder's first refusal before b starts,
  // so every one of b's submits meets the flood.
  while (refusals.TENANT_BUSY === 0 || refusals.SESSION_BUSY === 0) await refused(0);
  const ids: string[] = [];
  for (const session of bSessions) {
    const answer = await submit(t.url, session, { prompt: "hello" }, auth("b"));
    expect(answer.status, JSON.stringify(answer.body)).toBe(202);
    ids.push(answer.body.id);
  }
  flooding = false;
  await Promise.all(flood);
  for (const id of ids)
    expect((await waitTask(t.url, id, undefined, 30_000, auth("b"))).status).toBe("completed");

  // Every submit of the flood went into exactly one committed admission transaction, which
  // answered it (refused or admitted): none rolled back a batch and was sent again one by one.
  const batches = lines.filter((l) => l.kind === "admission");
  const aSubmits = refusals.TENANT_BUSY + refusals.SESSION_BUSY;
  expect(retriedOneByOne).toBe(0);
  expect(batches.reduce((n, b) => n + b.refused, 0)).toBe(aSubmits);
  expect(batches.reduce((n, b) => n + b.submits, 0)).toBe(aSubmits + SAMPLES);
  // b's submits shared transactions with a's refusals and were admitted from them.
  const mixed = batches.filter((b) => b.refused > 0 && b.refused < b.submits);
  expect(mixed.length).toBeGreaterThan(0);

  // For each of b's submits (one at a time, so b's admission is the first transaction after its
  // request line that admits anything), the transactions of a's refusals alone committed between.
  const ahead: number[] = [];
  let arrived: number | null = null;
  for (const line of lines) {
    if (line.kind === "b submit") {
      expect(arrived, "b's submits are one at a time").toBeNull();
      arrived = 0;
    } else if (arrived !== null) {
      if (line.refused < line.submits) {
        ahead.push(arrived);
        arrived = null;
      } else arrived++;
    }
  }
  expect(ahead).toHaveLength(SAMPLES);
  // The flood was on while b submitted: a's refusals committed between b's submits.
  expect(batches.filter((b) => b.refused === b.submits).length).toBeGreaterThanOrEqual(SAMPLES);
  expect(
    Math.max(...ahead),
    `a's transactions ahead of each of b's submits: ${ahead.join(" ")}`,
  ).toBeLessThanOrEqual(MAX_AHEAD);

  // a's quota held throughout: its two turns, nothing more.
  const [{ n }] = await t.sql<{ n: number }[]>`select count(*)::int as n from tasks where tenant = 'a'`;
  expect(n).toBe(2);
});
