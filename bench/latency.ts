/**
 * Latency under a steady 100 turns/s: each turn is submitted over HTTP to its own idle session
 * while one WebSocket client is subscribed to every session. Measured per turn: submit sent →
 * `task.started` received, and agent event → subscriber (the simulated agent's `[clock]` delta
 * carries the agent's wall clock when it emitted the event; the receipt time is taken on arrival
 * of the frame). Reference in the same run: a bare Postgres NOTIFY → LISTEN round trip at the
 * same rate. A second reference, printed beside it: a durable NOTIFY (a row inserted and the
 * NOTIFY sent in one transaction, so LISTEN hears it only after the commit's WAL flush), the least
 * any delivery of a committed event costs, since mooring commits each event before anyone sees it.
 */
import postgres from "postgres";
import { gatewayEnv, spawnGateway } from "./lib/gateway.js";
import { createSessions, HttpClient } from "./lib/http.js";
import { percentile, sleep, wallMs } from "./lib/stats.js";
import { type BenchContext, type Benchmark, ratio, type Row, type Sample, upTo } from "./lib/types.js";
import { clockOf, RpcSocket } from "./lib/ws.js";

const RATE = Number(process.env.BENCH_LATENCY_RATE ?? 100);
/**
 * A turn's latency against a bare NOTIFY → LISTEN of the same run: a ratio, since on a shared
 * machine the absolute figures move 2–3× from day to day, and the reference moves with them.
 */
const MAX_VS_NOTIFY = 4;
const PROMPT = "[clock] [tool 10] [tokens 5]";

const size = (ctx: BenchContext) => ({
  seconds: ctx.options.quick ? 2 : 10,
  warmupSeconds: ctx.options.quick ? 0.5 : 2,
  sessions: ctx.options.quick ? 100 : 300,
});

export const latency: Benchmark = {
  id: "latency",
  title: `Latency at ${RATE} turns/s`,
  describe: (ctx) => {
    const s = size(ctx);
    return `${RATE} turns/s for ${s.seconds} s (after ${s.warmupSeconds} s of warm-up) over ${s.sessions} sessions, one WebSocket subscriber on all of them; reference: NOTIFY → LISTEN at the same rate`;
  },
  async run(ctx) {
    const s = size(ctx);
    const db = await ctx.databases.create("latency");
    try {
      const mooring = await runMooring(ctx, db.url, s);
      const notify = await runNotify(db.url, s.seconds);
      const durable = await runNotify(db.url, s.seconds, { durable: true });
      ctx.log(
        `  submit→started p50 ${mooring.startedP50.toFixed(1)} p99 ${mooring.startedP99.toFixed(1)} ms; event→subscriber p50 ${mooring.eventP50.toFixed(1)} p99 ${mooring.eventP99.toFixed(1)} ms; NOTIFY p50 ${notify.p50.toFixed(2)} p99 ${notify.p99.toFixed(2)} ms; durable NOTIFY p50 ${durable.p50.toFixed(2)} p99 ${durable.p99.toFixed(2)} ms; ${mooring.rate.toFixed(0)} turns/s achieved`,
      );
      return {
        ...mooring,
        notifyP50: notify.p50,
        notifyP99: notify.p99,
        durableP50: durable.p50,
        durableP99: durable.p99,
      };
    } finally {
      await ctx.databases.drop(db);
    }
  },
  rows(m: Sample): Row[] {
    const benchmark = `Latency at ${RATE} turns/s`;
    const ref = (p: "p50" | "p99") => ({
      label: `NOTIFY → LISTEN ${p}`,
      value: p === "p50" ? m.notifyP50 : m.notifyP99,
      unit: "ms",
    });
    return [
      {
        benchmark,
        figure: "submit → task.started p50",
        value: m.startedP50,
        unit: "ms",
        reference: ref("p50"),
        ratio: ratio(m.startedP50, m.notifyP50),
        target: null,
        met: null,
      },
      {
        benchmark,
        figure: "submit → task.started p99",
        value: m.startedP99,
        unit: "ms",
        reference: ref("p99"),
        ratio: ratio(m.startedP99, m.notifyP99),
        ...upTo(ratio(m.startedP99, m.notifyP99), MAX_VS_NOTIFY, "NOTIFY → LISTEN p99"),
      },
      {
        benchmark,
        figure: "agent event → subscriber p50",
        value: m.eventP50,
        unit: "ms",
        reference: ref("p50"),
        ratio: ratio(m.eventP50, m.notifyP50),
        target: null,
        met: null,
      },
      {
        benchmark,
        figure: "agent event → subscriber p99",
        value: m.eventP99,
        unit: "ms",
        reference: ref("p99"),
        ratio: ratio(m.eventP99, m.notifyP99),
        ...upTo(ratio(m.eventP99, m.notifyP99), MAX_VS_NOTIFY, "NOTIFY → LISTEN p99"),
        note: `achieved ${m.rate?.toFixed(0)} turns/s; submit → task.completed p50 ${m.completedP50?.toFixed(1)} / p99 ${m.completedP99?.toFixed(1)} ms; HTTP submit answer p99 ${m.answerP99?.toFixed(1)} ms`,
      },
      // What durability itself costs: the same two p99s against a NOTIFY that waits for a commit.
      ...(m.durableP99 === undefined
        ? []
        : (["submit → task.started p99", "agent event → subscriber p99"] as const).map((figure) => {
            const value = figure.startsWith("submit") ? m.startedP99 : m.eventP99;
            return {
              benchmark,
              figure: `${figure}, against a durable NOTIFY`,
              value,
              unit: "ms",
              reference: {
                label: "insert + NOTIFY, one commit → LISTEN p99",
                value: m.durableP99,
                unit: "ms",
              },
              ratio: ratio(value, m.durableP99),
              target: null,
              met: null,
            };
          })),
    ];
  },
};

interface InFlight {
  sentAt: number;
  started: boolean;
  measured: boolean;
}

async function runMooring(_ctx: BenchContext, databaseUrl: string, s: ReturnType<typeof size>) {
  const gateway = await spawnGateway({
    env: gatewayEnv(databaseUrl, {
      MOORING_MAX_ACTIVE: "10000",
      MOORING_MAX_QUEUED: "100000",
      MOORING_INSTANCE_ID: "bench-latency",
    }),
  });
  const client = new HttpClient(gateway.url, 64);
  const started: number[] = [];
  const events: number[] = [];
  const completed: number[] = [];
  const answers: number[] = [];
  const inFlight = new Map<string, InFlight>();
  let subscriber: RpcSocket | null = null;
  try {
    await gateway.waitReady();
    const sessions = await createSessions(client, s.sessions);
    subscriber = await RpcSocket.connect(gateway.url, {
      onEvent: (event, at) => {
        const turn = inFlight.get(event.sessionId);
        if (!turn) return;
        if (event.type === "task.started" && !turn.started) {
          turn.started = true;
          if (turn.measured) started.push(at - turn.sentAt);
        } else if (event.type === "message.delta") {
          const emitted = clockOf(event.data?.text);
          if (emitted !== null && turn.measured) events.push(at - emitted);
        } else if (event.type.startsWith("task.") && event.data?.status && event.type !== "task.started") {
          if (turn.measured) completed.push(at - turn.sentAt);
          inFlight.delete(event.sessionId);
        }
      },
    });
    for (const id of sessions) await subscriber.subscribe(id);

    const idle = () => sessions.find((id) => !inFlight.has(id));
    const fire = (measured: boolean) => {
      const sessionId = idle();
      if (!sessionId) return false;
      const sentAt = wallMs();
      inFlight.set(sessionId, { sentAt, started: false, measured });
      void client.request("POST", `/v1/sessions/${sessionId}/turns`, { prompt: PROMPT }).then((answer) => {
        if (answer.status !== 202) throw new Error(`submit answered ${answer.status}`);
        if (measured) answers.push(wallMs() - sentAt);
      });
      return true;
    };
    const steady = async (seconds: number, measured: boolean) => {
      const n = Math.round(seconds * RATE);
      const t0 = wallMs();
      let skipped = 0;
      for (let i = 0; i < n; i++) {
        const due = t0 + (i * 1000) / RATE;
        const wait = due - wallMs();
        if (wait > 0) await sleep(wait);
        if (!fire(measured)) skipped++;
      }
      return { n: n - skipped, seconds: (wallMs() - t0) / 1000 };
    };
    await steady(s.warmupSeconds, false);
    const run = await steady(s.seconds, true);
    const deadline = Date.now() + 30_000;
    while (inFlight.size > 0 && Date.now() < deadline) await sleep(20);
    return {
      startedP50: percentile(started, 50),
      startedP99: percentile(started, 99),
      eventP50: percentile(events, 50),
      eventP99: percentile(events, 99),
      completedP50: percentile(completed, 50),
      completedP99: percentile(completed, 99),
      answerP99: percentile(answers, 99),
      rate: run.n / run.seconds,
    };
  } finally {
    subscriber?.close();
    client.close();
    await gateway.stop();
  }
}

/**
 * A NOTIFY on one connection, received by LISTEN on another, at RATE per second. `durable`: each
 * NOTIFY goes with an insert in one transaction, so it is heard after the commit's WAL flush.
 */
export async function runNotify(databaseUrl: string, seconds: number, { durable = false } = {}) {
  const listener = postgres(databaseUrl, { max: 1, onnotice: () => {} });
  const notifier = postgres(databaseUrl, { max: 1, onnotice: () => {} });
  const rtts: number[] = [];
  try {
    await listener.listen("bench_latency", (payload) => rtts.push(wallMs() - Number(payload)));
    await notifier`select 1`;
    if (durable)
      await notifier`create table if not exists bench_latency_log (id bigserial primary key, at float8)`;
    const n = Math.round(seconds * RATE);
    const t0 = wallMs();
    for (let i = 0; i < n; i++) {
      const wait = t0 + (i * 1000) / RATE - wallMs();
      if (wait > 0) await sleep(wait);
      if (durable) {
        await notifier.begin(async (tx) => {
          const at = wallMs();
          await tx`insert into bench_latency_log (at) values (${at})`;
          await tx`select pg_notify('bench_latency', ${String(at)})`;
        });
      } else await notifier`select pg_notify('bench_latency', ${String(wallMs())})`;
    }
    await sleep(100);
    return { p50: percentile(rtts, 50), p99: percentile(rtts, 99) };
  } finally {
    await listener.end({ timeout: 1 });
    await notifier.end({ timeout: 1 });
  }
}
