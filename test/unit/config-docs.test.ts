/**
 * docs/configuration.md cannot drift from src/config.ts: its table lists exactly the options
 * loadConfig reads, and every default it states is the default loadConfig uses (giving the
 * documented value explicitly yields the same configuration as giving nothing).
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config.js";

const repoRoot = join(import.meta.dirname, "..", "..");
const page = readFileSync(join(repoRoot, "docs/configuration.md"), "utf8");
const rows = [...page.matchAll(/^\| `([A-Z_0-9]+)` \| ([^|]+) \|/gm)].map((m) => ({
  name: m[1],
  defaultCell: m[2].trim(),
}));

/** Every variable loadConfig asks for, in the order it asks. */
function optionsRead(): string[] {
  const names: string[] = [];
  const recorder = new Proxy({} as NodeJS.ProcessEnv, {
    get: (_target, name) => {
      if (typeof name === "string" && !names.includes(name)) names.push(name);
      return undefined;
    },
  });
  loadConfig(recorder);
  return names;
}

describe("docs/configuration.md", () => {
  it("documents every option loadConfig reads in its table, and no other", () => {
    const options = optionsRead().sort();
    expect(options.length).toBeGreaterThan(25);
    expect(rows.map((r) => r.name).sort()).toEqual(options);
  });

  // A cell holding one literal (`5`, `fail`, `./.mooring`) is the value itself; words ("unset") and
  // placeholders (`<hostname>:<port>`) describe a default instead and are read by people.
  const literal = rows.filter((r) => /^`[^`<>]+`$/.test(r.defaultCell));
  it.each(literal.map((r) => [r.name, r.defaultCell.slice(1, -1)]))(
    "states the default of %s as loadConfig uses it (%s)",
    (name, value) => {
      expect(loadConfig({ [name]: value })).toEqual(loadConfig({}));
    },
  );

  it("states a literal default for most options", () => {
    expect(literal.length).toBeGreaterThan(rows.length / 2);
  });
});
