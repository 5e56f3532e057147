import { expect, it } from "vitest";
import { useGateway } from "../support/use-gateway.js";
import { call } from "../support/gateway.js";
import { waitTask } from "../support/turns.js";

const gt = useGateway({ workspace: true });

it("creates a session and runs a simulated turn to completion", async () => {
  const s = await call(gt.url, "POST", "/v1/sessions", { workspace: gt.workspace, agent: "simulated" });
  expect(s.status).toBe(201);
  const t = await call(gt.url, "POST", `/v1/sessions/${s.body.id}/turns`, {
    prompt: "[deltas 3] [tool 5000] [tokens 1000]",
  });
  expect(t.status).toBe(202);
  expect(t.headers.get("location")).toBe(`/v1/tasks/${t.body.id}`);
  const task = await waitTask(gt.url, t.body.id);
  expect(task.status).toBe("completed");
  expect(task.result.text).toBe("chunk 1 chunk 2 chunk 3 ");
  expect(task.result.contextPercent).toBe(1);
  const events = await gt.sql`select seq, type from events where session_id = ${s.body.id} order by seq`;
  expect(events.map((e) => e.type)).toEqual([
    "task.queued",
    "task.started",
    "message.delta",
    "tool.call",
    "tool.result",
    "message",
    "usage",
    "task.completed",
  ]);
  expect(events.map((e) => e.seq)).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
});
