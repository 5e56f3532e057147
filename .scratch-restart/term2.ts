import postgres from "postgres";
import { pino } from "pino";
import { loadConfig } from "../src/config.js";
import { startGateway } from "../src/gateway.js";
import { call } from "../test/support/gateway.js";
import { GATE_LOCK_KEY } from "../src/sql/gate-lock.js";
import { isClosedSocketWrite, recyclePools } from "../src/db/client.js";
process.on("uncaughtException", (e) => { if (isClosedSocketWrite(e)) { console.log("BUG HIT"); recyclePools(); return; } console.log("OTHER", e); process.exit(1); });
import { TaskService } from "../src/domain/tasks.js";
(globalThis as any).__n = 0; (globalThis as any).__open = new Set(); (globalThis as any).__where = new Map(); const T0 = Date.now();
const orig = TaskService.prototype.submit;
TaskService.prototype.submit = async function (...args: any[]) {
  console.log("submit start");
  const pool: any = (this as any).rt.db.sql;
  if (!pool.__wrapped) {
    const ob = pool.begin;
    pool.__wrapped = true;
    const orr = pool.reserve;
    pool.reserve = (...a: any[]) => {
      const id = ++(globalThis as any).__n;
      console.log(Date.now() - T0, "reserve start", id);
      return orr(...a).then((c: any) => {
        console.log(Date.now() - T0, "reserve got", id);
        const rel = c.release; c.release = () => { console.log(Date.now() - T0, "release", id); return rel(); };
        return c;
      }, (e: any) => { console.log("reserve rejected", id, e?.code); throw e; });
    };
    pool.begin = (...a: any[]) => {
      const id = ++(globalThis as any).__n; (globalThis as any).__open.add(id);
      const st = new Error().stack!.split("\n").slice(2, 5).map((l) => l.trim()).join(" | ");
      (globalThis as any).__where.set(id, st);
      return ob(...a).then((r: any) => { (globalThis as any).__open.delete(id); return r; }, (e: any) => { (globalThis as any).__open.delete(id); console.log(Date.now() - T0, "begin rejected", id, e?.code); throw e; });
    };
  }
  const rowOrig = (this as any).sessions.row.bind((this as any).sessions);
  (this as any).sessions.row = async (...a: any[]) => { console.log("row start"); try { return await rowOrig(...a); } finally { console.log("row done"); } };
  try { const r = await (orig as any).apply(this, args); console.log("submit ok"); return r; } catch (e: any) { console.log("submit threw", e?.code, String(e)); throw e; }
};
const admin = postgres("postgres://postgres@127.0.0.1:5432/postgres", { max: 2, onnotice: () => {} });
await admin.unsafe("drop database if exists termtest2 with (force)");
await admin.unsafe("create database termtest2");
const url = "postgres://postgres@127.0.0.1:5432/termtest2";
const a2 = postgres(url, { max: 2 });
const config = loadConfig({ DATABASE_URL: url, HOST: "127.0.0.1", PORT: "0", MOORING_LEASE_MS: "1500", MOORING_HEARTBEAT_MS: "300", MOORING_SWEEP_MS: "500", MOORING_POLL_MS: "100", MOORING_INSTANCE_ID: "term" });
const gw = await startGateway(config, pino({ level: "warn" }));
await gw.started;
const s = await call(gw.url, "POST", "/v1/sessions", { workspace: "/tmp", agent: "simulated" });
const holder = await a2.reserve();
await holder`select pg_advisory_lock(${GATE_LOCK_KEY})`;
const T = Date.now();
const sub = call(gw.url, "POST", `/v1/sessions/${s.body.id}/turns`, { prompt: "[deltas 1]" }).then((r) => { console.log(Date.now() - T, "submit answered", r.status, JSON.stringify(r.body)); return r; });
await new Promise((r) => setTimeout(r, 1000));
console.log(Date.now() - T0, "waiting:", await a2`select pid, left(query, 50) as q from pg_stat_activity where application_name = 'mooring:term' and wait_event_type = 'Lock'`);
console.log(Date.now() - T0, "terminated", (await a2`select pg_terminate_backend(pid) from pg_stat_activity where application_name = 'mooring:term' and wait_event_type = 'Lock'`).length);
await new Promise((r) => setTimeout(r, 1000));
console.log(await a2`select pid, state, wait_event_type, left(query, 60) as q from pg_stat_activity where application_name = 'mooring:term'`);
await holder`select pg_advisory_unlock(${GATE_LOCK_KEY})`;
holder.release();
await Promise.race([sub, new Promise((r) => setTimeout(r, 8000))]);
console.log(Date.now() - T0, "open begins", [...(globalThis as any).__open].map((id: number) => (globalThis as any).__where.get(id)));
console.log(await a2`select pid, state, wait_event_type, left(query, 60) as q from pg_stat_activity where application_name = 'mooring:term'`);
await a2.end(); await admin.unsafe("drop database termtest2 with (force)"); await admin.end();
process.exit(0);
