/**
 * Steering an ACP turn: ACP has no way to add input to a running prompt, so a steer answers 409
 * STEER_NOT_SUPPORTED (and so does a submit with ifBusy steer while the session is busy), nothing
 * is stored, and the client's fallback (ifBusy enqueue) works.
 */
import { expect, it } from "vitest";
import { call } from "../../support/gateway.js";
import { createSessionWith, submit, submitPrompt, waitTask, waitTerminal } from "../../support/turns.js";
import { useAcpAgents } from "../../support/acp-gateway.js";

const t = useAcpAgents("mooring-steer-acp-");

it("a steer of a running ACP turn answers 409 STEER_NOT_SUPPORTED; ifBusy steer too; enqueue still works", async () => {
  const { gw } = await t.boot({ "acp-test": t.entry({ permissions: "deny" }) });
  const session = await createSessionWith(gw.url, { workspace: t.workspace, agent: "acp-test" });
  const task = await submitPrompt(gw.url, session.id, "[slow]");
  await waitTask(gw.url, task.id, (t) => t.status !== "queued", 60_000);

  const steered = await call(gw.url, "POST", `/v1/tasks/${task.id}/input`, { text: "turn left" });
  expect(steered.status).toBe(409);
  expect(steered.body.error.code).toBe("STEER_NOT_SUPPORTED");
  const rpc = await call(gw.url, "POST", "/v1/rpc", {
    jsonrpc: "2.0",
    id: 1,
    method: "turns.steer",
    params: { taskId: task.id, text: "turn left" },
  });
  expect(rpc.body.error.data.code).toBe("STEER_NOT_SUPPORTED");
  const busy = await submit(gw.url, session.id, { prompt: "turn left", ifBusy: "steer" });
  expect(busy.status).toBe(409);
  expect(busy.body.error.code).toBe("STEER_NOT_SUPPORTED");

  // The fallback: queue it as the next turn.
  const queued = await submit(gw.url, session.id, { prompt: "[chunks 1]", ifBusy: "enqueue" });
  expect(queued.status).toBe(202);
  await call(gw.url, "POST", `/v1/tasks/${task.id}/cancel`);
  expect((await waitTerminal(gw.url, task.id, 60_000)).status).toBe("cancelled");
  expect((await waitTerminal(gw.url, queued.body.id, 60_000)).status).toBe("completed");
  const stored = await t.db
    .sql`select 1 from events where session_id = ${session.id} and type = 'turn.input'`;
  expect(stored).toHaveLength(0);
}, 180_000);
