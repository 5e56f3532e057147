/**
 * docs/configuration.md cannot drift from src/config.ts: its table lists exactly the options
 * loadConfig reads, and every default it states is the default loadConfig uses (giving the
 * documented value explicitly yields the same configuration as giving nothing) and the one the
 * option list says. The option list and the computed fields are every field of `Config` and every
 * variable loadConfig reads.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { computedFields, loadConfig, options } from "../../src/config.js";

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

describe("the option list", () => {
  const entries = Object.entries(options);

  it("and the computed fields are every field of Config, each once", () => {
    const listed = Object.keys(options);
    const computed = Object.keys(computedFields);
    expect(listed.filter((field) => computed.includes(field))).toEqual([]);
    expect(Object.keys(loadConfig({})).sort()).toEqual([...listed, ...computed].sort());
  });

  it("and the computed fields' variables are every variable loadConfig reads, each once", () => {
    const names = [...entries.map(([, o]) => o.env), ...Object.values(computedFields).flat()];
    expect(new Set(names).size).toBe(names.length);
    expect(names.sort()).toEqual(optionsRead().sort());
  });

  /** A default as the table writes it: a list comma-separated, as its variable takes it. */
  const written = (value: unknown) => (Array.isArray(value) ? value.join(",") : String(value));

  it.each(entries.map(([field, o]) => [field, o.env, o.default] as const))(
    "%s: the table has a row for %s stating its default (%j)",
    (_field, env, value) => {
      const row = rows.find((r) => r.name === env);
      expect(row, `no row for ${env}`).toBeDefined();
      if (value === undefined || (Array.isArray(value) && value.length === 0)) {
        // No value: the table says so, or shows what the gateway takes instead (`<hostname>:<port>`).
        expect(row?.defaultCell).toMatch(/^unset$|^`[^`]*<[^`>]+>[^`]*`$/);
      } else {
        expect(row?.defaultCell).toBe(`\`${written(value)}\``);
      }
    },
  );

  it.each(entries.map(([field, o]) => [field, o.doc]))("%s has a doc", (_field, doc) => {
    expect(doc).toMatch(/\S.*\.$/);
  });
});
