/**
 * What idle WebSocket subscribers cost the gateway, on its own (the fan-out benchmark's "RSS per
 * idle connection" without the streaming that follows it): a gateway, one session with a finished
 * turn, then N subscribers (bench/fanout-client.ts) that sit idle. Prints VmRSS and its parts
 * (/proc smaps_rollup: anonymous vs file) before and after, per connection. With
 * BENCH_IDLE_SNAPSHOTS=1 the gateway runs with --heapsnapshot-signal and writes a heap snapshot
 * (after a full GC, which the snapshot does) before and after the subscribers connect, into
 * BENCH_IDLE_DIR (default /tmp); bench/heap-summary.ts diffs two of them by constructor.
 *
 *   npx tsx bench/idle-rss.ts                        # 1000 subscribers negotiating deflate
 *   BENCH_IDLE_DEFLATE=0 BENCH_IDLE_N=500 npx tsx bench/idle-rss.ts
 *   BENCH_APP_DIR=/path/to/other/checkout npx tsx bench/idle-rss.ts   # another checkout's gateway
 *   BENCH_IDLE_BARE=1 npx tsx bench/idle-rss.ts     # the bare `ws` reference server (bench/fanout-bare-server.ts)
 */
import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import WebSocket from "ws";
import { BenchDatabases } from "./lib/db.js";
import { gatewayEnv, repoRoot, spawnGateway, track } from "./lib/gateway.js";
import { HttpClient } from "./lib/http.js";
import { sleep } from "./lib/stats.js";

const n = Number(process.env.BENCH_IDLE_N ?? 1000);
const processes = Number(process.env.BENCH_IDLE_PROCESSES ?? 2);
const deflate = process.env.BENCH_IDLE_DEFLATE !== "0";
const idleMs = Number(process.env.BENCH_IDLE_MS ?? 1500);
const snapshots = process.env.BENCH_IDLE_SNAPSHOTS === "1";
const dir = process.env.BENCH_IDLE_DIR ?? "/tmp";
/** With BENCH_IDLE_INSPECT=1: process.memoryUsage() of the gateway over the inspector, before and after a full GC. */
const inspect = process.env.BENCH_IDLE_INSPECT === "1" || !!process.env.BENCH_IDLE_ALLOC;
/**
 * With BENCH_IDLE_ALLOC=file: a sampling heap profile of everything allocated while the
 * subscribers connect, collected garbage included (what the young generation promotes grows the
 * old space until the next full GC), written to `file` (.heapprofile, DevTools reads it).
 */
const allocFile = process.env.BENCH_IDLE_ALLOC;
const bare = process.env.BENCH_IDLE_BARE === "1";
const BARE_SESSION = "00000000-0000-0000-0000-000000000001";

function memory(pid: number): Record<string, number> {
  const out: Record<string, number> = {};
  for (const line of readFileSync(`/proc/${pid}/smaps_rollup`, "utf8").split("\n")) {
    const m = line.match(/^(Rss|Anonymous|Pss_Anon|Pss_File|Private_Dirty):\s+(\d+) kB/);
    if (m) out[m[1]] = Number(m[2]) * 1024;
  }
  return out;
}

/** A minimal inspector client: evaluates expressions in the gateway and collects its garbage. */
async function inspector(output: () => string) {
  let url = output().match(/Debugger listening on (ws:\S+)/)?.[1];
  while (!url) {
    await sleep(50);
    url = output().match(/Debugger listening on (ws:\S+)/)?.[1];
  }
  const ws = new WebSocket(url);
  await once(ws, "open");
  let id = 0;
  const pending = new Map<number, (v: any) => void>();
  ws.on("message", (data) => {
    const m = JSON.parse(data.toString());
    if (m.id !== undefined) pending.get(m.id)?.(m);
  });
  const call = (method: string, params: object = {}) =>
    new Promise<any>((resolve) => {
      pending.set(++id, resolve);
      ws.send(JSON.stringify({ id, method, params }));
    });
  const usage = async () => {
    const r = await call("Runtime.evaluate", {
      // `require` of the inspector's command line API.
      expression: `JSON.stringify({
        ...process.memoryUsage(),
        ...Object.fromEntries(require("node:v8").getHeapSpaceStatistics().map((s) => [s.space_name, s.space_size])),
      })`,
      includeCommandLineAPI: true,
      returnByValue: true,
    });
    return JSON.parse(r.result.result.value) as Record<string, number>;
  };
  return {
    usage,
    call,
    gc: () => call("HeapProfiler.collectGarbage"),
    close: () => ws.close(),
  };
}

function ask(child: ChildProcess, message: object): Promise<any> {
  const answer = once(child, "message");
  child.send(message);
  return answer.then(([reply]: any[]) => {
    if (!reply.ok) throw new Error(`client: ${reply.error}`);
    return reply;
  });
}

async function snapshot(pid: number, label: string): Promise<void> {
  const before = new Set(readdirSync(dir).filter((f) => f.endsWith(".heapsnapshot")));
  process.kill(pid, "SIGUSR2");
  for (;;) {
    await sleep(500);
    const fresh = readdirSync(dir).filter((f) => f.endsWith(".heapsnapshot") && !before.has(f));
    if (fresh.length > 0) {
      // Written once its size stops growing.
      let size = -1;
      for (;;) {
        const now = readFileSync(`${dir}/${fresh[0]}`).length;
        if (now === size && now > 0) break;
        size = now;
        await sleep(500);
      }
      console.log(`${label} snapshot: ${dir}/${fresh[0]}`);
      return;
    }
  }
}

const databases = await BenchDatabases.open(console.log);
const db = await databases.create("idle_rss");
const nodeFlags = [
  ...(snapshots ? ["--heapsnapshot-signal=SIGUSR2", `--diagnostic-dir=${dir}`] : []),
  ...(inspect ? ["--inspect=127.0.0.1:0"] : []),
  // e.g. BENCH_IDLE_NODE_FLAGS=--trace-gc (the gateway's output is printed at the end)
  ...(process.env.BENCH_IDLE_NODE_FLAGS?.split(" ").filter(Boolean) ?? []),
];
const gateway = await spawnGateway({
  env: gatewayEnv(db.url, { MOORING_INSTANCE_ID: "bench-idle-rss" }),
  nodeFlags,
  // BENCH_IDLE_BARE=1: the fan-out benchmark's bare `ws` server instead, as the reference.
  command: bare
    ? [process.execPath, ...nodeFlags, "--import", "tsx", `${repoRoot}/bench/fanout-bare-server.ts`]
    : undefined,
});
const http = new HttpClient(gateway.url, 8);
const clients = Array.from({ length: processes }, () =>
  track(
    spawn(process.execPath, ["--import", "tsx", "bench/fanout-client.ts"], {
      cwd: repoRoot,
      env: { ...process.env, BENCH_FANOUT_DEFLATE: deflate ? "1" : "0" },
      stdio: ["ignore", "inherit", "inherit", "ipc"],
    }),
  ),
);
try {
  let sessionId = BARE_SESSION;
  if (bare) {
    while (!gateway.output().includes("port ")) await sleep(50);
  } else {
    await gateway.waitReady();
    const session = await http.json<{ id: string }>("POST", "/v1/sessions", {
      workspace: "/tmp",
      agent: "simulated",
    });
    sessionId = session.id;
    const task = await http.json<{ id: string }>("POST", `/v1/sessions/${session.id}/turns`, {
      prompt: "[clock] [tool 100] [tool 100] [sleep 5] [clock]",
    });
    for (;;) {
      const t = await http.json<{ status: string }>("GET", `/v1/tasks/${task.id}?waitMs=10000`);
      if (!["queued", "running", "cancelling"].includes(t.status)) break;
    }
  }
  await sleep(500);
  const cdp = inspect ? await inspector(gateway.output) : null;
  if (snapshots) await snapshot(gateway.pid, "before");
  const before = memory(gateway.pid);
  const usageBefore = await cdp?.usage();
  if (cdp && allocFile)
    await cdp.call("HeapProfiler.startSampling", {
      samplingInterval: 1024,
      includeObjectsCollectedByMajorGC: true,
      // BENCH_IDLE_ALLOC_MINOR=0: what the young generation collected is left out (what is left: alive, or promoted and collected by a full GC).
      includeObjectsCollectedByMinorGC: process.env.BENCH_IDLE_ALLOC_MINOR !== "0",
    });
  if (process.env.BENCH_IDLE_NODE_FLAGS) console.log("connecting");
  const lastSeq = bare
    ? 0
    : (await http.json<{ lastSeq: number }>("GET", `/v1/sessions/${sessionId}`)).lastSeq;
  const per = Math.ceil(n / processes);
  await Promise.all(
    clients.map((c, i) =>
      ask(c, {
        cmd: "connect",
        url: gateway.url,
        sessionId,
        afterSeq: lastSeq,
        n: Math.min(per, n - i * per),
      }),
    ),
  );
  if (process.env.BENCH_IDLE_NODE_FLAGS) console.log("connected");
  await sleep(idleMs);
  const after = memory(gateway.pid);
  if (cdp && allocFile) {
    // Scavenges (allocating 64 MB of short-lived objects) so that the young garbage of the
    // connections is collected by the young generation before the profile is read.
    if (process.env.BENCH_IDLE_ALLOC_MINOR === "0")
      await cdp.call("Runtime.evaluate", {
        expression: "{ let k; for (let i = 0; i < 2e6; i++) k = { i, j: [i] }; }",
      });
    const profile = await cdp.call("HeapProfiler.stopSampling");
    writeFileSync(allocFile, JSON.stringify(profile.result.profile));
    console.log(`allocations while connecting: ${allocFile}`);
  }
  const line = Object.keys(before)
    .map((k) => `${k} ${((after[k] - before[k]) / n / 1024).toFixed(1)}`)
    .join(", ");
  console.log(
    `${n} idle subscribers (${deflate ? "deflate" : "plain"}), KiB per connection: ${line}; RSS ${(before.Rss / 2 ** 20).toFixed(1)} -> ${(after.Rss / 2 ** 20).toFixed(1)} MiB`,
  );
  if (cdp && usageBefore) {
    const show = (label: string, u: Record<string, number>) =>
      console.log(
        `${label}: ${Object.keys(u)
          .map((k) => `${k} ${((u[k] - usageBefore[k]) / n / 1024).toFixed(1)}`)
          .join(", ")} KiB per connection`,
      );
    show("memoryUsage", await cdp.usage());
    await cdp.gc();
    show("memoryUsage after a full GC", await cdp.usage());
    cdp.close();
  }
  if (snapshots) {
    await snapshot(gateway.pid, "after");
    const gc = memory(gateway.pid);
    console.log(`after the snapshot's GC: RSS ${(gc.Rss / 2 ** 20).toFixed(1)} MiB`);
  }
} finally {
  for (const c of clients) {
    c.send({ cmd: "close" });
  }
  await Promise.all(clients.map((c) => (c.exitCode === null ? once(c, "exit") : null)));
  http.close();
  await gateway.stop();
  if (process.env.BENCH_IDLE_NODE_FLAGS) console.log(gateway.output());
  await databases.dropAll();
}
