/**
 * A claude-code session outlives its host (docs/claude-code.md, Transcript store): two gateway
 * processes as two hosts (their own CLAUDE_CONFIG_DIR each, one database, a shared workspace), the
 * real `claude` CLI against the fake Anthropic API. A runs three turns and is killed with kill -9;
 * the next turn runs elsewhere, resumed from the transcript the store kept, not started fresh: the
 * fake API receives the whole earlier conversation.
 */
import { existsSync } from "node:fs";
import { rm, stat } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, beforeEach, expect, it } from "vitest";
import { expectedTranscriptPath } from "../../../src/agents/claude-code/transcript.js";
import {
  getSession,
  isRunning,
  parseLogOutput,
  taskEvents,
  writeCursor,
} from "../../support/agent-gateway.js";
import { eventually, type GatewayProcess, spawnGateway, testEnv } from "../../support/gateway.js";
import { createSessionWith, runTurn } from "../../support/turns.js";
import { claudeBin, useClaudeCode } from "../../support/claude-code.js";

const words = ["heron", "otter", "walrus"];

const t = useClaudeCode("mooring-hosts-");
const processes: GatewayProcess[] = [];

beforeEach(() => {
  t.fake.respond((r) => {
    const word = words.find((w) => r.lastUserText === `remember the word ${w}`);
    return { text: word ? `Noted: ${word}` : "You told me heron, otter and walrus" };
  });
});
afterEach(async () => {
  for (const p of processes.splice(0)) {
    p.kill("SIGKILL");
    await p.exited;
  }
});

/** A gateway process as a host whose Claude Code keeps its files in `configDir`. */
async function host(
  name: string,
  configDir: string,
  extra: Record<string, string> = {},
): Promise<GatewayProcess> {
  const agents = JSON.stringify({
    claude: {
      driver: "claude-code",
      command: claudeBin,
      env: { ANTHROPIC_BASE_URL: t.fake.url, ANTHROPIC_API_KEY: "test", CLAUDE_CONFIG_DIR: configDir },
    },
  });
  const gw = await spawnGateway(
    testEnv(t.db.url, {
      MOORING_AGENTS: agents,
      MOORING_INSTANCE_ID: name,
      MOORING_HEARTBEAT_MS: "500",
      LOG_LEVEL: "info",
      ...extra,
    }),
  );
  processes.push(gw);
  await gw.waitReady();
  return gw;
}

const logs = (gw: GatewayProcess, msg: string) => parseLogOutput(gw.output()).filter((r) => r.msg === msg);

async function killHost(gw: GatewayProcess): Promise<void> {
  for (const r of logs(gw, "claude-code spawned")) t.agentPids.add(r.agentPid);
  gw.kill("SIGKILL");
  expect(await gw.exited).toBe("SIGKILL");
  processes.splice(processes.indexOf(gw), 1);
  // Its orphaned CLI sees stdin close and exits by itself.
  for (const pid of t.agentPids) await eventually(async () => !isRunning(pid));
}

/** Three turns on `a`, then it is killed; answers the session and its conversation id. */
async function threeTurnsThenKill(a: GatewayProcess): Promise<{ sessionId: string; agentSessionId: string }> {
  const session = await createSessionWith(a.url, { workspace: t.workspace, agent: "claude" });
  for (const w of words) {
    const turn = await runTurn(a.url, session.id, `remember the word ${w}`);
    expect(turn.result.text).toBe(`Noted: ${w}`);
  }
  const { agentSessionId } = await getSession(a.url, session.id);
  await killHost(a);
  return { sessionId: session.id, agentSessionId: agentSessionId as string };
}

/** The fourth turn on `b`: resumed with the whole conversation, no fresh start. */
async function fourthTurnResumes(
  b: GatewayProcess,
  sessionId: string,
  agentSessionId: string,
  configDir: string,
) {
  const turn = await runTurn(b.url, sessionId, "which words?");
  expect(turn.status).toBe("completed");
  expect(turn.result.text).toBe("You told me heron, otter and walrus");
  const request = t.fake
    .mainRequests()
    .filter((r) => r.lastUserText === "which words?")
    .at(-1)!;
  expect(request.userTexts).toEqual([...words.map((w) => `remember the word ${w}`), "which words?"]);
  expect(request.assistantTexts).toEqual(words.map((w) => `Noted: ${w}`));
  expect((await taskEvents(t.db.sql, turn.id)).map((e) => e.type)).not.toContain("session.reset");
  expect(await getSession(b.url, sessionId)).toMatchObject({ agentSessionId, turnCount: 4 });
  const path = expectedTranscriptPath(configDir, t.workspace, agentSessionId);
  expect(logs(b, "claude-code transcript restored from the store")[0]).toMatchObject({
    agentSessionId,
    transcriptPath: path,
    localBytes: 0,
  });
  expect(logs(b, "claude-code resuming conversation")[0]).toMatchObject({
    agentSessionId,
    transcriptPath: path,
  });
  // b keeps the store up to date with what its CLI appended, whole lines only.
  const [{ stored }] = await t.db.sql<{ stored: number }[]>`
    select sum(octet_length(bytes))::int8 as stored from transcript_chunks
    where session_id = ${sessionId} and agent_session_id = ${agentSessionId}`;
  const size = (await stat(path)).size;
  expect(stored).toBeGreaterThan(0);
  expect(stored).toBeLessThanOrEqual(size);
  expect(size - stored).toBeLessThan(4096);
}

it("another host resumes the conversation from the stored transcript after kill -9", async () => {
  const configA = join(t.root, "host-a");
  const configB = join(t.root, "host-b");
  const a = await host("host-a", configA);
  const { sessionId, agentSessionId } = await threeTurnsThenKill(a);
  expect(existsSync(expectedTranscriptPath(configB, t.workspace, agentSessionId))).toBe(false);

  const b = await host("host-b", configB);
  await fourthTurnResumes(b, sessionId, agentSessionId, configB);
}, 240_000);

it("the same host resumes after its config folder was deleted", async () => {
  const configA = join(t.root, "host-a");
  const a = await host("host-a", configA);
  const { sessionId, agentSessionId } = await threeTurnsThenKill(a);
  // Retried: a CLI that just exited may still have a write of its own settling in there.
  await rm(configA, { recursive: true, force: true, maxRetries: 10, retryDelay: 200 });
  expect(existsSync(configA)).toBe(false);

  const again = await host("host-a", configA);
  await fourthTurnResumes(again, sessionId, agentSessionId, configA);
}, 240_000);

it("the unsaved check finds the stored transcript: an unconfirmed cursor resumes on another host", async () => {
  const a = await host("host-a", join(t.root, "host-a"));
  const session = await createSessionWith(a.url, { workspace: t.workspace, agent: "claude" });
  expect((await runTurn(a.url, session.id, "remember the word heron")).result.text).toBe("Noted: heron");
  const { agentSessionId } = await getSession(a.url, session.id);
  await killHost(a);
  // As if A died before it saw an assistant message: only the transcript can prove it was saved.
  await writeCursor(t.db.sql, session.id, { agentSessionId, turnCount: 1, lastAssistantMessageId: null });

  const configB = join(t.root, "host-b");
  const b = await host("host-b", configB);
  const turn = await runTurn(b.url, session.id, "which words?");
  expect(turn.status).toBe("completed");
  const request = t.fake
    .mainRequests()
    .filter((r) => r.lastUserText === "which words?")
    .at(-1)!;
  expect(request.userTexts).toEqual(["remember the word heron", "which words?"]);
  expect(request.assistantTexts).toEqual(["Noted: heron"]);
  expect((await taskEvents(t.db.sql, turn.id)).map((e) => e.type)).not.toContain("session.reset");
  expect(logs(b, "claude-code conversation was never saved; starting fresh")).toEqual([]);
  expect(logs(b, "claude-code transcript restored from the store")).toHaveLength(1);
  expect((await getSession(b.url, session.id)).agentSessionId).toBe(agentSessionId);
}, 240_000);
