/**
 * The layers of src/ (docs/architecture.md): no import cycle anywhere (type imports included: a
 * cycle through types still ties the modules together), and nothing below the domain reaches up
 * into it: agents/, sql/ and db/ import neither domain/ nor transport/.
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

it("keeps agents/, sql/ and db/ below the domain and the transports", () => {
  const upward: string[] = [];
  for (const [file, imports] of graph) {
    if (!/^(agents|sql|db)\//.test(name(file))) continue;
    for (const target of imports) {
      if (/^(domain|transport)\//.test(name(target))) upward.push(`${name(file)} → ${name(target)}`);
    }
  }
  expect(upward).toEqual([]);
});

it("finds the imports it checks (the walk is not vacuous)", () => {
  expect(graph.size).toBeGreaterThan(100);
  expect(graph.get(join(src, "gateway.ts"))).toContain(join(src, "domain", "committer.ts"));
});
