/**
 * A real third-party ACP client, `acpx` (npm), driving `mooring acp` against a real gateway
 * (docs/acp-server.md): a one-shot prompt streams its text and shows its tool call, exit 0; and
 * in a named acpx session a second prompt reaches the same mooring session.
 */
import { spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtemp } from "node:fs/promises";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { expect, it } from "vitest";
import { cliBin } from "../support/cli.js";
import type { TestDatabase } from "../support/db.js";
import type { GatewayProcess } from "../support/gateway.js";
import { gatewayEnv, Processes, useProcessSuite } from "../support/lifecycle.js";

const acpxBin = join(dirname(createRequire(import.meta.url).resolve("acpx/package.json")), "dist", "cli.js");
const procs = new Processes();
let db: TestDatabase;
let workspace: string;
useProcessSuite("mooring-acpx-", procs, (d, w) => {
  db = d;
  workspace = w;
});

const jsonLines = (text: string): any[] =>
  text
    .split("\n")
    .filter((line) => line.startsWith("{"))
    .map((line) => JSON.parse(line));

async function acpx(gw: GatewayProcess, home: string, args: string[]) {
  const agent = `${process.execPath} ${cliBin} acp --url ${gw.url} --agent simulated`;
  const child = spawn(process.execPath, [acpxBin, "--agent", agent, "--cwd", workspace, "--format", "json", ...args], {
    env: { ...process.env, HOME: home, XDG_CONFIG_HOME: join(home, ".config"), XDG_STATE_HOME: join(home, ".state") },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout.setEncoding("utf8").on("data", (c: string) => (stdout += c));
  child.stderr.setEncoding("utf8").on("data", (c: string) => (stderr += c));
  const [code] = await once(child, "close");
  return { code: code as number, stdout, stderr };
}

it("acpx exec against mooring acp: the text streams, the tool call shows, exit 0", async () => {
  const gw = await procs.spawn(gatewayEnv(db.url));
  await gw.waitReady();
  const home = await mkdtemp(join(tmpdir(), "mooring-acpx-home-"));
  const run = await acpx(gw, home, ["exec", "[deltas 3] [tool 40]"]);
  expect(run.code, run.stderr).toBe(0);
  const messages = jsonLines(run.stdout);
  const updates = messages.filter((m) => m.method === "session/update").map((m) => m.params.update);
  expect(updates.filter((u) => u.sessionUpdate === "agent_message_chunk").map((u) => u.content.text).join("")).toBe(
    "chunk 1 chunk 2 chunk 3 ",
  );
  expect(updates.find((u) => u.sessionUpdate === "tool_call")).toMatchObject({ status: "in_progress" });
  expect(updates.every((u) => Number.isInteger(u._meta?.mooring?.seq))).toBe(true);
  expect(messages.find((m) => m.result?.stopReason)?.result.stopReason).toBe("end_turn");
});

it("acpx's named session: a second prompt reaches the same mooring session", async () => {
  const gw = await procs.spawn(gatewayEnv(db.url));
  await gw.waitReady();
  const home = await mkdtemp(join(tmpdir(), "mooring-acpx-home-"));
  const created = await acpx(gw, home, ["sessions", "new", "--name", "twice"]);
  expect(created.code, created.stderr).toBe(0);
  const first = await acpx(gw, home, ["--ttl", "30", "prompt", "-s", "twice", "[deltas 1]"]);
  expect(first.code, `${first.stderr}\n${first.stdout}`.slice(-4000)).toBe(0);
  const second = await acpx(gw, home, ["--ttl", "30", "prompt", "-s", "twice", "[deltas 2]"]);
  expect(second.code, `${second.stderr}\n${second.stdout}`.slice(-4000)).toBe(0);
  const promptOf = (out: string) => jsonLines(out).find((m) => m.method === "session/prompt");
  const sessionId = promptOf(first.stdout).params.sessionId;
  expect(promptOf(second.stdout).params.sessionId).toBe(sessionId);
  const seqs = (out: string) =>
    jsonLines(out)
      .filter((m) => m.method === "session/update")
      .map((m) => m.params.update._meta.mooring.seq);
  expect(Math.min(...seqs(second.stdout))).toBe(Math.max(...seqs(first.stdout)) + 1);
  const turns = await db.sql<{ n: number }[]>`select count(*)::int as n from tasks where session_id = ${sessionId}`;
  expect(turns[0].n).toBe(2);
  // Ends acpx's queue owner (and the mooring acp it holds) now rather than after its TTL.
  await acpx(gw, home, ["sessions", "close", "twice"]);
});
