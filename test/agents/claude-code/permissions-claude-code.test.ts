/**
 * Interactive approvals with the REAL Claude Code CLI (`--permission-prompt-tool stdio`) against
 * the fake Anthropic server: a reply that uses the Bash tool to write a file asks through the
 * gateway; Allow runs it, Deny with a message does not and the model sees the message verbatim;
 * Allow for this session answers the same tool later by itself and writes nothing under the
 * workspace's `.claude/`; AskUserQuestion's answers reach the model.
 */
import { existsSync } from "node:fs";
import { readFile, rm } from "node:fs/promises";
import { join } from "node:path";
import { beforeEach, expect, it } from "vitest";
import { taskEvents } from "../../support/agent-gateway.js";
import type { FakeRequest } from "../../support/fake-anthropic.js";
import { call, eventually } from "../../support/gateway.js";
import { createSessionWith, submitPrompt, waitPermission, waitTerminal } from "../../support/turns.js";
import { useClaudeCode } from "../../support/claude-code.js";
import type { TestGateway } from "../../support/gateway.js";
import type { LogRecorder } from "../../support/agent-gateway.js";

const t = useClaudeCode("mooring-perm-claude-");
let gw: TestGateway;
let logs: LogRecorder;
beforeEach(async () => {
  ({ gw, logs } = await t.boot({}, { claude: t.entry({ permissions: "ask" }) }));
});

/** The tool results the model received in a request, as text. */
function toolResults(request: FakeRequest): string[] {
  const out: string[] = [];
  for (const m of request.body?.messages ?? []) {
    if (!Array.isArray(m.content)) continue;
    for (const block of m.content) {
      if (block.type !== "tool_result") continue;
      out.push(typeof block.content === "string" ? block.content : JSON.stringify(block.content));
    }
  }
  return out;
}

/** The model writes `name` with Bash for each prompt, then says "done" once the tool ran. */
function bashWrites(name: string) {
  let n = 0;
  t.fake.respond((r) => {
    if (!r.isMain) return undefined;
    if (r.hasToolResult) return { text: "done" };
    return {
      text: "Writing.",
      toolUse: {
        id: `toolu_bash_${++n}`,
        name: "Bash",
        input: { command: `echo hi > ${name}`, description: "write the file" },
      },
    };
  });
}

const answer = (taskId: string, requestId: string, body: unknown) =>
  call(gw.url, "POST", `/v1/tasks/${taskId}/permissions/${requestId}`, body);

it("Allow: the Bash tool runs, the file exists and the tool result is in the events", async () => {
  bashWrites("f.txt");
  const session = await createSessionWith(gw.url, { workspace: t.workspace, agent: "claude" });
  const task = await submitPrompt(gw.url, session.id, "write f.txt");
  const request = await waitPermission(gw.url, task.id, 60_000);
  expect(request.toolCall).toMatchObject({
    name: "Bash",
    kind: "other",
    input: { command: "echo hi > f.txt" },
  });
  expect(request.options.map((o: { optionId: string; kind: string }) => [o.optionId, o.kind])).toEqual([
    ["allow", "allow_once"],
    ["allow_session", "allow_always"],
    ["deny", "reject_once"],
  ]);
  expect((await answer(task.id, request.requestId, { optionId: "allow" })).status).toBe(200);
  const done = await waitTerminal(gw.url, task.id, 60_000);
  expect(done.status).toBe("completed");
  expect(await readFile(join(t.workspace, "f.txt"), "utf8")).toBe("hi\n");
  const events = await taskEvents(t.db.sql, task.id);
  const types = events.map((e) => e.type);
  expect(types.indexOf("permission.requested")).toBeLessThan(types.indexOf("permission.resolved"));
  expect(types.indexOf("permission.resolved")).toBeLessThan(types.indexOf("tool.result"));
  expect(events.find((e) => e.type === "tool.result")!.data).toMatchObject({ isError: false });
}, 120_000);

it("Deny with a message: no file, and the model saw the message verbatim", async () => {
  bashWrites("g.txt");
  const session = await createSessionWith(gw.url, { workspace: t.workspace, agent: "claude" });
  const task = await submitPrompt(gw.url, session.id, "write g.txt");
  const request = await waitPermission(gw.url, task.id, 60_000);
  const message = "The human said no: not in this folder";
  expect((await answer(task.id, request.requestId, { optionId: "deny", message })).status).toBe(200);
  const done = await waitTerminal(gw.url, task.id, 60_000);
  expect(done.status).toBe("completed");
  expect(existsSync(join(t.workspace, "g.txt"))).toBe(false);
  const after = t.fake.mainRequests().filter((r) => r.hasToolResult);
  expect(after.flatMap(toolResults)).toContain(message);
  const result = (await taskEvents(t.db.sql, task.id)).find((e) => e.type === "tool.result")!;
  expect(result.data).toMatchObject({ isError: true });
}, 120_000);

it("Allow for this session: the same tool later is answered without asking; nothing under .claude/", async () => {
  bashWrites("h.txt");
  const session = await createSessionWith(gw.url, { workspace: t.workspace, agent: "claude" });
  const first = await submitPrompt(gw.url, session.id, "write h.txt");
  const request = await waitPermission(gw.url, first.id, 60_000);
  await answer(first.id, request.requestId, { optionId: "allow_session" });
  expect((await waitTerminal(gw.url, first.id, 60_000)).status).toBe("completed");
  await rm(join(t.workspace, "h.txt"));
  const second = await submitPrompt(gw.url, session.id, "write h.txt again");
  expect((await waitTerminal(gw.url, second.id, 60_000)).status).toBe("completed");
  expect(await readFile(join(t.workspace, "h.txt"), "utf8")).toBe("hi\n");
  expect((await taskEvents(t.db.sql, second.id)).map((e) => e.type)).not.toContain("permission.requested");
  expect(existsSync(join(t.workspace, ".claude"))).toBe(false);
}, 120_000);

it("AskUserQuestion: relayed as a question, the answers reach the model", async () => {
  const questions = [
    {
      question: "Which color should we use?",
      header: "Color",
      options: [
        { label: "Red", description: "warm" },
        { label: "Blue", description: "cool" },
      ],
      multiSelect: false,
    },
  ];
  t.fake.respond((r) => {
    if (!r.isMain) return undefined;
    if (r.hasToolResult) return { text: "noted" };
    return { text: "Asking.", toolUse: { id: "toolu_ask_1", name: "AskUserQuestion", input: { questions } } };
  });
  const session = await createSessionWith(gw.url, { workspace: t.workspace, agent: "claude" });
  const task = await submitPrompt(gw.url, session.id, "pick a color");
  const request = await waitPermission(gw.url, task.id, 60_000);
  expect(request.toolCall).toMatchObject({ name: "AskUserQuestion", kind: "question", input: { questions } });
  await answer(task.id, request.requestId, {
    optionId: "answer",
    answers: { "Which color should we use?": "Blue" },
  });
  expect((await waitTerminal(gw.url, task.id, 60_000)).status).toBe("completed");
  const seen = t.fake
    .mainRequests()
    .filter((r) => r.hasToolResult)
    .flatMap(toolResults)
    .join("\n");
  expect(seen).toContain('"Which color should we use?"="Blue"');
}, 120_000);

it("cancel while the CLI waits: the CLI withdraws the request (control_cancel_request), nothing runs", async () => {
  bashWrites("c.txt");
  const session = await createSessionWith(gw.url, { workspace: t.workspace, agent: "claude" });
  const task = await submitPrompt(gw.url, session.id, "write c.txt");
  const request = await waitPermission(gw.url, task.id, 60_000);
  await call(gw.url, "POST", `/v1/tasks/${task.id}/cancel`);
  const done = await waitTerminal(gw.url, task.id, 60_000);
  expect(done.status).toBe("cancelled");
  expect(existsSync(join(t.workspace, "c.txt"))).toBe(false);
  const resolved = (await taskEvents(t.db.sql, task.id)).find((e) => e.type === "permission.resolved")!;
  expect(resolved.data).toEqual({ requestId: request.requestId, optionId: "deny", by: "cancel" });
  await eventually(async () => logs.named("claude-code withdrew a permission request").length > 0);
}, 120_000);
