/**
 * Fan-out: N WebSocket subscribers on one session (spread over client processes so the client side
 * is not the bottleneck) while a turn streams events: a `[clock]` delta and two tool call/result
 * pairs every 20 ms. Measured: delivered events per second across all subscribers, the delay from
 * the agent emitting an event to each subscriber receiving it (p50/p99), and the gateway's RSS per
 * idle connection (VmRSS before and after the subscribers connect). Reference in the same run: a
 * bare `ws` server with the gateway's WebSocket options sending the same frames at the same pace to
 * the same number of clients. Both run twice: with clients that negotiate permessage-deflate (as
 * browsers do) and with clients that do not. With deflate, the Node `ws` clients of this benchmark
 * inflate every frame through zlib on the same two cores, which dominates the delay they measure
 * (bench/results/notes.md).
 */
import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { gatewayEnv, readRss, repoRoot, spawnGateway, track } from "./lib/gateway.js";
import { HttpClient } from "./lib/http.js";
import { percentile, sleep } from "./lib/stats.js";
import { type BenchContext, type Benchmark, ratio, type Row, type Sample, upTo } from "./lib/types.js";

/**
 * Targets as ratios to the bare `ws` server of the same run. Without deflate the gateway should
 * add little to what sending the frames costs. With deflate the bare server compresses every frame
 * once per subscriber, while the gateway compresses it once for all of them: it should be far
 * quicker than the bare server, and not far slower than itself without deflate.
 */
const PLAIN_VS_BARE = 1.2;
const DEFLATE_VS_BARE = 0.3;
const DEFLATE_VS_PLAIN = 3;
const TOOLS_PER_STEP = Number(process.env.BENCH_FANOUT_TOOLS ?? 1);
const STEP_MS = Number(process.env.BENCH_FANOUT_STEP_MS ?? 100);
/** How long the connected subscribers sit idle before the gateway's RSS is read again. */
const idleMs = (ctx: BenchContext) => (ctx.options.quick ? 1000 : 1500);

const size = (ctx: BenchContext) => ({
  subscribers: Number(process.env.BENCH_FANOUT_SUBSCRIBERS ?? (ctx.options.quick ? 100 : 1000)),
  processes: Number(process.env.BENCH_FANOUT_PROCESSES ?? (ctx.options.quick ? 1 : 2)),
  steps: ctx.options.quick ? 10 : 50,
  idleMs: idleMs(ctx),
});

interface ClientStats {
  sockets: number;
  events: number;
  messages: number;
  first: number;
  last: number;
  sinceAt: number[];
  sinceClock: number[];
}

export const fanout: Benchmark = {
  id: "fanout",
  title: "Fan-out to one session",
  describe: (ctx) => {
    const s = size(ctx);
    return `${s.subscribers} WebSocket subscribers in ${s.processes} client process(es) on one session, once negotiating permessage-deflate (as browsers do) and once not; the turn emits a [clock] delta + ${TOOLS_PER_STEP} tool calls every ${STEP_MS} ms for ${s.steps} steps; reference: a bare ws server sending the same frames`;
  },
  async run(ctx) {
    const s = size(ctx);
    const db = await ctx.databases.create("fanout");
    try {
      const out: Sample = {};
      // With permessage-deflate (keys as before), then without it (keys prefixed plain_).
      for (const deflate of [true, false]) {
        const mooring = await runMooring(ctx, db.url, s, deflate);
        const bare = await runBare(s, deflate);
        ctx.log(
          `  ${deflate ? "deflate" : "plain  "}: mooring ${mooring.eventsPerSecond.toFixed(0)} events/s, delay p50 ${mooring.delayP50.toFixed(1)} p99 ${mooring.delayP99.toFixed(1)} ms, ${(mooring.rssPerConnection / 1024).toFixed(1)} KiB/conn, ${mooring.missing} missing; bare ws ${bare.eventsPerSecond.toFixed(0)} events/s, p99 ${bare.delayP99.toFixed(1)} ms, ${(bare.rssPerConnection / 1024).toFixed(1)} KiB/conn`,
        );
        const prefix = deflate ? "" : "plain_";
        for (const [k, v] of Object.entries(mooring)) out[`${prefix}${k}`] = v;
        for (const [k, v] of Object.entries(bare)) out[`${prefix}bare_${k}`] = v;
      }
      return out;
    } finally {
      await ctx.databases.drop(db);
    }
  },
  rows(m: Sample, ctx): Row[] {
    const s = size(ctx);
    const benchmark = `Fan-out, ${s.subscribers} subscribers`;
    const deflateVsBare = ratio(m.delayP99, m.bare_delayP99);
    const deflateVsPlain = ratio(m.delayP99, m.plain_delayP99);
    return [
      {
        benchmark,
        figure: "delivered events/s",
        value: m.eventsPerSecond,
        unit: "events/s",
        reference: { label: "bare ws server, same frames", value: m.bare_eventsPerSecond, unit: "events/s" },
        ratio: ratio(m.eventsPerSecond, m.bare_eventsPerSecond),
        target: null,
        met: null,
      },
      {
        benchmark,
        figure: "agent event → subscriber p50, deflate",
        value: m.delayP50,
        unit: "ms",
        reference: { label: "bare ws server p50", value: m.bare_delayP50, unit: "ms" },
        ratio: ratio(m.delayP50, m.bare_delayP50),
        target: null,
        met: null,
      },
      {
        benchmark,
        figure: "agent event → subscriber p99, deflate",
        value: m.delayP99,
        unit: "ms",
        reference: { label: "bare ws server p99", value: m.bare_delayP99, unit: "ms" },
        ratio: deflateVsBare,
        target: `≤ ${DEFLATE_VS_BARE}× bare ws p99 and ≤ ${DEFLATE_VS_PLAIN}× the no-deflate p99`,
        met:
          deflateVsBare === null || deflateVsPlain === null
            ? null
            : deflateVsBare <= DEFLATE_VS_BARE && deflateVsPlain <= DEFLATE_VS_PLAIN,
        note: `${deflateVsPlain === null ? "?" : deflateVsPlain.toFixed(2)}× the no-deflate p99; commit (event at) → subscriber p99 ${m.commitDelayP99?.toFixed(1)} ms; events missing ${m.missing}`,
      },
      {
        benchmark,
        figure: "agent event → subscriber p50, no deflate",
        value: m.plain_delayP50,
        unit: "ms",
        reference: { label: "bare ws server p50, no deflate", value: m.plain_bare_delayP50, unit: "ms" },
        ratio: ratio(m.plain_delayP50, m.plain_bare_delayP50),
        target: null,
        met: null,
      },
      {
        benchmark,
        figure: "agent event → subscriber p99, no deflate",
        value: m.plain_delayP99,
        unit: "ms",
        reference: { label: "bare ws server p99, no deflate", value: m.plain_bare_delayP99, unit: "ms" },
        ratio: ratio(m.plain_delayP99, m.plain_bare_delayP99),
        ...upTo(ratio(m.plain_delayP99, m.plain_bare_delayP99), PLAIN_VS_BARE, "bare ws p99"),
        note: `clients that do not negotiate permessage-deflate; ${m.plain_eventsPerSecond?.toFixed(0)} events/s delivered, events missing ${m.plain_missing}`,
      },
      {
        benchmark,
        figure: "RSS per idle connection",
        value: m.rssPerConnection / 1024,
        unit: "KiB",
        reference: { label: "bare ws server", value: m.bare_rssPerConnection / 1024, unit: "KiB" },
        ratio: ratio(m.rssPerConnection, m.bare_rssPerConnection),
        target: "≤ 20 KB",
        met: m.rssPerConnection <= 20_000,
      },
    ];
  },
};

class ClientProcess {
  private constructor(readonly child: ChildProcess) {}

  static start(deflate: boolean): ClientProcess {
    const child = track(
      spawn(process.execPath, ["--import", "tsx", "bench/fanout-client.ts"], {
        cwd: repoRoot,
        env: { ...process.env, BENCH_FANOUT_DEFLATE: deflate ? "1" : "0" },
        stdio: ["ignore", "inherit", "inherit", "ipc"],
      }),
    );
    return new ClientProcess(child);
  }

  async ask(message: object): Promise<any> {
    const answer = once(this.child, "message");
    this.child.send(message);
    const [reply] = (await Promise.race([
      answer,
      sleep(120_000).then(() => {
        throw new Error("fan-out client did not answer");
      }),
    ])) as [any];
    if (!reply.ok) throw new Error(`fan-out client: ${reply.error}`);
    return reply;
  }

  async close(): Promise<void> {
    if (this.child.exitCode !== null) return;
    this.child.send({ cmd: "close" });
    await Promise.race([once(this.child, "exit"), sleep(3000)]);
    if (this.child.exitCode === null) this.child.kill("SIGKILL");
  }
}

async function connectAll(
  clients: ClientProcess[],
  url: string,
  sessionId: string | null,
  afterSeq: number,
  n: number,
) {
  const per = Math.ceil(n / clients.length);
  await Promise.all(
    clients.map((c, i) => c.ask({ cmd: "connect", url, sessionId, afterSeq, n: Math.min(per, n - i * per) })),
  );
}

/** Collect until every subscriber got `expected` events (or the timeout), then merge. */
async function collect(clients: ClientProcess[], expectedTotal: number, timeoutMs = 30_000) {
  const deadline = Date.now() + timeoutMs;
  const merged: ClientStats = {
    sockets: 0,
    events: 0,
    messages: 0,
    first: Infinity,
    last: 0,
    sinceAt: [],
    sinceClock: [],
  };
  for (;;) {
    const parts = (await Promise.all(clients.map((c) => c.ask({ cmd: "collect" })))).map(
      (r) => r.stats as ClientStats,
    );
    for (const p of parts) {
      merged.events += p.events;
      merged.messages += p.messages;
      if (p.events > 0) merged.first = Math.min(merged.first, p.first);
      merged.last = Math.max(merged.last, p.last);
      for (const v of p.sinceAt) merged.sinceAt.push(v);
      for (const v of p.sinceClock) merged.sinceClock.push(v);
    }
    merged.sockets = parts.reduce((n, p) => n + p.sockets, 0);
    if (merged.events >= expectedTotal || Date.now() > deadline) return merged;
    await sleep(100);
  }
}

function summarize(stats: ClientStats, expectedTotal: number, rssPerConnection: number) {
  return {
    eventsPerSecond: stats.events / ((stats.last - stats.first) / 1000),
    delayP50: percentile(stats.sinceClock, 50),
    delayP99: percentile(stats.sinceClock, 99),
    commitDelayP99: percentile(stats.sinceAt, 99),
    rssPerConnection,
    missing: expectedTotal - stats.events,
  };
}

async function runMooring(
  _ctx: BenchContext,
  databaseUrl: string,
  s: ReturnType<typeof size>,
  deflate: boolean,
) {
  const gateway = await spawnGateway({
    env: gatewayEnv(databaseUrl, { MOORING_INSTANCE_ID: "bench-fanout" }),
  });
  const http = new HttpClient(gateway.url, 8);
  const clients = Array.from({ length: s.processes }, () => ClientProcess.start(deflate));
  try {
    await gateway.waitReady();
    const session = await http.json<{ id: string }>("POST", "/v1/sessions", {
      workspace: "/tmp",
      agent: "simulated",
    });
    const runTurn = async (prompt: string) => {
      const task = await http.json<{ id: string }>("POST", `/v1/sessions/${session.id}/turns`, { prompt });
      for (;;) {
        const t = await http.json<{ status: string }>("GET", `/v1/tasks/${task.id}?waitMs=10000`);
        if (!["queued", "running", "cancelling"].includes(t.status)) return;
      }
    };
    await runTurn("[clock] [tool 100] [tool 100] [sleep 5] [clock]");
    await sleep(500);
    const before = gateway.rss();
    const { lastSeq } = await http.json<{ lastSeq: number }>("GET", `/v1/sessions/${session.id}`);
    await connectAll(clients, gateway.url, session.id, lastSeq, s.subscribers);
    await sleep(s.idleMs);
    const after = gateway.rss();
    await collect(clients, 0);
    const step = `[clock]${" [tool 100]".repeat(TOOLS_PER_STEP)} [sleep ${STEP_MS}]`;
    const perSubscriber = 2 + s.steps * (1 + 2 * TOOLS_PER_STEP) + 3;
    await runTurn(Array.from({ length: s.steps }, () => step).join(" "));
    const stats = await collect(clients, perSubscriber * s.subscribers);
    return summarize(stats, perSubscriber * s.subscribers, (after - before) / s.subscribers);
  } finally {
    await Promise.all(clients.map((c) => c.close()));
    http.close();
    await gateway.stop();
  }
}

async function runBare(s: ReturnType<typeof size>, deflate: boolean) {
  const server = track(
    spawn(process.execPath, ["--import", "tsx", "bench/fanout-bare-server.ts"], {
      cwd: repoRoot,
      stdio: ["ignore", "pipe", "inherit"],
    }),
  );
  const clients = Array.from({ length: s.processes }, () => ClientProcess.start(deflate));
  try {
    const [line] = (await once(server.stdout!, "data")) as [Buffer];
    const port = Number(line.toString().match(/port (\d+)/)?.[1]);
    const url = `http://127.0.0.1:${port}`;
    // Same warm-up as the gateway gets: one short broadcast to one client.
    await sleep(500);
    const before = readRss(server.pid!);
    await connectAll(clients, url, "00000000-0000-0000-0000-000000000001", 0, s.subscribers);
    await sleep(s.idleMs);
    const after = readRss(server.pid!);
    await collect(clients, 0);
    await fetch(`${url}/broadcast?steps=${s.steps}&tools=${TOOLS_PER_STEP}&interval=${STEP_MS}`).then((r) =>
      r.text(),
    );
    const perSubscriber = s.steps * (1 + 2 * TOOLS_PER_STEP);
    const stats = await collect(clients, perSubscriber * s.subscribers);
    return summarize(stats, perSubscriber * s.subscribers, (after - before) / s.subscribers);
  } finally {
    await Promise.all(clients.map((c) => c.close()));
    server.kill("SIGKILL");
  }
}
