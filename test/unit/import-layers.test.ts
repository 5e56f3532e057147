/**
 * The layers of src/ (docs/architecture.md, Layers): no import cycle anywhere (type imports
 * included: a cycle through types still ties the modules together); no import from a layer to one
 * above it; and the client SDK takes nothing of the server but the wire contract, as types.
 */
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { expect, it } from "vitest";
import { repoRoot } from "../support/gateway.js";

const src = join(repoRoot, "src");

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return entry.name.endsWith(".ts") ? [path] : [];
  });
}

/** Relative imports of a module (static `import`/`export ... from` and dynamic `import()`), as files. */
function importsOf(file: string): string[] {
  const text = readFileSync(file, "utf8");
  const found = new Set<string>();
  for (const match of text.matchAll(/(?:\bfrom\s+|\bimport\s*\(?\s*)["'](\.{1,2}\/[^"']+)["']/g)) {
    found.add(resolve(dirname(file), match[1]).replace(/\.js$/, ".ts"));
  }
  return [...found];
}

const graph = new Map(sourceFiles(src).map((file) => [file, importsOf(file)]));
const name = (file: string) => relative(src, file);

it("has no import cycle in src/", () => {
  const cycles: string[] = [];
  const state = new Map<string, "visiting" | "done">();
  const stack: string[] = [];
  const visit = (file: string) => {
    if (state.get(file) === "done") return;
    if (state.get(file) === "visiting") {
      cycles.push([...stack.slice(stack.indexOf(file)), file].map(name).join(" → "));
      return;
    }
    state.set(file, "visiting");
    stack.push(file);
    for (const next of graph.get(file) ?? []) if (graph.has(next)) visit(next);
    stack.pop();
    state.set(file, "done");
  };
  for (const file of graph.keys()) visit(file);
  expect(cycles).toEqual([]);
});

/**
 * The layers, bottom first: a module imports from its own layer or those below. A module is in the
 * layer of the first pattern its path (from src/) matches; docs/architecture.md draws the same list.
 */
const layers: [string, RegExp[]][] = [
  ["base", [/^errors\.ts$/, /^clock\.ts$/, /^lib\//, /^package-root\.ts$/, /^log-errors\.ts$/]],
  ["contract", [/^contract\//]],
  // The SDK is a client of the wire contract (types only, checked below); cli/ and acp-server/ sit on it.
  ["client", [/^client\//]],
  // Options and their parsers: every layer above reads the config.
  [
    "config",
    [/^log\.ts$/, /^config\.ts$/, /^tenants-config\.ts$/, /^webhooks\/endpoints-config\.ts$/, /^tracing\//],
  ],
  ["db", [/^db\//]],
  ["sql", [/^sql\//]],
  // git plumbing of workspace checkpoints: the fixed environment, snapshots, diffs, restores.
  ["checkpoints", [/^checkpoints\//]],
  ["agents", [/^agents\//]],
  ["stream", [/^stream\//]],
  // The domain and the services beside it (the metrics it reports to, the webhook outbox).
  ["domain", [/^domain\//, /^metrics\//, /^webhooks\//]],
  ["transport", [/^transport\//, /^acp-server\//]],
  ["composition", [/^gateway\.ts$/, /^gateway\//, /^startup-messages\.ts$/, /^main\.ts$/, /^cli\//]],
];

function layerOf(file: string): number {
  const path = name(file);
  const index = layers.findIndex(([, patterns]) => patterns.some((p) => p.test(path)));
  if (index < 0) throw new Error(`${path} is in no layer: add it to the list (and to docs/architecture.md)`);
  return index;
}

it("places every module of src/ in a layer", () => {
  const unplaced = [...graph.keys()].filter((file) => {
    try {
      layerOf(file);
      return false;
    } catch {
      return true;
    }
  });
  expect(unplaced.map(name)).toEqual([]);
});

it("has no import from a layer to one above it", () => {
  const upward: string[] = [];
  for (const [file, imports] of graph) {
    for (const target of imports) {
      if (!graph.has(target)) continue;
      const from = layerOf(file);
      const to = layerOf(target);
      if (to > from) upward.push(`${name(file)} (${layers[from][0]}) → ${name(target)} (${layers[to][0]})`);
    }
  }
  expect(upward).toEqual([]);
});

/** Imports of a module with whether each is type-only (`import type`, `export type ... from`). */
function importStatementsOf(file: string): { target: string; typeOnly: boolean }[] {
  const text = readFileSync(file, "utf8");
  const found: { target: string; typeOnly: boolean }[] = [];
  for (const match of text.matchAll(
    /\b(import|export)(\s+type)?\b[^;]*?\bfrom\s+["'](\.{1,2}\/[^"']+)["']/g,
  )) {
    found.push({
      target: resolve(dirname(file), match[3]).replace(/\.js$/, ".ts"),
      typeOnly: match[2] !== undefined,
    });
  }
  for (const match of text.matchAll(/\bimport\s*\(\s*["'](\.{1,2}\/[^"']+)["']/g)) {
    found.push({ target: resolve(dirname(file), match[1]).replace(/\.js$/, ".ts"), typeOnly: false });
  }
  return found;
}

it("lets client/ import only contract/ from the server side, and only its types", () => {
  const wrong: string[] = [];
  for (const file of graph.keys()) {
    if (!name(file).startsWith("client/")) continue;
    for (const { target, typeOnly } of importStatementsOf(file)) {
      const to = name(target);
      if (to.startsWith("client/")) continue;
      if (!to.startsWith("contract/")) wrong.push(`${name(file)} → ${to}`);
      else if (!typeOnly)
        wrong.push(`${name(file)} → ${to} (not \`import type\`: the SDK would bundle server code)`);
    }
  }
  expect(wrong).toEqual([]);
  // The walk sees the SDK's imports of the contract (so the rule above is not vacuous).
  expect(
    importStatementsOf(join(src, "client", "types.ts")).some((i) => name(i.target).startsWith("contract/")),
  ).toBe(true);
});

it("keeps contract/ free of anything but the error codes and itself", () => {
  const wrong: string[] = [];
  for (const [file, imports] of graph) {
    if (!name(file).startsWith("contract/")) continue;
    for (const target of imports)
      if (!/^(contract\/|errors\.ts$)/.test(name(target))) wrong.push(`${name(file)} → ${name(target)}`);
  }
  expect(wrong).toEqual([]);
});

/**
 * One commit path: a state change is sent by the committer (domain/committer.ts), by one of its
 * strategies (pipelined, interactive, or the event log's flush it sends for the lanes), and only
 * the committer sends Postgres notifications (a change declares them in `Effects.notify`). Only
 * src/sql (which defines the senders and the statements), db/pipeline.ts (which defines
 * `pipelined`) and the committer call `pipelined(` or a `notify…(`.
 */
it("commits and notifies only through the committer", () => {
  const allowed = (path: string) =>
    path.startsWith("sql/") || path === "db/pipeline.ts" || path === "domain/committer.ts";
  const found: string[] = [];
  for (const file of graph.keys()) {
    const path = name(file);
    if (allowed(path)) continue;
    const text = readFileSync(file, "utf8");
    for (const match of text.matchAll(/\b(pipelined|notify[A-Z]\w*|pg_notify)\s*\(/g))
      found.push(`${path}: ${match[1]}(`);
  }
  expect(found).toEqual([]);
  // The scan sees the committer's own calls (so it is not vacuous).
  const committer = readFileSync(join(src, "domain", "committer.ts"), "utf8");
  expect(committer).toMatch(/\bnotifyInTransaction\(/);
  expect(committer).toMatch(/\bpipelined</);
});

/**
 * The state changes are built in one place (src/domain/changes/, its rule in index.ts): a service
 * hands the committer a builder's change (`commit(admitChange(...))`, `transaction((tx) =>
 * archiveSessionIn(tx, ...))`), never an inline one (`commit({ statements, ... })`,
 * `transaction(async (tx) => { ... })`). The turn's own writes (its settlement, its steered input)
 * stay beside the turn.
 */
it("builds the committer's changes in domain/changes", () => {
  const inline = /\.(commit|transaction)\s*(<[^>]*>)?\(\s*(async\b|\{)/;
  const beside = new Set(["domain/turn-settler.ts", "domain/turn-end.ts", "domain/turn-inputs.ts"]);
  const found: string[] = [];
  for (const file of graph.keys()) {
    const path = name(file);
    if (path.startsWith("domain/changes/") || path === "domain/committer.ts" || beside.has(path)) continue;
    for (const match of readFileSync(file, "utf8").matchAll(new RegExp(inline, "g")))
      found.push(`${path}: ${match[0]}`);
  }
  expect(found).toEqual([]);
  // The pattern finds an inline change (so the scan is not vacuous).
  expect("committer.transaction(async (tx) => {").toMatch(inline);
  expect("this.rt.committer.commit({").toMatch(inline);
});

/** `apply` (the effects of a commit) is the committer's own: nothing outside claims a commit happened. */
it("keeps the committer's apply private", () => {
  const committer = readFileSync(join(src, "domain", "committer.ts"), "utf8");
  expect(committer).toMatch(/\bprivate apply\(effects: Effects\)/);
  const found: string[] = [];
  for (const file of graph.keys()) {
    const text = readFileSync(file, "utf8");
    for (const match of text.matchAll(/\bcommitter\.apply\(/g)) found.push(`${name(file)}: ${match[0]}`);
  }
  expect(found).toEqual([]);
});

it("finds the imports it checks (the walk is not vacuous)", () => {
  expect(graph.size).toBeGreaterThan(100);
  expect(graph.get(join(src, "gateway", "compose.ts"))).toContain(join(src, "domain", "committer.ts"));
});
