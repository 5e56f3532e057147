/**
 * Where a V8 CPU profile (`node --cpu-prof`, e.g. BENCH_CPU_PROF with bench/statements-per-turn.ts)
 * spends its time: self time summed by owner (a package under node_modules, a folder of src/, node's
 * own internals, the garbage collector, idle) and by function. A profiling aid, not a benchmark:
 * `npx tsx bench/profile-summary.ts <file.cpuprofile> [top]`.
 */
import { readFileSync } from "node:fs";

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

const [file, topArg] = process.argv.slice(2);
if (!file) throw new Error("usage: profile-summary <file.cpuprofile> [top]");
const top = Number(topArg ?? 25);
const profile = JSON.parse(readFileSync(file, "utf8")) as Profile;
const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const selfMicros = new Map<number, number>();
for (const [i, id] of profile.samples.entries()) {
  selfMicros.set(id, (selfMicros.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0));
}

/** Who a frame belongs to: a package, a folder of the project, node itself, or a V8 pseudo-frame. */
function ownerOf(url: string, name: string): string {
  if (!url) return name.startsWith("(") ? name : "(native)";
  const pkg = url.match(/node_modules\/((?:@[^/]+\/)?[^/]+)/);
  if (pkg) return pkg[1];
  const src = url.match(/\/(src|bench)\/([^/]+)\//);
  if (src) return `${src[1]}/${src[2]}`;
  if (url.startsWith("node:")) return "node:internals";
  return url.split("/").slice(-2).join("/");
}

const owners = new Map<string, number>();
const functions = new Map<string, number>();
let total = 0;
for (const [id, micros] of selfMicros) {
  const { functionName, url, lineNumber } = byId.get(id)!.callFrame;
  total += micros;
  const owner = ownerOf(url, functionName);
  owners.set(owner, (owners.get(owner) ?? 0) + micros);
  const fn = `${functionName || "(anonymous)"} ${url.split("/").slice(-1)[0]}:${lineNumber + 1}`;
  functions.set(fn, (functions.get(fn) ?? 0) + micros);
}
const print = (title: string, table: Map<string, number>) => {
  console.log(`\n${title}`);
  for (const [name, micros] of [...table].sort((a, b) => b[1] - a[1]).slice(0, top)) {
    console.log(
      `${((100 * micros) / total).toFixed(1).padStart(5)}%  ${(micros / 1000).toFixed(0).padStart(6)} ms  ${name}`,
    );
  }
};
console.log(`${(total / 1e6).toFixed(2)} s sampled`);
print("self time by owner", owners);
print("self time by function", functions);
