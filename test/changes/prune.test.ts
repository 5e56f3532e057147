import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect, it } from "vitest";
import { useGateway } from "../support/use-gateway.js";
import { call, eventually } from "../support/gateway.js";
import { createSession, submitPrompt, waitTask } from "../support/turns.js";

const gt = useGateway({ env: { MOORING_EVENT_RETENTION: "5", MOORING_SWEEP_MS: "100" } });

it("prunes old events and tells a subscriber with an older cursor to resync", async () => {
  const workspace = await mkdtemp(join(tmpdir(), "ws-"));
  const sessionId = await createSession(gt.url, workspace);
  for (let i = 0; i < 3; i++) {
    const task = await submitPrompt(gt.url, sessionId, "[tool 10] [tool 10]");
    await waitTask(gt.url, task.id, (t) => t.status === "completed");
  }
  const pruned = await eventually(async () => {
    const [row] = await gt.sql`select last_seq, pruned_seq from sessions where id = ${sessionId}`;
    // Turns are over, so the head no longer moves: the sweep catches up to exactly the last 5.
    return row.prunedSeq === row.lastSeq - 5 ? row : null;
  });
  expect(pruned.lastSeq).toBeGreaterThan(10);
  const [{ kept, oldest }] = await gt.sql`
    select count(*)::int as kept, min(seq)::int as oldest from events where session_id = ${sessionId}`;
  expect(kept).toBe(5);
  expect(oldest).toBe(pruned.prunedSeq + 1);

  const stale = await call(gt.url, "GET", `/v1/sessions/${sessionId}/events?afterSeq=0`);
  expect(stale.status).toBe(409);
  expect(stale.body.error.code).toBe("RESYNC_REQUIRED");

  // A cursor inside what is kept streams normally.
  const controller = new AbortController();
  const res = await fetch(`${gt.url}/v1/sessions/${sessionId}/events?afterSeq=${pruned.prunedSeq}`, {
    signal: controller.signal,
  });
  expect(res.status).toBe(200);
  const reader = res.body!.getReader();
  let text = "";
  while (!text.includes(`id: ${pruned.lastSeq}\n`))
    text += new TextDecoder().decode((await reader.read()).value);
  controller.abort();
  expect(text).toContain(`id: ${pruned.prunedSeq + 1}\n`);
  expect(text).not.toContain(`id: ${pruned.prunedSeq}\n`);
});
