import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import postgres from "postgres";
import { startEmbeddedPostgres } from "../src/db/embedded.js";
const log = pino({ level: "warn" });
const dir = await mkdtemp(join(tmpdir(), "lx-")); await (await import("node:fs/promises")).chmod(dir, 0o755);
const port = 54000 + Math.floor(Math.random() * 1000);
let pg = await startEmbeddedPostgres(dir, log, port);
const sql = postgres(pg.url, { max: 1, onnotice: () => {}, connect_timeout: 5 });
let got = 0, listens = 0;
await sql.listen("chan", () => got++, () => { listens++; console.log("onlisten", listens); });
const n = postgres(pg.url, { max: 1, onnotice: () => {} });
await n`select pg_notify('chan','x')`;
await new Promise(r => setTimeout(r, 300));
console.log("got before", got);
await pg.stop();
console.log("stopped");
await new Promise(r => setTimeout(r, 4000));
pg = await startEmbeddedPostgres(dir, log, port);
console.log("restarted");
for (let i = 0; i < 20; i++) {
  await n`select pg_notify('chan','x')`.catch((e) => console.log("notify err", e.code));
  await new Promise(r => setTimeout(r, 500));
  console.log("t", i, "got", got, "listens", listens);
}
await sql.end(); await n.end(); await pg.stop();
