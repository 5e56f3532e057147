import { pino } from "pino";
import { startEmbeddedPostgres } from "../src/db/embedded.js";
import { spawnGateway, call } from "../test/support/gateway.js";
import { mkdtemp, chmod } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
const log = pino({ level: process.env.PGLOG ?? "warn" });
const dir = await mkdtemp(join(tmpdir(), "dbl-")); await chmod(dir, 0o755);
const port = 55000 + Math.floor(Math.random() * 1000);
let pg = await startEmbeddedPostgres(dir, log, port);
const gw = await spawnGateway({ DATABASE_URL: pg.url, HOST: "127.0.0.1", PORT: "0", LOG_LEVEL: "info", MOORING_LEASE_MS: "1500", MOORING_HEARTBEAT_MS: "300", MOORING_SWEEP_MS: "500", MOORING_POLL_MS: "100", MOORING_INSTANCE_ID: "x" });
await gw.waitReady();
const T = Date.now(); const t = () => Date.now() - T;
const ids: string[] = [];
for (let i = 0; i < 10; i++) {
  const s = await call(gw.url, "POST", "/v1/sessions", { workspace: dir, agent: "simulated" });
  const k = await call(gw.url, "POST", `/v1/sessions/${s.body.id}/turns`, { prompt: "[sleep 2000] [deltas 2]" });
  ids.push(k.body.id);
}
await pg.stop(); console.log(t(), "pg stopped");
for (let i = 0; i < 10; i++) {
  const r = await call(gw.url, "GET", "/readyz").catch((e) => ({ status: String(e) }));
  console.log(t(), "readyz", r.status);
  await new Promise((r) => setTimeout(r, 500));
}
pg = await startEmbeddedPostgres(dir, log, port); console.log(t(), "pg started");
for (let i = 0; i < 40; i++) {
  const r = await call(gw.url, "GET", "/readyz").catch((e) => ({ status: String(e) }));
  console.log(t(), "readyz", r.status, gw.child.exitCode);
  if (r.status === 200) break;
  await new Promise((r) => setTimeout(r, 500));
}
await new Promise((r) => setTimeout(r, 8000));
for (const id of ids) { const r = await call(gw.url, "GET", `/v1/tasks/${id}`).catch(e => ({status: String(e), body: null})); console.log(r.status, (r.body as any)?.status); }
gw.kill("SIGKILL"); await pg.stop();
const out = gw.output().split("\n").filter(l => !l.includes('"msg":"request completed"') && !l.includes('"msg":"incoming request"'));
console.log(out.map(l => l.slice(0, 300)).join("\n"));
