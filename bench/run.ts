/**
 * `npm run bench [-- --quick] [-- --runs N] [-- --only throughput,latency]`
 *
 * Runs every benchmark against real gateway processes and real clients on loopback, each on a fresh
 * database that is dropped afterwards, and prints one table: each figure, its reference measured in
 * the same run, the ratio and the target. Figures are medians over the runs (3 by default, 1 with
 * --quick). Results go to bench/results/latest.{json,md} plus a dated copy (full runs),
 * latest-quick.{json,md} (quick runs) or partial.{json,md} (--only). Nothing here asserts speed: a
 * missed target is reported, not fatal; a benchmark that cannot run at all exits non-zero.
 * Knobs for experiments (see bench/README.md): BENCH_DATABASE_URL, BENCH_RUNS, BENCH_GATEWAY_ENV,
 * BENCH_APP_DIR, BENCH_CPU_PROF, BENCH_FANOUT_*, BENCH_GROWTH_SIZES, BENCH_GROWTH_SAMPLES, BENCH_LATENCY_RATE,
 * PGBENCH.
 */
import { execFileSync } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { cpus, loadavg, totalmem } from "node:os";
import { join } from "node:path";
import postgres from "postgres";
import { acp } from "./acp.js";
import { fanout } from "./fanout.js";
import { growth } from "./growth.js";
import { latency } from "./latency.js";
import { removeBuilds } from "./lib/build.js";
import { BenchDatabases } from "./lib/db.js";
import { repoRoot } from "./lib/gateway.js";
import { formatNumber, median } from "./lib/stats.js";
import type { BenchContext, Benchmark, BenchOptions, Row, Sample } from "./lib/types.js";
import { recovery } from "./recovery.js";
import { startup } from "./startup.js";
import { throughput } from "./throughput.js";
import { webhooks } from "./webhooks.js";
import { wireBudget } from "./wire-budget.js";

const all: Benchmark[] = [throughput, latency, acp, webhooks, fanout, recovery, wireBudget, startup, growth];

function parseArgs(argv: string[]): BenchOptions & { only: string[] | null } {
  const quick = argv.includes("--quick");
  const at = (flag: string) => {
    const i = argv.indexOf(flag);
    return i >= 0 ? argv[i + 1] : undefined;
  };
  const runs = Number(at("--runs") ?? process.env.BENCH_RUNS ?? (quick ? 1 : 3));
  if (!Number.isInteger(runs) || runs < 1) throw new Error("--runs must be a positive integer");
  const only =
    at("--only")
      ?.split(",")
      .map((s) => s.trim()) ?? null;
  if (only) {
    for (const id of only) if (!all.some((b) => b.id === id)) throw new Error(`unknown benchmark ${id}`);
  }
  return { quick, runs, verbose: !argv.includes("--silent"), only };
}

interface Outcome {
  id: string;
  title: string;
  parameters: string;
  samples: Sample[];
  rows: Row[];
  error: string | null;
  seconds: number;
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const started = Date.now();
  const log = (line: string) => {
    if (args.verbose) process.stdout.write(`${line}\n`);
  };
  const databases = await BenchDatabases.open(log);
  const ctx: BenchContext = { options: args, databases, log };
  const stop = async () => {
    await databases.dropAll().catch(() => {});
    await removeBuilds().catch(() => {});
    process.exit(130);
  };
  process.once("SIGINT", () => void stop());
  process.once("SIGTERM", () => void stop());

  const env = await environment(databases.adminUrl);
  log(
    `mooring bench: ${args.quick ? "quick, " : ""}${args.runs} run(s) each; ${env.cpu}, load average ${env.loadAverage}; Postgres at ${databases.server}`,
  );
  const outcomes: Outcome[] = [];
  try {
    for (const bench of all.filter((b) => !args.only || args.only.includes(b.id))) {
      const t0 = Date.now();
      const outcome: Outcome = {
        id: bench.id,
        title: bench.title,
        parameters: bench.describe(ctx),
        samples: [],
        rows: [],
        error: null,
        seconds: 0,
      };
      log(`\n${bench.title}: ${outcome.parameters}`);
      try {
        for (let rep = 0; rep < args.runs; rep++) {
          log(` run ${rep + 1}/${args.runs}`);
          outcome.samples.push(await bench.run(ctx, rep));
        }
        outcome.rows = bench.rows(medians(outcome.samples), ctx);
      } catch (err) {
        outcome.error = err instanceof Error ? (err.stack ?? err.message) : String(err);
        log(` FAILED: ${outcome.error}`);
      }
      outcome.seconds = (Date.now() - t0) / 1000;
      outcomes.push(outcome);
    }
  } finally {
    await databases.dropAll();
    await removeBuilds();
  }

  const seconds = (Date.now() - started) / 1000;
  const command = `npm run bench${args.quick ? " -- --quick" : ""}${process.argv.includes("--runs") ? ` (--runs ${args.runs})` : ""}`;
  const loadAtEnd = Number(loadavg()[0].toFixed(2));
  const report = {
    loadAtEnd,
    command,
    quick: args.quick,
    runs: args.runs,
    seconds,
    date: new Date().toISOString(),
    environment: env,
    benchmarks: outcomes,
  };
  const markdown = toMarkdown(report);
  process.stdout.write(`\n${toText(outcomes)}\n`);
  // --only is partial whether quick or not: a run of some rows must not stand for a whole quick run.
  writeResults(report, markdown, args.only ? "partial" : args.quick ? "latest-quick" : "latest");
  const failed = outcomes.filter((o) => o.error);
  process.stdout.write(
    `\n${outcomes.length} benchmarks in ${seconds.toFixed(1)} s${failed.length ? `, ${failed.length} FAILED: ${failed.map((f) => f.id).join(", ")}` : ""}\n`,
  );
  process.exit(failed.length > 0 ? 1 : 0);
}

function medians(samples: Sample[]): Sample {
  const keys = new Set(samples.flatMap((s) => Object.keys(s)));
  const out: Sample = {};
  for (const key of keys) out[key] = median(samples.map((s) => s[key]));
  return out;
}

async function environment(adminUrl: string) {
  const sql = postgres(adminUrl, { max: 1, onnotice: () => {} });
  let pg = "unknown";
  try {
    const [row] = await sql<{ v: string }[]>`select current_setting('server_version') as v`;
    pg = row.v;
  } finally {
    await sql.end({ timeout: 1 });
  }
  let commit = "unknown";
  try {
    commit = execFileSync("git", ["rev-parse", "--short", "HEAD"], {
      cwd: repoRoot,
      encoding: "utf8",
    }).trim();
    const changed = execFileSync(
      "git",
      ["--no-optional-locks", "status", "--porcelain", "--untracked-files=no", "--", "src"],
      {
        cwd: repoRoot,
        encoding: "utf8",
      },
    ).trim();
    if (changed) commit += " with uncommitted changes in src/";
  } catch {
    // not a git checkout
  }
  const list = cpus();
  return {
    cpu: `${list.length} × ${list[0]?.model.trim() ?? "cpu"}`,
    memoryGiB: Math.round(totalmem() / 2 ** 30),
    node: process.version,
    postgres: pg,
    commit,
    /** 1-minute load average when the run started: other work on the machine skews every figure. */
    loadAverage: Number(loadavg()[0].toFixed(2)),
  };
}

const header = ["Benchmark", "Figure", "Value", "Reference", "Ref. value", "Ratio", "Target", "Met"];

function cells(row: Row): string[] {
  return [
    row.benchmark,
    row.figure,
    formatNumber(row.value, row.unit),
    row.reference?.label ?? "",
    row.reference ? formatNumber(row.reference.value, row.reference.unit) : "",
    row.ratio === null ? "" : `${formatNumber(row.ratio, "")}×`,
    row.target ?? "",
    row.met === null ? "" : row.met ? "yes" : "NO",
  ];
}

function toText(outcomes: Outcome[]): string {
  const rows = outcomes.flatMap((o) =>
    o.error ? [[o.title, "FAILED (see above)", "", "", "", "", "", ""]] : o.rows.map(cells),
  );
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const line = (r: string[]) =>
    r
      .map((c, i) => c.padEnd(widths[i]))
      .join("  ")
      .trimEnd();
  return [line(header), widths.map((w) => "-".repeat(w)).join("  "), ...rows.map(line)].join("\n");
}

function toMarkdown(report: {
  loadAtEnd: number;
  command: string;
  runs: number;
  seconds: number;
  date: string;
  environment: Awaited<ReturnType<typeof environment>>;
  benchmarks: Outcome[];
}): string {
  const env = report.environment;
  const out = [
    `# mooring benchmarks`,
    "",
    `\`${report.command}\` — ${report.date}, commit ${env.commit}, ${report.runs} run(s) per benchmark (medians), ${report.seconds.toFixed(0)} s.`,
    `Machine: ${env.cpu}, ${env.memoryGiB} GiB, Node ${env.node}, Postgres ${env.postgres}; load average ${env.loadAverage} at the start, ${report.loadAtEnd} at the end (other work on the machine skews absolute figures; ratios to references measured alongside are what to compare).`,
    "",
    `| ${header.join(" | ")} |`,
    `| ${header.map(() => "---").join(" | ")} |`,
  ];
  for (const o of report.benchmarks) {
    if (o.error) out.push(`| ${o.title} | FAILED | | | | | | |`);
    for (const row of o.rows) out.push(`| ${cells(row).join(" | ")} |`);
  }
  out.push("", "Parameters:", "");
  for (const o of report.benchmarks) {
    out.push(`- **${o.title}** (${o.seconds.toFixed(0)} s): ${o.parameters}`);
    for (const row of o.rows) if (row.note) out.push(`  - ${row.figure}: ${row.note}`);
    if (o.error) out.push(`  - FAILED: ${o.error.split("\n")[0]}`);
  }
  return `${out.join("\n")}\n`;
}

/**
 * latest (+ a dated copy, and the table in bench/README.md) for a full run, latest-quick for
 * --quick, partial for --only.
 */
function writeResults(report: object, markdown: string, base: "latest" | "latest-quick" | "partial") {
  const dir = join(repoRoot, "bench", "results");
  mkdirSync(dir, { recursive: true });
  const json = `${JSON.stringify(report, null, 2)}\n`;
  writeFileSync(join(dir, `${base}.json`), json);
  writeFileSync(join(dir, `${base}.md`), markdown);
  if (base === "latest") {
    updateReadme(markdown);
    const stamp = new Date().toISOString().slice(0, 16).replace(/[:T]/g, "-");
    writeFileSync(join(dir, `${stamp}.json`), json);
    writeFileSync(join(dir, `${stamp}.md`), markdown);
  }
}

void main().catch((err) => {
  process.stderr.write(`bench failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});

/** Replace the figures between the markers in bench/README.md with this run's header and table. */
function updateReadme(markdown: string) {
  const file = join(repoRoot, "bench", "README.md");
  let readme: string;
  try {
    readme = readFileSync(file, "utf8");
  } catch {
    return;
  }
  const start = "<!-- latest:start -->";
  const end = "<!-- latest:end -->";
  const i = readme.indexOf(start);
  const j = readme.indexOf(end);
  if (i < 0 || j < i) return;
  const lines = markdown.split("\n");
  const table = lines.filter((l) => l.startsWith("|")).join("\n");
  const header = lines.slice(2, 4).join("\n");
  writeFileSync(file, `${readme.slice(0, i + start.length)}\n${header}\n\n${table}\n${readme.slice(j)}`);
}
