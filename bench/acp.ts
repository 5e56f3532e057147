/**
 * ACP clients (docs/acp-server.md): turns prompted one after another by an ACP client on one
 * session, while a WebSocket subscriber (`events.subscribe`) follows the same session. Measured per
 * `[clock]` delta of the simulated agent: agent event → ACP client (`session/update`) and agent
 * event → the subscriber, for `/acp` over WebSocket and for `mooring acp` on stdio (a child process
 * relaying to the gateway through the client SDK). The reference is the subscriber of the same
 * turns: what the ACP mapping, and for `mooring acp` the extra hop, add to the same events.
 */
import { spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable, Writable } from "node:stream";
import {
  type ClientConnection,
  client,
  ndJsonStream,
  PROTOCOL_VERSION,
  type SessionNotification,
  type Stream,
} from "@agentclientprotocol/sdk";
import { createWebSocketStream } from "@agentclientprotocol/sdk/experimental/ws-client";
import { WebSocket } from "ws";
import { gatewayEnv, repoRoot, spawnGateway, track } from "./lib/gateway.js";
import { percentile, sleep, wallMs } from "./lib/stats.js";
import { type BenchContext, type Benchmark, ratio, type Row, type Sample, upTo } from "./lib/types.js";
import { clockOf, RpcSocket } from "./lib/ws.js";

const PROMPT = "[clock] [tool 5] [clock] [tool 5] [clock]";
/** The ACP client may take this much longer than a subscriber of the same turn (p99). */
const MAX_VS_SUBSCRIBER = 1.3;

const size = (ctx: BenchContext) => ({ turns: ctx.options.quick ? 30 : 150 });

export const acp: Benchmark = {
  id: "acp",
  title: "ACP clients",
  describe: (ctx) =>
    `${size(ctx).turns} turns (${PROMPT}) prompted one after another by an ACP client on one session, on /acp over WebSocket and on \`mooring acp\` (stdio); reference: a WebSocket subscriber of the same session`,
  async run(ctx) {
    const { turns } = size(ctx);
    const db = await ctx.databases.create("acp");
    const workspace = await mkdtemp(join(tmpdir(), "mooring-bench-acp-"));
    const gateway = await spawnGateway({ env: gatewayEnv(db.url, { MOORING_INSTANCE_ID: "bench-acp" }) });
    const out: Sample = {};
    try {
      await gateway.waitReady();
      for (const transport of ["ws", "stdio"] as const) {
        const m = await measure(gateway.url, transport, workspace, turns);
        ctx.log(
          `  ${transport === "ws" ? "/acp (WebSocket)" : "mooring acp (stdio)"}: event → ACP client p50 ${m.acpP50.toFixed(1)} p99 ${m.acpP99.toFixed(1)} ms; subscriber p50 ${m.subscriberP50.toFixed(1)} p99 ${m.subscriberP99.toFixed(1)} ms`,
        );
        for (const [k, v] of Object.entries(m)) out[`${transport}_${k}`] = v;
      }
      return out;
    } finally {
      await gateway.stop();
      await rm(workspace, { recursive: true, force: true });
      await ctx.databases.drop(db);
    }
  },
  rows(m: Sample): Row[] {
    const benchmark = "ACP clients";
    return (["ws", "stdio"] as const).map((t) => {
      const r = ratio(m[`${t}_acpP99`], m[`${t}_subscriberP99`]);
      return {
        benchmark,
        figure: `agent event → ACP client p99, ${t === "ws" ? "/acp (WebSocket)" : "mooring acp (stdio)"}`,
        value: m[`${t}_acpP99`],
        unit: "ms",
        reference: {
          label: "WebSocket subscriber p99, same turns",
          value: m[`${t}_subscriberP99`],
          unit: "ms",
        },
        ratio: r,
        ...upTo(r, MAX_VS_SUBSCRIBER, "subscriber p99"),
        note: `p50 ${m[`${t}_acpP50`]?.toFixed(1)} ms, subscriber p50 ${m[`${t}_subscriberP50`]?.toFixed(1)} ms`,
      };
    });
  },
};

/** One ACP client on one transport, and a subscriber of its session. */
async function measure(url: string, transport: "ws" | "stdio", workspace: string, turns: number) {
  const acpDelays: number[] = [];
  const subscriberDelays: number[] = [];
  const onUpdate = (n: SessionNotification) => {
    const at = wallMs();
    if (n.update.sessionUpdate !== "agent_message_chunk") return;
    const emitted = clockOf((n.update.content as { text?: string }).text);
    if (emitted !== null) acpDelays.push(at - emitted);
  };
  let stream: Stream;
  let stop = async () => {};
  if (transport === "ws") {
    stream = createWebSocketStream(`${url.replace(/^http/, "ws")}/acp`, { WebSocket: WebSocket as never });
  } else {
    const child = track(
      spawn(
        process.execPath,
        [join(repoRoot, "bin", "mooring.js"), "acp", "--url", url, "--agent", "simulated"],
        {
          cwd: repoRoot,
          stdio: ["pipe", "pipe", "inherit"],
        },
      ),
    );
    stream = ndJsonStream(
      Writable.toWeb(child.stdin!) as WritableStream<Uint8Array>,
      Readable.toWeb(child.stdout!) as ReadableStream<Uint8Array>,
    );
    stop = async () => {
      child.stdin?.end();
      if (child.exitCode === null && !child.kill("SIGTERM")) return;
      await new Promise((resolve) => child.once("exit", resolve));
    };
  }
  const connection: ClientConnection = client({ name: "mooring-bench" })
    .onNotification("session/update", ({ params }) => onUpdate(params))
    .connect(stream);
  let subscriber: RpcSocket | null = null;
  try {
    await connection.agent.request("initialize", {
      protocolVersion: PROTOCOL_VERSION,
      clientCapabilities: {},
      clientInfo: { name: "mooring-bench", version: "1.0.0" },
    });
    const { sessionId } = await connection.agent.request("session/new", {
      cwd: workspace,
      mcpServers: [],
      _meta: { mooring: { agent: "simulated" } },
    });
    subscriber = await RpcSocket.connect(url, {
      onEvent: (event, at) => {
        if (event.type !== "message.delta") return;
        const emitted = clockOf(event.data?.text);
        if (emitted !== null) subscriberDelays.push(at - emitted);
      },
    });
    await subscriber.subscribe(sessionId);
    // The first turn starts the agent's conversation: not measured.
    await connection.agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text: PROMPT }] });
    acpDelays.length = 0;
    subscriberDelays.length = 0;
    for (let i = 0; i < turns; i++) {
      await connection.agent.request("session/prompt", {
        sessionId,
        prompt: [{ type: "text", text: PROMPT }],
      });
    }
    // The subscriber's last events may land after the prompt's answer.
    const deadline = wallMs() + 5000;
    while (subscriberDelays.length < acpDelays.length && wallMs() < deadline) await sleep(10);
    return {
      acpP50: percentile(acpDelays, 50),
      acpP99: percentile(acpDelays, 99),
      subscriberP50: percentile(subscriberDelays, 50),
      subscriberP99: percentile(subscriberDelays, 99),
    };
  } finally {
    subscriber?.close();
    connection.close();
    await stop();
  }
}
