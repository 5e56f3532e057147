/**
 * Sums a V8 .heapsnapshot by constructor (node type + name, as DevTools' summary view), or the
 * difference between two: what the second holds more of. Self sizes only (no retained sizes).
 *
 *   npx tsx bench/heap-summary.ts after.heapsnapshot [before.heapsnapshot] [--top 40] [--per 1000]
 *
 * `--per N` divides the differences by N (e.g. the number of connections opened in between).
 */
import { readFileSync } from "node:fs";

interface Snapshot {
  snapshot: { meta: { node_fields: string[]; node_types: [string[], ...unknown[]] } };
  nodes: number[];
  strings: string[];
}

type Summary = Map<string, { count: number; size: number }>;

function summarize(path: string): Summary {
  const snap = JSON.parse(readFileSync(path, "utf8")) as Snapshot;
  const fields = snap.snapshot.meta.node_fields;
  const types = snap.snapshot.meta.node_types[0];
  const width = fields.length;
  const typeAt = fields.indexOf("type");
  const nameAt = fields.indexOf("name");
  const sizeAt = fields.indexOf("self_size");
  const out: Summary = new Map();
  for (let i = 0; i < snap.nodes.length; i += width) {
    const type = types[snap.nodes[i + typeAt]];
    let name = snap.strings[snap.nodes[i + nameAt]];
    // Strings and code are grouped by type, not by their text.
    if (["string", "concatenated string", "sliced string", "code", "number", "regexp"].includes(type))
      name = "";
    else if (name.length > 60) name = `${name.slice(0, 60)}…`;
    const key = `${type}:${name}`;
    const entry = out.get(key) ?? { count: 0, size: 0 };
    entry.count++;
    entry.size += snap.nodes[i + sizeAt];
    out.set(key, entry);
  }
  return out;
}

const args = process.argv.slice(2);
const option = (name: string, fallback: number) => {
  const i = args.indexOf(name);
  if (i < 0) return fallback;
  const value = Number(args[i + 1]);
  args.splice(i, 2);
  return value;
};
const top = option("--top", 40);
const per = option("--per", 1);
const [afterPath, beforePath] = args;
const after = summarize(afterPath);
const before = beforePath ? summarize(beforePath) : new Map();
const rows = [...new Set([...after.keys(), ...before.keys()])].map((key) => {
  const a = after.get(key) ?? { count: 0, size: 0 };
  const b = before.get(key) ?? { count: 0, size: 0 };
  return { key, count: a.count - b.count, size: a.size - b.size };
});
rows.sort((x, y) => Math.abs(y.size) - Math.abs(x.size));
const total = rows.reduce((s, r) => s + r.size, 0);
const fmt = (n: number) => (per === 1 ? String(n) : (n / per).toFixed(2));
console.log(
  `total self size${beforePath ? " difference" : ""}: ${fmt(total)} bytes${per === 1 ? "" : ` per ${per}`}`,
);
console.log("bytes\tcount\tconstructor");
for (const r of rows.slice(0, top)) console.log(`${fmt(r.size)}\t${fmt(r.count)}\t${r.key}`);
