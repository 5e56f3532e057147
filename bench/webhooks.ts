/**
 * Webhooks (docs/webhooks.md): a `task.completed` webhook to a loopback receiver for every turn.
 * Measured: the turn's terminal event (the webhook's `timestamp`, set in the settling transaction)
 * → the webhook's arrival at the receiver, at a steady 50 turns/s, against a bare NOTIFY → LISTEN
 * at 100/s in the same run (recorded, no target: a delivery is an HTTP request after the commit);
 * and the throughput benchmark's turns with the webhook on against the same turns without it: the
 * outbox row written with each settlement must not slow turns down.
 */
import { once } from "node:events";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { gatewayEnv, spawnGateway } from "./lib/gateway.js";
import { createSessions, HttpClient } from "./lib/http.js";
import { percentile, sleep, wallMs } from "./lib/stats.js";
import { atLeast, type BenchContext, type Benchmark, ratio, type Row, type Sample } from "./lib/types.js";
import { runNotify } from "./latency.js";
import { runMooring } from "./throughput.js";

const SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const RATE = 50;
/** Throughput with the webhook on, as a share of the same turns' throughput without it. */
const MIN_THROUGHPUT_SHARE = 0.95;

const size = (ctx: BenchContext) => ({
  seconds: ctx.options.quick ? 2 : 10,
  sessions: ctx.options.quick ? 100 : 500,
  throughput: ctx.options.quick
    ? { turns: 150, sessions: 150, warmup: 30 }
    : { turns: 2000, sessions: 1000, warmup: 300 },
});

export const webhooks: Benchmark = {
  id: "webhooks",
  title: "Webhooks",
  describe: (ctx) => {
    const s = size(ctx);
    return `a task.completed webhook to a loopback receiver per turn: ${RATE} turns/s for ${s.seconds} s, terminal event → webhook received (reference: NOTIFY → LISTEN); ${s.throughput.turns} turns of 10 events at 32 HTTP clients with and without the webhook`;
  },
  async run(ctx) {
    const s = size(ctx);
    const receiver = await Receiver.start();
    const hooks = JSON.stringify([{ url: receiver.url, secret: SECRET, events: ["task.completed"] }]);
    const out: Sample = {};
    try {
      const db = await ctx.databases.create("webhooks");
      try {
        const delivery = await runDeliveries(db.url, hooks, receiver, s);
        const notify = await runNotify(db.url, s.seconds);
        Object.assign(out, delivery, { notifyP50: notify.p50, notifyP99: notify.p99 });
      } finally {
        await ctx.databases.drop(db);
      }
      // Without, then with the webhook, each on a fresh database (the run counts every task in it).
      for (const on of [false, true]) {
        const tdb = await ctx.databases.create(on ? "webhooks_on" : "webhooks_off");
        try {
          const run = await runMooring(ctx, tdb, s.throughput, on ? { MOORING_WEBHOOKS: hooks } : {});
          out[on ? "throughputOn" : "throughputOff"] = run.rate;
        } finally {
          await ctx.databases.drop(tdb);
        }
      }
      ctx.log(
        `  terminal event → webhook p50 ${out.deliveryP50.toFixed(1)} p99 ${out.deliveryP99.toFixed(1)} ms (${out.delivered} of ${out.submitted}); NOTIFY p99 ${out.notifyP99.toFixed(2)} ms; throughput ${out.throughputOn.toFixed(0)}/s with the webhook, ${out.throughputOff.toFixed(0)}/s without`,
      );
      return out;
    } finally {
      await receiver.close();
    }
  },
  rows(m: Sample): Row[] {
    const benchmark = "Webhooks";
    const share = ratio(m.throughputOn, m.throughputOff);
    return [
      {
        benchmark,
        figure: "terminal event → webhook received p99",
        value: m.deliveryP99,
        unit: "ms",
        reference: { label: "NOTIFY → LISTEN p99", value: m.notifyP99, unit: "ms" },
        ratio: ratio(m.deliveryP99, m.notifyP99),
        target: null,
        met: null,
        note: `p50 ${m.deliveryP50?.toFixed(1)} ms at ${RATE} turns/s; ${m.delivered} of ${m.submitted} turns' webhooks received`,
      },
      {
        benchmark,
        figure: "turns/s with the webhook on",
        value: m.throughputOn,
        unit: "turns/s",
        reference: { label: "the same turns without webhooks", value: m.throughputOff, unit: "turns/s" },
        ratio: share,
        ...atLeast(share, MIN_THROUGHPUT_SHARE, "without"),
      },
    ];
  },
};

/** A loopback receiver: the arrival time of each webhook, against the event's timestamp. */
class Receiver {
  readonly delays: number[] = [];
  private constructor(
    private readonly server: Server,
    readonly url: string,
  ) {}

  static async start(): Promise<Receiver> {
    let self: Receiver | null = null;
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        const at = wallMs();
        res.writeHead(200).end();
        try {
          const body = JSON.parse(Buffer.concat(chunks).toString());
          self?.delays.push(at - Date.parse(body.timestamp));
        } catch {
          // not a webhook: ignored
        }
      });
    });
    server.listen(0, "127.0.0.1");
    await once(server, "listening");
    self = new Receiver(server, `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`);
    return self;
  }

  close(): Promise<void> {
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

async function runDeliveries(
  databaseUrl: string,
  hooks: string,
  receiver: Receiver,
  s: ReturnType<typeof size>,
) {
  const gateway = await spawnGateway({
    env: gatewayEnv(databaseUrl, {
      MOORING_MAX_ACTIVE: "10000",
      MOORING_MAX_QUEUED: "100000",
      MOORING_INSTANCE_ID: "bench-webhooks",
      MOORING_WEBHOOKS: hooks,
    }),
  });
  const client = new HttpClient(gateway.url, 64);
  try {
    await gateway.waitReady();
    const sessions = await createSessions(client, s.sessions).catch((err) => {
      // Seen once in CI: a gateway ready a moment ago answered "shutting down". Its own log says why.
      throw new Error(`${err}\ngateway pid ${gateway.pid}, output:\n${gateway.output().slice(-4000)}`);
    });
    const n = Math.round(s.seconds * RATE);
    const t0 = wallMs();
    const submits: Promise<unknown>[] = [];
    for (let i = 0; i < n; i++) {
      const wait = t0 + (i * 1000) / RATE - wallMs();
      if (wait > 0) await sleep(wait);
      submits.push(
        client.request("POST", `/v1/sessions/${sessions[i % sessions.length]}/turns`, { prompt: "hello" }),
      );
    }
    await Promise.all(submits);
    const deadline = wallMs() + 30_000;
    while (receiver.delays.length < n && wallMs() < deadline) await sleep(20);
    const delays = receiver.delays.splice(0);
    return {
      deliveryP50: percentile(delays, 50),
      deliveryP99: percentile(delays, 99),
      delivered: delays.length,
      submitted: n,
    };
  } finally {
    client.close();
    await gateway.stop();
  }
}
