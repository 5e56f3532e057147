/**
 * Webhook latency, outside `npm run bench`'s table: one gateway process with the default
 * MOORING_WEBHOOK_POLL_MS, a loopback receiver, and turns submitted one after another (each on
 * its own session, the next once the last one's webhook arrived): submit sent → its
 * `task.completed` webhook received. Prints the median and p90 in ms.
 *
 *   npx tsx bench/webhook-latency.ts [turns]      (default 20)
 *
 * BENCH_APP_DIR runs another checkout (an older commit) for a before/after figure.
 */
import { once } from "node:events";
import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { BenchDatabases } from "./lib/db.js";
import { gatewayEnv, spawnGateway } from "./lib/gateway.js";
import { HttpClient } from "./lib/http.js";
import { percentile, wallMs } from "./lib/stats.js";

const turns = Number(process.argv[2] ?? 20);
const SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

const waiting = new Map<string, (at: number) => void>();
const receiver = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on("data", (c: Buffer) => chunks.push(c));
  req.on("end", () => {
    const at = wallMs();
    const body = JSON.parse(Buffer.concat(chunks).toString());
    res.writeHead(200).end();
    waiting.get(body.data.taskId)?.(at);
  });
});
receiver.listen(0, "127.0.0.1");
await once(receiver, "listening");
const hook = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;

const workspace = await mkdtemp(join(tmpdir(), "mooring-wh-latency-"));
const databases = await BenchDatabases.open(console.log);
const db = await databases.create("webhook_latency");
const gateway = await spawnGateway({
  env: gatewayEnv(db.url, {
    MOORING_WEBHOOKS: JSON.stringify([{ url: hook, secret: SECRET, events: ["task.completed"] }]),
  }),
});
try {
  await gateway.waitReady();
  const client = new HttpClient(gateway.url);
  const samples: number[] = [];
  for (let i = 0; i < turns; i++) {
    const session = await client.request("POST", "/v1/sessions", { agent: "simulated", workspace });
    const sent = wallMs();
    const submitted = await client.request("POST", `/v1/sessions/${session.body.id}/turns`, {
      prompt: "hello",
    });
    const taskId: string = submitted.body.id;
    const received = await new Promise<number>((resolve) => waiting.set(taskId, resolve));
    waiting.delete(taskId);
    samples.push(received - sent);
  }
  console.log(
    `${turns} turns: submit → task.completed webhook received: median ${percentile(samples, 50).toFixed(1)} ms, p90 ${percentile(samples, 90).toFixed(1)} ms`,
  );
} finally {
  await gateway.stop();
  receiver.close();
  await databases.dropAll();
}
