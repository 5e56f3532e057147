import postgres from "postgres";
import { connect, isClosedSocketWrite } from "../src/db/client.js";
let hits = 0;
process.on("uncaughtException", (e) => { if (isClosedSocketWrite(e)) { hits++; return; } console.log("OTHER", e); process.exit(1); });
const url = "postgres://postgres@127.0.0.1:5432/postgres";
const db = connect(url, { applicationName: "pipetest3" });
const admin = postgres(url, { max: 2 });
const holder = await admin.reserve();
await holder`select pg_advisory_lock(4245)`;
const connection = await db.sql.reserve();
const raw = connection as any;
const q = (strings: TemplateStringsArray, ...args: unknown[]) => raw(strings, ...args).execute();
const names = ["begin", "lock", "big", "s2", "commit"];
const mode = process.argv[2];
const ps = mode === "a"
  ? [q`begin`, q`select pg_advisory_xact_lock(4245)`, q`select ${"x"}::text as a`, q`select 2`, q`commit`]
  : [connection`begin`.execute(), connection`select pg_advisory_xact_lock(4245)`.execute(), connection`select ${"x"}::text as a`.execute(), connection`select 2`.execute(), connection`commit`.execute()];
const state = names.map(() => "pending");
ps.forEach((p, i) => (p as any).then(() => (state[i] = "ok"), (e: any) => (state[i] = "rej:" + (e.code ?? e))));
await new Promise((r) => setTimeout(r, 500));
console.log("terminated", (await admin`select pg_terminate_backend(pid) from pg_stat_activity where application_name = 'pipetest3' and wait_event_type = 'Lock'`).length);
await new Promise((r) => setTimeout(r, 3000));
console.log(mode, names.map((n, i) => `${n}=${state[i]}`).join(" "), "hits", hits);
await holder`select pg_advisory_unlock(4245)`; holder.release();
await admin.end(); process.exit(0);
