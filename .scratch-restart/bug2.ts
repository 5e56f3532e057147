import postgres from "postgres";
import { connect, isClosedSocketWrite, recyclePools } from "../src/db/client.js";
let hits = 0;
process.on("uncaughtException", (e) => { if (isClosedSocketWrite(e)) { hits++; return; } console.log("OTHER", e); process.exit(1); });
const url = "postgres://postgres@127.0.0.1:5432/postgres";
const db = connect(url, { applicationName: "bugtest" });
const admin = postgres(url, { max: 1 });
for (let i = 0; i < 5; i++) {
  const p = db.sql.begin(async (tx) => { await tx`select pg_sleep(2)`; }).catch((e) => e.code ?? String(e));
  await new Promise((r) => setTimeout(r, 300));
  await admin`select pg_terminate_backend(pid) from pg_stat_activity where application_name = 'bugtest' and query like '%pg_sleep%'`;
  console.log("tx ->", await p);
  await new Promise((r) => setTimeout(r, 50));
  const t0 = Date.now();
  const r = await Promise.all(Array.from({ length: 12 }, () => db.sql`select 1 as x`.then(() => "ok", (e) => e.code)));
  console.log("hits", hits, "after:", r.join(","), Date.now() - t0, "ms");
}
await db.close(); await admin.end();
