/**
 * Workspace checkpoints with the REAL Claude Code CLI against the fake Anthropic server
 * (docs/api.md, Workspace checkpoints): a reply that uses the Write tool (permission mode
 * acceptEdits, so it runs unasked) creates a file in a git workspace; the turn's diff shows the
 * write, and a revert removes it.
 */
import { readFile, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { beforeEach, expect, it } from "vitest";
import { call } from "../../support/gateway.js";
import { createSessionWith, submitPrompt, waitTerminal } from "../../support/turns.js";
import { useClaudeCode } from "../../support/claude-code.js";
import { userGit } from "../../support/user-git.js";
import type { TestGateway } from "../../support/gateway.js";

const t = useClaudeCode("mooring-ckpt-claude-");
let gw: TestGateway;
beforeEach(async () => {
  ({ gw } = await t.boot(
    { MOORING_CHECKPOINTS: "true", MOORING_DATA_DIR: join(t.root, "data") },
    { claude: t.entry({ permissionModes: ["default", "acceptEdits"] }) },
  ));
});

it("a Write tool call of the real CLI shows in the turn's diff, and a revert removes the file", async () => {
  const git = (args: string[]) => userGit(t.workspace, args, { HOME: t.root });
  git(["init", "-q"]);
  await writeFile(join(t.workspace, "README.md"), "# project\n");
  git(["add", "-A"]);
  git(["commit", "-q", "-m", "first"]);
  const target = join(t.workspace, "src", "hello.txt");
  t.fake.respond((r) => {
    if (!r.isMain) return undefined;
    if (r.hasToolResult) return { text: "Written." };
    return {
      text: "Writing the file.",
      toolUse: {
        id: "toolu_write_1",
        name: "Write",
        input: { file_path: target, content: "hello from claude\nsecond line\n" },
      },
    };
  });
  const session = await createSessionWith(gw.url, {
    workspace: t.workspace,
    agent: "claude",
    agentConfig: { permissionMode: "acceptEdits" },
  });
  const task = await submitPrompt(gw.url, session.id, "write src/hello.txt");
  const done = await waitTerminal(gw.url, task.id, 120_000);
  expect(done.status).toBe("completed");
  expect(await readFile(target, "utf8")).toBe("hello from claude\nsecond line\n");

  const diff = await call(gw.url, "GET", `/v1/tasks/${task.id}/diff`);
  expect(diff.status).toBe(200);
  const file = diff.body.items.find((f: any) => f.path === "src/hello.txt");
  expect(file).toMatchObject({ status: "added", additions: 2, deletions: 0, binary: false });
  expect(file.patch).toContain("+hello from claude\n+second line\n");
  const [turnDiff] = await t.db.sql<
    { data: any }[]
  >`select data from events where task_id = ${task.id} and type = 'turn.diff'`;
  expect(turnDiff?.data.files).toBe(diff.body.files);
  expect(git(["status", "--porcelain", "--untracked-files=all"])).toContain("?? src/hello.txt");

  const reverted = await call(gw.url, "POST", `/v1/sessions/${session.id}/revert`, { toTurn: 0 });
  expect(reverted.status).toBe(200);
  expect(reverted.body.removed).toContain("src/hello.txt");
  await expect(stat(target)).rejects.toThrow();
  expect(await readFile(join(t.workspace, "README.md"), "utf8")).toBe("# project\n");
}, 180_000);
