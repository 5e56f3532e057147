/**
 * An ACP client for tests, on the SDK's own client app and transports: Streamable HTTP
 * (`experimental/http-client`), WebSocket (`experimental/ws-client`) or any stream (stdio). It
 * records every `session/update` and every permission request, and answers permission requests
 * with what the test decides (by default it holds them until the test answers).
 */
import {
  type ClientConnection,
  type ClientContext,
  client,
  PROTOCOL_VERSION,
  type RequestPermissionRequest,
  type RequestPermissionResponse,
  type SessionNotification,
  type Stream,
} from "@agentclientprotocol/sdk";
import { createHttpStream } from "@agentclientprotocol/sdk/experimental/http-client";
import { createWebSocketStream } from "@agentclientprotocol/sdk/experimental/ws-client";
import { type ChildProcess, spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import { ndJsonStream } from "@agentclientprotocol/sdk";
import { WebSocket } from "ws";
import { cliBin, spawned } from "./cli.js";
import { repoRoot } from "./gateway.js";
import { Recorded } from "./recorded.js";

export interface PendingAsk {
  request: RequestPermissionRequest;
  answer: (response: RequestPermissionResponse) => void;
  /** Aborted when the agent withdrew the request ($/cancel_request). */
  withdrawn: AbortSignal;
}

/** `_meta.mooring.seq` of an update (undefined for a notice that is not an event). */
export const seqOf = (n: SessionNotification): number | undefined =>
  (n.update._meta as { mooring?: { seq?: number } } | undefined)?.mooring?.seq;

/** The text of agent message chunks that are the agent's (mooring's own notices left out). */
export const agentText = (updates: SessionNotification[]): string =>
  updates
    .filter((n) => n.update.sessionUpdate === "agent_message_chunk" && seqOf(n) !== undefined)
    .map((n) => (n.update as { content: { text?: string } }).content.text ?? "")
    .join("");

/** The JSON-RPC error a call is answered with (throws if it succeeded). */
export async function rpcErrorOf(call: Promise<unknown>): Promise<{ code: number; message: string; data?: any }> {
  try {
    await call;
  } catch (err) {
    const e = err as { code: number; message: string; data?: unknown };
    return { code: e.code, message: e.message, data: e.data };
  }
  throw new Error("the call succeeded");
}

export class AcpTestClient {
  readonly updates = new Recorded<SessionNotification>();
  readonly asks = new Recorded<PendingAsk>();
  readonly connection: ClientConnection;

  constructor(stream: Stream) {
    const app = client({ name: "mooring-test-client" })
      .onNotification("session/update", ({ params }) => {
        this.updates.push(params);
      })
      .onRequest("session/request_permission", ({ params, signal }) =>
        new Promise<RequestPermissionResponse>((resolve) => {
          signal.addEventListener("abort", () => resolve({ outcome: { outcome: "cancelled" } }));
          this.asks.push({ request: params, answer: resolve, withdrawn: signal });
        }),
      );
    this.connection = app.connect(stream);
  }

  static http(base: string, token?: string): AcpTestClient {
    return new AcpTestClient(createHttpStream(`${base}/acp`, { headers: token ? { authorization: `Bearer ${token}` } : {} }));
  }

  static ws(base: string, token?: string): AcpTestClient {
    return new AcpTestClient(
      createWebSocketStream(`${base.replace(/^http/, "ws")}/acp`, {
        WebSocket: WebSocket as never,
        headers: token ? { authorization: `Bearer ${token}` } : {},
      }),
    );
  }

  /** `mooring acp <args>` as a child process (killed by cli.ts's killAllClis), spoken to over its stdio. */
  static stdio(args: string[], env: Record<string, string> = {}): AcpTestClient & { child: ChildProcess; stderr: () => string } {
    const child = spawn(process.execPath, [cliBin, "acp", ...args], {
      cwd: repoRoot,
      env: { ...process.env, ...env },
      stdio: ["pipe", "pipe", "pipe"],
    });
    spawned.add(child);
    child.once("exit", () => spawned.delete(child));
    let stderr = "";
    child.stderr!.setEncoding("utf8").on("data", (chunk: string) => {
      stderr += chunk;
    });
    const c = new AcpTestClient(
      ndJsonStream(
        Writable.toWeb(child.stdin!) as WritableStream<Uint8Array>,
        Readable.toWeb(child.stdout!) as ReadableStream<Uint8Array>,
      ),
    );
    return Object.assign(c, { child, stderr: () => stderr });
  }

  get agent(): ClientContext {
    return this.connection.agent;
  }

  async initialize() {
    return this.agent.request("initialize", {
      protocolVersion: PROTOCOL_VERSION,
      clientCapabilities: {},
      clientInfo: { name: "mooring-test-client", version: "1.0.0" },
    });
  }

  /** The updates of one session, in arrival order. */
  of(sessionId: string): SessionNotification[] {
    return this.updates.items.filter((n) => n.sessionId === sessionId);
  }

  close(): void {
    this.connection.close();
  }
}
