import { pino } from "pino";
import { startEmbeddedPostgres } from "../src/db/embedded.js";
import { spawnGateway, call } from "../test/support/gateway.js";
import { mkdtemp, chmod } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
const log = pino({ level: "warn" });
const dir = await mkdtemp(join(tmpdir(), "dbl-")); await chmod(dir, 0o755);
const port = 45000 + Math.floor(Math.random() * 1000);
let pg = await startEmbeddedPostgres(dir, log, port);
const gw = await spawnGateway({ DATABASE_URL: pg.url, HOST: "127.0.0.1", PORT: "0", LOG_LEVEL: "info", MOORING_LEASE_MS: "1500", MOORING_HEARTBEAT_MS: "300", MOORING_SWEEP_MS: "500", MOORING_POLL_MS: "100", MOORING_INSTANCE_ID: "x" });
await gw.waitReady();
for (let round = 0; round < 10; round++) {
  const ids: string[] = [];
  for (let i = 0; i < 10; i++) {
    const s = await call(gw.url, "POST", "/v1/sessions", { workspace: dir, agent: "simulated" });
    const k = await call(gw.url, "POST", `/v1/sessions/${s.body.id}/turns`, { prompt: "[sleep 2000] [deltas 2]" });
    ids.push(k.body.id);
  }
  await pg.stop();
  const t0 = Date.now();
  while (Date.now() - t0 < 4000) { await call(gw.url, "GET", "/readyz"); await call(gw.url, "POST", "/v1/sessions", { workspace: dir, agent: "simulated" }); }
  pg = await startEmbeddedPostgres(dir, log, port);
  const t1 = Date.now();
  await gw.waitReady();
  const readyMs = Date.now() - t1;
  const statuses: string[] = [];
  for (const id of ids) { for (;;) { const r = await call(gw.url, "GET", `/v1/tasks/${id}?waitMs=3000`); if (["completed","interrupted","failed"].includes(r.body?.status)) { statuses.push(r.body.status); break; } } }
  const bugs = gw.output().split("\n").filter(l => l.includes("upstream bug")).length;
  console.log(`round ${round}: ready ${readyMs} ms; bugs so far ${bugs}; statuses ${statuses.join(",")}`);
}
gw.kill("SIGKILL"); await pg.stop();
process.exit(0);
