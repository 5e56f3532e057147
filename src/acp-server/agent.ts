/**
 * mooring as an ACP *agent* (docs/acp-server.md): the one mapping of ACP's methods onto mooring's
 * sessions, turns, tasks and events, built on the client SDK. It serves both transports: `/acp` on
 * the gateway (transport/http/routes/acp.ts; the client then talks to the gateway itself with the
 * caller's token, so tenants, roots, limits and every rule stay where they are) and `mooring acp`
 * on stdio (cli/acp-command.ts; the client talks to a gateway anywhere).
 * One app per ACP connection: its state (the sessions it holds) lives here.
 */
import {
  type AgentContext,
  agent,
  type InitializeResponse,
  PROTOCOL_VERSION,
  RequestError,
} from "@agentclientprotocol/sdk";
import type { AgentApp } from "@agentclientprotocol/sdk";
import type { MooringClient } from "../client/client.js";
import { isTerminalStatus, type Session, type Task } from "../client/types.js";
import { answering, promptAnswer, promptText } from "./answers.js";
import { SessionLink } from "./session-link.js";
import { namingMcpServers, sameMcpServers, withMcpServers } from "./mcp-servers.js";
import type { UpdateContext } from "./updates.js";

export interface AcpAgentOptions {
  mooring: MooringClient;
  /** The agent of a new session when `_meta.mooring.agent` names none (`--agent`, MOORING_ACP_AGENT). */
  defaultAgent: string;
  /** The agentConfig of a new session when `_meta.mooring.agentConfig` gives none (`--agent-config`). */
  defaultAgentConfig?: Record<string, unknown>;
  version: string;
  warn?: (message: string, fields?: Record<string, unknown>) => void;
}

/** `_meta.mooring` of a request, when it is an object. */
function mooringMeta(params: { _meta?: Record<string, unknown> | null }): Record<string, unknown> {
  const found = params._meta?.mooring;
  return found && typeof found === "object" && !Array.isArray(found) ? (found as Record<string, unknown>) : {};
}

function afterSeqOf(params: { _meta?: Record<string, unknown> | null }): number | undefined {
  const value = mooringMeta(params).afterSeq;
  if (value === undefined) return undefined;
  if (typeof value !== "number" || !Number.isInteger(value) || value < 0)
    throw RequestError.invalidParams({ code: "INVALID_REQUEST", field: "_meta.mooring.afterSeq" }, "afterSeq must be a non-negative integer");
  return value;
}

function stringParam(params: unknown, name: string): string {
  const value = (params as Record<string, unknown> | null)?.[name];
  if (typeof value !== "string" || value === "")
    throw RequestError.invalidParams({ code: "INVALID_REQUEST", field: name }, `${name} must be a non-empty string`);
  return value;
}

export function mooringAcpAgent(options: AcpAgentOptions): AgentApp {
  const { mooring } = options;
  const warn = options.warn ?? (() => {});
  const connection = new AbortController();
  const links = new Map<string, SessionLink>();
  const context: UpdateContext = { notices: false };
  let acp: AgentContext | null = null;

  const link = (sessionId: string, client: AgentContext): SessionLink => {
    acp = client;
    let held = links.get(sessionId);
    if (!held || held.signal.aborted) {
      held = new SessionLink(sessionId, { mooring, acp: () => acp as AgentContext, context, signal: connection.signal, warn });
      links.set(sessionId, held);
    }
    return held;
  };

  /** The session, or ACP's "resource not found" (a foreign id answers exactly as a missing one). */
  const sessionOf = (sessionId: string) => answering(() => mooring.sessions.get(sessionId), sessionId);

  /** Every task of a session, oldest first (their prompts for a replay, the unfinished ones to follow). */
  const tasksOf = async (sessionId: string): Promise<Task[]> => {
    const tasks: Task[] = [];
    for await (const task of mooring.tasks.list({ sessionId })) tasks.push(task);
    return tasks.reverse();
  };

  /** Replays the session after `afterSeq`, then follows its unfinished turns and asks their pending requests again. */
  const attach = async (sessionId: string, client: AgentContext, afterSeq: number, replayPrompts: boolean) => {
    const held = link(sessionId, client);
    const tasks = await answering(() => tasksOf(sessionId), sessionId);
    const prompts = new Map(tasks.map((t) => [t.id, t.prompt]));
    const replay: UpdateContext = { ...context, promptOf: replayPrompts ? (id) => prompts.get(id) : undefined };
    let cursor: number | null = afterSeq;
    while (cursor !== null) {
      const page = await answering(() => mooring.sessions.events(sessionId, { afterSeq: cursor as number, limit: 500 }), sessionId);
      for (const event of page.items) void held.relay(event, false, replay);
      cursor = page.nextAfterSeq;
    }
    await held.flushed();
    for (const task of tasks) {
      if (isTerminalStatus(task.status)) continue;
      held.askPending(task);
      held.followInBackground(task, afterSeq);
    }
  };

  const initialize = ({ params }: { params: { clientCapabilities?: { session?: { notices?: unknown } | null } | null } }) => {
    context.notices = Boolean(params.clientCapabilities?.session?.notices);
    const answer: InitializeResponse = {
      protocolVersion: PROTOCOL_VERSION,
      agentCapabilities: {
        loadSession: true,
        promptCapabilities: { image: false, audio: false, embeddedContext: true },
        // Passed on to an ACP agent (which must accept the transport); other agents refuse any.
        mcpCapabilities: { http: true, sse: true },
        sessionCapabilities: { list: {}, resume: {}, close: {} },
      },
      agentInfo: { name: "mooring", title: "mooring", version: options.version },
      authMethods: [],
    };
    return answer;
  };

  const app = agent({ name: "mooring" })
    .onConnect((conn) => {
      acp = conn.client;
      void conn.closed.finally(() => connection.abort());
    })
    .onRequest("initialize", initialize)
    .onRequest("session/new", async ({ params, client }) => {
      acp = client;
      const meta = mooringMeta(params);
      const agentConfig = withMcpServers(meta.agentConfig ?? options.defaultAgentConfig, params.mcpServers);
      const session: Session = await answering(() =>
        mooring.sessions.create({
          workspace: params.cwd,
          agent: typeof meta.agent === "string" ? meta.agent : options.defaultAgent,
          ...(agentConfig !== undefined ? { agentConfig: agentConfig as Record<string, unknown> } : {}),
          ...(typeof meta.title === "string" ? { title: meta.title } : {}),
        } as Parameters<MooringClient["sessions"]["create"]>[0]),
      ).catch((err) => {
        throw params.mcpServers.length > 0 ? namingMcpServers(err) : err;
      });
      link(session.id, client);
      return { sessionId: session.id, _meta: { mooring: { agent: session.agent, workspace: session.workspace } } };
    })
    .onRequest("session/load", async ({ params, client }) => {
      const afterSeq = afterSeqOf(params) ?? 0;
      sameMcpServers(await sessionOf(params.sessionId), params.mcpServers);
      await attach(params.sessionId, client, afterSeq, true);
      return {};
    })
    .onRequest("session/resume", async ({ params, client }) => {
      const given = afterSeqOf(params);
      const session = await sessionOf(params.sessionId);
      sameMcpServers(session, params.mcpServers ?? []);
      await attach(params.sessionId, client, given ?? session.lastSeq, false);
      return {};
    })
    .onRequest("session/prompt", async ({ params, client }) => {
      const prompt = promptText(params.prompt);
      const sessionId = params.sessionId;
      if (!links.has(sessionId)) await sessionOf(sessionId);
      const held = link(sessionId, client);
      const run = await answering(
        () =>
          mooring.turns.submit(sessionId, {
            prompt,
            ifBusy: "enqueue",
            signal: held.signal,
            followContinuation: true,
            // An ACP client's `_meta.traceparent` on session/prompt parents the turn's spans.
            ...traceparentOf(params._meta),
          }),
        sessionId,
      );
      const task = await held.follow(run);
      return promptAnswer(task);
    })
    .onNotification("session/cancel", async ({ params }) => {
      const sessionId = params.sessionId;
      try {
        const session = await mooring.sessions.get(sessionId);
        for (const turn of session.turns ?? []) {
          if (!isTerminalStatus(turn.status as Task["status"])) await mooring.tasks.cancel(turn.id);
        }
      } catch (err) {
        warn("acp cancel failed", { err: String(err) });
      }
    })
    .onRequest("session/list", async ({ params }) => {
      const page = await answering(() =>
        mooring.sessions.page({
          ...(params.cwd ? { workspace: params.cwd } : {}),
          ...(params.cursor ? { cursor: params.cursor } : {}),
        }),
      );
      return {
        sessions: page.items.map((s) => ({ sessionId: s.id, cwd: s.workspace, title: s.title ?? null, updatedAt: s.updatedAt })),
        nextCursor: page.nextCursor,
      };
    })
    .onRequest("session/close", async ({ params }) => {
      await sessionOf(params.sessionId);
      links.get(params.sessionId)?.close();
      links.delete(params.sessionId);
      return {};
    })
    .onRequest("_mooring/tasks/get", (p: unknown) => p, async ({ params }) => {
      const taskId = stringParam(params, "taskId");
      return answering(() => mooring.tasks.get(taskId));
    })
    .onRequest("_mooring/tasks/cancel", (p: unknown) => p, async ({ params }) => {
      const taskId = stringParam(params, "taskId");
      return answering(() => mooring.tasks.cancel(taskId));
    })
    .onRequest("_mooring/gate", (p: unknown) => p, () => answering(() => mooring.gate()));
  return app;
}

/** `{traceparent}` from an ACP request's `_meta` when it carries a string one (the gateway checks its form). */
function traceparentOf(meta: unknown): { traceparent?: string } {
  const value = (meta as { traceparent?: unknown } | null | undefined)?.traceparent;
  return typeof value === "string" && value.length <= 512 ? { traceparent: value } : {};
}
