import postgres from "postgres";
import { connect, isClosedSocketWrite, recyclePools } from "../src/db/client.js";
let hits = 0;
process.on("uncaughtException", (e) => { if (isClosedSocketWrite(e)) { hits++; recyclePools(); return; } console.log("OTHER", e); process.exit(1); });
const url = "postgres://postgres@127.0.0.1:5432/postgres";
const db = connect(url, { applicationName: "bugtest3" });
const admin = postgres(url, { max: 2 });
const holder = await admin.reserve();
await holder`select pg_advisory_lock(4242)`;
const mode = process.argv[2];
const p = (mode === "begin"
  ? db.sql.begin(async (tx) => { await tx`select pg_advisory_xact_lock(4242)`; await tx`select 1`; })
  : db.sql`select pg_advisory_xact_lock(4242)`).then(() => "ok", (e) => e.code ?? String(e));
await new Promise((r) => setTimeout(r, 500));
await admin`select pg_terminate_backend(pid) from pg_stat_activity where application_name = 'bugtest3'`;
console.log("result:", await Promise.race([p, new Promise((r) => setTimeout(() => r("HANG"), 5000))]), "hits", hits);
await holder`select pg_advisory_unlock(4242)`; holder.release();
await admin.end(); process.exit(0);
