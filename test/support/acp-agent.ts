/**
 * A real ACP agent for tests, built on the SDK's agent side and run as a child process:
 *   node --import <tsx loader> test/support/acp-agent.ts
 *
 * Its behaviour is scripted by directives in the prompt text (see docs/acp.md), e.g.
 * `[chunks 3] [tool 2048] [permission] [usage 1234]`. `[mcp]` says which
 * `mcpServers` the session/new or session/load that opened the session in this process carried
 * (it accepts stdio and http servers, not sse). `[badbytes]` streams text, a tool call
 * (name and input, a key included) and its output holding NUL and lone surrogates, as real agents
 * do (`printf 'a\000b'`, `find -print0`, a string cut inside a surrogate pair). Without a text-producing directive it
 * echoes the prompt. Only a prompt's last text block is scripted; `[recap]` says the blocks before it
 * (a fresh start's carried-over recap), or `recap: none`. Sessions live in memory and, when ACP_TEST_STATE_DIR is set, in
 * `<dir>/<sessionId>.json`, so a later process can `session/load` them (history is replayed as
 * session/update, as the protocol asks).
 *
 * With ACP_TEST_FORK=1 it advertises `sessionCapabilities.fork` and serves `session/fork`: the new
 * session starts with a copy of the source's history (found in memory or in the state dir), and
 * `[origin]` says how the session was opened in this process (`origin: fork of <id>`); with
 * ACP_TEST_FORK=fail it advertises fork but answers every `session/fork` with an error. It imports
 * the SDK's unstable entry, where `session/fork` is.
 *
 * Environment: ACP_TEST_STATE_DIR (persistence), ACP_TEST_NO_LOAD=1 (no loadSession capability),
 * ACP_TEST_FAIL_NEW=1 (session/new answers an error), ACP_TEST_LOAD_DELAY_MS (slow session/load),
 * ACP_TEST_ENV_FILE (write the whole environment it started with there, as JSON).
 */
import { randomUUID } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Readable, Writable } from "node:stream";
import {
  type AgentContext,
  agent,
  ndJsonStream,
  PROTOCOL_VERSION,
  type PermissionOption,
  type PromptResponse,
  type RequestPermissionRequest,
  RequestError,
  type SessionUpdate,
  type StopReason,
} from "@agentclientprotocol/sdk/unstable";

interface Exchange {
  prompt: string;
  reply: string;
}

interface Session {
  id: string;
  cwd: string;
  history: Exchange[];
  /** Aborted by session/cancel for the prompt in flight. */
  cancel: AbortController | null;
  /** The `mcpServers` of the session/new or session/load that opened it in this process (`[mcp]`). */
  mcp: { via: "new" | "load" | "fork"; servers: unknown[] };
  /** The session a `session/fork` copied this one from. */
  forkedFrom?: string;
}

const stateDir = process.env.ACP_TEST_STATE_DIR;
if (process.env.ACP_TEST_ENV_FILE) writeFileSync(process.env.ACP_TEST_ENV_FILE, JSON.stringify(process.env));
const canLoad = process.env.ACP_TEST_NO_LOAD !== "1";
const fork = process.env.ACP_TEST_FORK;
const sessions = new Map<string, Session>();

const log = (line: string) => process.stderr.write(`[acp-test-agent ${process.pid}] ${line}\n`);
const sleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener("abort", () => {
      clearTimeout(timer);
      resolve();
    });
  });

function sessionFile(id: string): string | null {
  // Ids come from the client on load: keep them from naming paths outside the state dir.
  if (!stateDir || !/^[\w-]+$/.test(id)) return null;
  return join(stateDir, `${id}.json`);
}

function persist(session: Session): void {
  const file = sessionFile(session.id);
  if (!file || !stateDir) return;
  mkdirSync(stateDir, { recursive: true });
  writeFileSync(file, JSON.stringify({ id: session.id, cwd: session.cwd, history: session.history }));
}

function restore(id: string): Session | null {
  const file = sessionFile(id);
  if (!file || !existsSync(file)) return null;
  const saved = JSON.parse(readFileSync(file, "utf8")) as { cwd: string; history: Exchange[] };
  return { id, cwd: saved.cwd, history: saved.history, cancel: null, mcp: { via: "load", servers: [] } };
}

/** `[name args]` directives in prompt order. */
function directives(prompt: string): { name: string; args: string[] }[] {
  return [...prompt.matchAll(/\[([a-z-]+)((?:\s+[^\]\s]+)*)\s*\]/g)].map((m) => ({
    name: m[1],
    args: m[2].trim() === "" ? [] : m[2].trim().split(/\s+/),
  }));
}

/** One prompt turn: runs the directives, streaming updates to the client. */
class Turn {
  reply = "";
  stopReason: StopReason = "end_turn";
  private tools = 0;

  constructor(
    private readonly session: Session,
    private readonly client: AgentContext,
    private readonly signal: AbortSignal,
    /** The prompt's text blocks before the last one. */
    private readonly earlierBlocks: string[] = [],
  ) {}

  update(update: SessionUpdate): Promise<void> {
    return this.client.notify("session/update", { sessionId: this.session.id, update });
  }

  async say(text: string): Promise<void> {
    this.reply += text;
    await this.update({
      sessionUpdate: "agent_message_chunk",
      content: { type: "text", text },
      messageId: `${this.session.id}-m${this.session.history.length + 1}`,
    });
  }

  async run(name: string, args: string[]): Promise<void> {
    switch (name) {
      case "chunks": {
        const n = Number(args[0] ?? 1);
        for (let i = 1; i <= n; i++) await this.say(`chunk ${i}/${n} `);
        return;
      }
      case "recap":
        return this.say(
          `recap: ${this.earlierBlocks.length === 0 ? "none" : `${this.earlierBlocks.length} block(s)\n${this.earlierBlocks.join("\n")}`}`,
        );
      case "history":
        return this.say(
          `history: ${this.session.history.length} [${this.session.history.map((h) => h.prompt).join(" | ")}]`,
        );
      case "tool":
        return this.tool(Number(args[0] ?? 16), args[1] === "fail");
      case "permission":
        return this.permission(args[0] === "allow-only");
      case "usage":
        return this.update({
          sessionUpdate: "usage_update",
          used: Number(args[0] ?? 0),
          size: Number(args[1] ?? 200_000),
        });
      case "slow":
        return this.slow(false);
      case "stubborn":
        return this.slow(true);
      case "exit":
        await this.say("about to exit ");
        log("fatal: simulated crash");
        process.exit(3);
        return;
      case "error":
        throw RequestError.internalError({ reason: "scripted" }, "scripted failure");
      case "stop":
        this.stopReason = (args[0] ?? "end_turn") as StopReason;
        return;
      case "badbytes":
        return this.badBytes();
      case "cwd":
        return this.say(`cwd: ${process.cwd()} session-cwd: ${this.session.cwd}`);
      case "ls":
        return this.say(`ls: ${readdirSync(process.cwd()).sort().join(" ")}`);
      case "env":
        return this.say(`env ${args[0]}: ${process.env[args[0] ?? ""] ?? "(unset)"}`);
      case "argv":
        return this.say(`argv: ${JSON.stringify(process.argv.slice(2))}`);
      case "pid":
        return this.say(`pid: ${process.pid}`);
      case "origin":
        return this.say(
          `origin: ${this.session.forkedFrom ? `fork of ${this.session.forkedFrom}` : this.session.mcp.via} `,
        );
      case "mcp":
        return this.say(`mcp via ${this.session.mcp.via}: ${JSON.stringify(this.session.mcp.servers)} | `);
      default:
        return this.say(`unknown directive ${name} `);
    }
  }

  private async tool(bytes: number, fail: boolean): Promise<void> {
    const toolCallId = `call-${++this.tools}`;
    await this.update({
      sessionUpdate: "tool_call",
      toolCallId,
      title: `Generate ${bytes} bytes`,
      name: "generate",
      kind: "other",
      status: "pending",
      rawInput: { bytes },
    });
    await this.update({ sessionUpdate: "tool_call_update", toolCallId, status: "in_progress" });
    await this.update({
      sessionUpdate: "tool_call_update",
      toolCallId,
      status: fail ? "failed" : "completed",
      content: [{ type: "content", content: { type: "text", text: "x".repeat(bytes) } }],
    });
  }

  private async badBytes(): Promise<void> {
    const bad = "nul\u0000 high\uD800 low\uDC00 end";
    await this.say(`text ${bad} `);
    const toolCallId = `call-${++this.tools}`;
    await this.update({
      sessionUpdate: "tool_call",
      toolCallId,
      title: `run ${bad}`,
      kind: "execute",
      status: "pending",
      rawInput: { command: `printf 'a\u0000b' ${bad}`, [`key\u0000\uDBFF`]: [bad] },
    });
    await this.update({
      sessionUpdate: "tool_call_update",
      toolCallId,
      status: "completed",
      content: [{ type: "content", content: { type: "text", text: `a\u0000b ${bad}` } }],
    });
    await this.say(`after \uDFFF`);
  }

  private async permission(allowOnly: boolean): Promise<void> {
    const options: PermissionOption[] = [
      { optionId: "allow-once", name: "Allow once", kind: "allow_once" },
      { optionId: "allow-always", name: "Always allow", kind: "allow_always" },
    ];
    if (!allowOnly) options.push({ optionId: "reject-once", name: "Reject", kind: "reject_once" });
    const request: RequestPermissionRequest = {
      sessionId: this.session.id,
      toolCall: { toolCallId: `call-${++this.tools}`, title: "Delete everything" },
      options,
    };
    const answer = await this.client.request("session/request_permission", request);
    const got = answer.outcome.outcome === "selected" ? answer.outcome.optionId : "cancelled";
    await this.say(`permission: ${got} `);
  }

  private async slow(stubborn: boolean): Promise<void> {
    if (stubborn) process.on("SIGTERM", () => log("ignoring SIGTERM"));
    const until = Date.now() + 60_000;
    for (let i = 1; Date.now() < until; i++) {
      if (this.signal.aborted && !stubborn) {
        this.stopReason = "cancelled";
        return;
      }
      await this.say(`tick ${i} `);
      await sleep(50, stubborn ? undefined : this.signal);
    }
  }
}

const app = agent({ name: "acp-test-agent" })
  .onRequest("initialize", () => ({
    protocolVersion: PROTOCOL_VERSION,
    agentCapabilities: {
      loadSession: canLoad,
      mcpCapabilities: { http: true, sse: false },
      ...(fork ? { sessionCapabilities: { fork: {} } } : {}),
    },
    agentInfo: { name: "acp-test-agent", version: "1.0.0" },
  }))
  .onRequest("session/new", ({ params }) => {
    if (process.env.ACP_TEST_FAIL_NEW === "1")
      throw RequestError.internalError({}, "session/new is disabled");
    const session: Session = {
      id: `sess-${randomUUID()}`,
      cwd: params.cwd,
      history: [],
      cancel: null,
      mcp: { via: "new", servers: params.mcpServers },
    };
    sessions.set(session.id, session);
    persist(session);
    log(`new session ${session.id}`);
    return { sessionId: session.id };
  })
  .onRequest("session/prompt", async ({ params, client }) => {
    const session = sessions.get(params.sessionId);
    if (!session) throw RequestError.sessionNotFound(params.sessionId);
    const texts = params.prompt.map((block) => (block.type === "text" ? block.text : ""));
    const prompt = texts.join("");
    log(`prompt: ${prompt}`);
    session.cancel = new AbortController();
    // Earlier blocks (a fresh start's recap) are context: only the last one is scripted.
    const turn = new Turn(session, client, session.cancel.signal, texts.slice(0, -1));
    for (const { name, args } of directives(texts.at(-1) ?? "")) {
      await turn.run(name, args);
      if (turn.stopReason === "cancelled") break;
    }
    if (turn.reply === "") await turn.say(`echo: ${(texts.at(-1) ?? "").replace(/\[[^\]]*\]/g, "").trim()}`);
    session.cancel = null;
    session.history.push({ prompt, reply: turn.reply });
    persist(session);
    return { stopReason: turn.stopReason } satisfies PromptResponse;
  })
  .onNotification("session/cancel", ({ params }) => {
    log(`cancel ${params.sessionId}`);
    sessions.get(params.sessionId)?.cancel?.abort();
  });

if (fork) {
  app.onRequest("session/fork", ({ params }) => {
    if (fork === "fail") throw RequestError.internalError({}, "session/fork is disabled");
    const source = sessions.get(params.sessionId) ?? restore(params.sessionId);
    if (!source) throw RequestError.sessionNotFound(params.sessionId);
    const session: Session = {
      id: `sess-${randomUUID()}`,
      cwd: params.cwd,
      history: source.history.map((h) => ({ ...h })),
      cancel: null,
      mcp: { via: "fork", servers: params.mcpServers ?? [] },
      forkedFrom: source.id,
    };
    sessions.set(session.id, session);
    persist(session);
    log(`forked session ${source.id} as ${session.id} with ${session.history.length} exchanges`);
    return { sessionId: session.id };
  });
}

if (canLoad) {
  app.onRequest("session/load", async ({ params, client }) => {
    await sleep(Number(process.env.ACP_TEST_LOAD_DELAY_MS ?? 0));
    const session = restore(params.sessionId);
    if (!session) throw RequestError.sessionNotFound(params.sessionId);
    session.mcp = { via: "load", servers: params.mcpServers };
    sessions.set(session.id, session);
    log(`loaded session ${session.id} with ${session.history.length} exchanges`);
    for (const { prompt, reply } of session.history) {
      const update = (sessionUpdate: "user_message_chunk" | "agent_message_chunk", text: string) =>
        client.notify("session/update", {
          sessionId: session.id,
          update: { sessionUpdate, content: { type: "text", text } },
        });
      await update("user_message_chunk", prompt);
      await update("agent_message_chunk", reply);
    }
    return {};
  });
}

const connection = app.connect(
  ndJsonStream(
    Writable.toWeb(process.stdout) as WritableStream<Uint8Array>,
    Readable.toWeb(process.stdin) as ReadableStream<Uint8Array>,
  ),
);
// stdin closing is the client's "we are done": state is already on disk, so leave at once.
void connection.closed.then(() => {
  log("connection closed; exiting");
  process.exit(0);
});
