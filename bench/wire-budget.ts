/**
 * Wire budget (docs/api.md, Wire budget), the reference scenario: 10 past turns with 5 tool calls each and
 * 878.9 KiB of tool output per turn, then a live turn with 1.05 MiB of tool output. Measured: the
 * session snapshot (GET /v1/sessions/:id, asking for gzip) on the wire and decoded, and the live
 * turn on a WebSocket with permessage-deflate: bytes read from the TCP connection, decoded bytes and
 * messages from the submit to the terminal event. Tool output is the simulated agent's `[logtool]`
 * (log-like text that compresses like real command output). References: the best published figures
 * for the scenario (T3 Code's CI report): 7.3 KiB snapshot, 6.7 KiB / 58 KiB / 9 messages live.
 */
import { gunzipSync, gzipSync } from "node:zlib";
import { gatewayEnv, spawnGateway } from "./lib/gateway.js";
import { HttpClient } from "./lib/http.js";
import { sleep } from "./lib/stats.js";
import { type Benchmark, ratio, type Row, type Sample } from "./lib/types.js";
import { RpcSocket } from "./lib/ws.js";

const PAST_TURNS = 10;
const TOOLS = 5;
/** 878.9 KiB per past turn, over 5 tool calls. */
const PAST_TOOL_BYTES = Math.round((878.9 * 1024) / TOOLS);
/** 1.05 MiB in the live turn, over 5 tool calls. */
const LIVE_TOOL_BYTES = Math.round((1.05 * 1024 * 1024) / TOOLS);

const published = { snapshotWire: 7.3, liveWire: 6.7, liveDecoded: 58, liveMessages: 9 };

const turnPrompt = (bytes: number) => Array.from({ length: TOOLS }, () => `[logtool ${bytes}]`).join(" ");

export const wireBudget: Benchmark = {
  id: "wire",
  title: "Wire budget (docs/api.md §Wire budget)",
  describe: () =>
    `${PAST_TURNS} past turns × ${TOOLS} tool calls (${((PAST_TOOL_BYTES * TOOLS) / 1024).toFixed(1)} KiB of output per turn), then a live turn with ${((LIVE_TOOL_BYTES * TOOLS) / 2 ** 20).toFixed(2)} MiB; snapshot over HTTP with Accept-Encoding: gzip, live turn on WS with permessage-deflate; references: published figures`,
  async run(ctx) {
    const db = await ctx.databases.create("wire");
    const gateway = await spawnGateway({ env: gatewayEnv(db.url, { MOORING_INSTANCE_ID: "bench-wire" }) });
    const http = new HttpClient(gateway.url, 4);
    let socket: RpcSocket | null = null;
    try {
      await gateway.waitReady();
      const session = await http.json<{ id: string }>("POST", "/v1/sessions", {
        workspace: "/tmp",
        agent: "simulated",
      });
      const waitDone = async (taskId: string) => {
        for (;;) {
          const t = await http.json<{ status: string }>("GET", `/v1/tasks/${taskId}?waitMs=10000`);
          if (!["queued", "running", "cancelling"].includes(t.status)) return t;
        }
      };
      for (let i = 0; i < PAST_TURNS; i++) {
        const task = await http.json<{ id: string }>("POST", `/v1/sessions/${session.id}/turns`, {
          prompt: turnPrompt(PAST_TOOL_BYTES),
        });
        const done = await waitDone(task.id);
        if (done.status !== "completed") throw new Error(`past turn ended ${done.status}`);
      }

      const snapshot = await http.request("GET", `/v1/sessions/${session.id}`, undefined, {
        "accept-encoding": "gzip",
      });
      const raw = snapshot.rawBody;
      const decoded = snapshot.headers["content-encoding"] === "gzip" ? gunzipSync(raw) : raw;
      const snapshotGzip = gzipSync(decoded).length;
      const lastSeq = JSON.parse(decoded.toString("utf8")).lastSeq as number;

      let terminal: (() => void) | null = null;
      const ended = new Promise<void>((resolve) => (terminal = resolve));
      socket = await RpcSocket.connect(gateway.url, {
        onEvent: (event) => {
          if (event.type.startsWith("task.") && event.data?.status && event.type !== "task.started")
            terminal?.();
        },
      });
      await socket.subscribe(session.id, lastSeq);
      await sleep(200);
      const before = { wire: socket.wireBytesRead, decoded: socket.decodedBytes, messages: socket.messages };
      await http.json("POST", `/v1/sessions/${session.id}/turns`, { prompt: turnPrompt(LIVE_TOOL_BYTES) });
      await Promise.race([
        ended,
        sleep(30_000).then(() => Promise.reject(new Error("live turn did not end"))),
      ]);
      await sleep(100);
      const live = {
        wire: socket.wireBytesRead - before.wire,
        decoded: socket.decodedBytes - before.decoded,
        messages: socket.messages - before.messages,
      };
      ctx.log(
        `  snapshot ${(raw.length / 1024).toFixed(1)} KiB on the wire (${(decoded.length / 1024).toFixed(1)} KiB decoded, ${(snapshotGzip / 1024).toFixed(1)} KiB gzipped); live turn ${(live.wire / 1024).toFixed(1)} KiB on the wire, ${(live.decoded / 1024).toFixed(1)} KiB decoded, ${live.messages} messages`,
      );
      return {
        snapshotWire: raw.length / 1024,
        snapshotDecoded: decoded.length / 1024,
        snapshotGzip: snapshotGzip / 1024,
        liveWire: live.wire / 1024,
        liveDecoded: live.decoded / 1024,
        liveMessages: live.messages,
      };
    } finally {
      socket?.close();
      http.close();
      await gateway.stop();
      await ctx.databases.drop(db);
    }
  },
  rows(m: Sample): Row[] {
    const benchmark = "Wire budget (docs/api.md §Wire budget)";
    const row = (figure: string, key: keyof typeof published, unit: string, note?: string): Row => ({
      benchmark,
      figure,
      value: m[key],
      unit,
      reference: { label: "published (T3 Code CI)", value: published[key], unit },
      ratio: ratio(m[key], published[key]),
      target: "≤ published",
      met: m[key] <= published[key],
      ...(note ? { note } : {}),
    });
    return [
      row(
        "snapshot on the wire",
        "snapshotWire",
        "KiB",
        `${m.snapshotDecoded?.toFixed(1)} KiB decoded, ${m.snapshotGzip?.toFixed(1)} KiB if gzipped`,
      ),
      row("live turn on the WS wire", "liveWire", "KiB"),
      row("live turn decoded", "liveDecoded", "KiB"),
      row("live turn messages", "liveMessages", ""),
    ];
  },
};
