/**
 * A fan-out client process: opens many WebSocket subscribers and records, per delivered event,
 * how long after the event it arrived. Driven over IPC by bench/fanout.ts:
 *   {cmd: "connect", url, sessionId, n}  → {ok: true}            (opens and subscribes n sockets)
 *   {cmd: "collect"}                      → {ok: true, stats}     (and starts counting afresh)
 *   {cmd: "close"}                        → exits
 */
import WebSocket from "ws";

interface Stats {
  sockets: number;
  events: number;
  messages: number;
  first: number;
  last: number;
  /** Receipt − event `at` (ms resolution), one per (event, subscriber). */
  sinceAt: number[];
  /** Receipt − the agent's clock stamp, for `[clock]` deltas. */
  sinceClock: number[];
}

const sockets: WebSocket[] = [];
let stats: Stats = fresh();

function fresh(): Stats {
  return { sockets: 0, events: 0, messages: 0, first: 0, last: 0, sinceAt: [], sinceClock: [] };
}

const now = () => performance.timeOrigin + performance.now();
const clockPattern = /clock (\d+(?:\.\d+)?)/;

function onMessage(data: Buffer) {
  const at = now();
  const parsed = JSON.parse(data.toString("utf8"));
  let counted = false;
  for (const message of Array.isArray(parsed) ? parsed : [parsed]) {
    if (message.method !== "event") continue;
    counted = true;
    const event = message.params;
    stats.events++;
    if (stats.first === 0) stats.first = at;
    stats.last = at;
    stats.sinceAt.push(at - Date.parse(event.at));
    if (event.type === "message.delta") {
      const match = clockPattern.exec(event.data?.text ?? "");
      if (match) stats.sinceClock.push(at - Number(match[1]));
    }
  }
  if (counted) stats.messages++;
}

async function open(url: string, sessionId: string | null, afterSeq: number): Promise<void> {
  const ws = new WebSocket(`${url.replace(/^http/, "ws")}/v1/ws`, {
    perMessageDeflate: process.env.BENCH_FANOUT_DEFLATE !== "0",
  });
  await new Promise<void>((resolve, reject) => {
    ws.once("open", () => resolve());
    ws.once("error", reject);
  });
  sockets.push(ws);
  if (!sessionId) {
    ws.on("message", onMessage);
    return;
  }
  await new Promise<void>((resolve, reject) => {
    const onAnswer = (data: Buffer) => {
      const message = JSON.parse(data.toString("utf8"));
      if (message.id !== 1) return;
      ws.off("message", onAnswer);
      ws.on("message", onMessage);
      if (message.error) reject(new Error(JSON.stringify(message.error)));
      else resolve();
    };
    ws.on("message", onAnswer);
    ws.send(
      JSON.stringify({ jsonrpc: "2.0", id: 1, method: "events.subscribe", params: { sessionId, afterSeq } }),
    );
  });
}

process.on("message", async (message: any) => {
  try {
    if (message.cmd === "connect") {
      const batch = 25;
      for (let i = 0; i < message.n; i += batch) {
        const k = Math.min(batch, message.n - i);
        await Promise.all(
          Array.from({ length: k }, () => open(message.url, message.sessionId, message.afterSeq ?? 0)),
        );
      }
      process.send!({ ok: true });
    } else if (message.cmd === "collect") {
      stats.sockets = sockets.filter((s) => s.readyState === WebSocket.OPEN).length;
      process.send!({ ok: true, stats });
      stats = fresh();
    } else if (message.cmd === "close") {
      for (const ws of sockets) ws.terminate();
      process.exit(0);
    }
  } catch (err) {
    process.send!({ ok: false, error: String(err) });
  }
});
process.on("disconnect", () => process.exit(0));
