/**
 * The one naming rule of src/sql (docs/architecture.md, sql/): a file is `<noun>-<what>.ts`, its
 * noun the table it works on (or the gate, or notify); every function or value it exports begins
 * with that noun; and test/sql has, in a file named for the same noun, a `describe` named for each
 * exported function. A new operation that breaks the rule, or lands without its direct test,
 * fails here with its name.
 */
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";

const SQL_DIR = join(import.meta.dirname, "../../src/sql");
const TEST_DIR = join(import.meta.dirname, "../sql");

/** What a file in src/sql may be about: the tables, the admission gate, and Postgres notifications. */
const NOUNS = [
  "checkpoint",
  "event",
  "gate",
  "instance",
  "notify",
  "permission",
  "session",
  "task",
  "transcript",
  "webhook",
];

const nounOf = (file: string): string => file.replace(/\.(test\.)?ts$/, "").split("-")[0];

const sqlFiles = readdirSync(SQL_DIR).filter((f) => f.endsWith(".ts"));

/** Exported functions and lower-case values declared in a file (types, classes and CONSTANTS are not operations). */
function exportedNames(source: string): { functions: string[]; values: string[] } {
  const functions = [...source.matchAll(/^export (?:async )?function (\w+)/gm)].map((m) => m[1]);
  const values = [...source.matchAll(/^export const ([a-z]\w*)/gm)].map((m) => m[1]);
  return { functions: [...new Set(functions)], values };
}

/** Every `describe` title of the test/sql files of one noun. */
function describeTitles(noun: string): string[] {
  return readdirSync(TEST_DIR)
    .filter((f) => f.endsWith(".test.ts") && nounOf(f) === noun)
    .flatMap((f) =>
      [...readFileSync(join(TEST_DIR, f), "utf8").matchAll(/describe\("([^"]+)"/g)].map((m) => m[1]),
    );
}

describe("src/sql naming", () => {
  it("names every file for a known noun", () => {
    expect(sqlFiles.filter((f) => !NOUNS.includes(nounOf(f)))).toEqual([]);
  });

  it("begins every exported function and value with its file's noun", () => {
    const misnamed = sqlFiles.flatMap((f) => {
      const { functions, values } = exportedNames(readFileSync(join(SQL_DIR, f), "utf8"));
      return [...functions, ...values]
        .filter((name) => !name.startsWith(nounOf(f)))
        .map((name) => `${f}: ${name}`);
    });
    expect(misnamed).toEqual([]);
  });

  it("has a describe for every exported function in test/sql/<noun>*.test.ts", () => {
    const untested = sqlFiles.flatMap((f) => {
      const titles = describeTitles(nounOf(f));
      const { functions } = exportedNames(readFileSync(join(SQL_DIR, f), "utf8"));
      return functions
        .filter((name) => !titles.some((t) => new RegExp(`\\b${name}\\b`).test(t)))
        .map((name) => `${f}: ${name}`);
    });
    expect(untested).toEqual([]);
  });

  it("names every test/sql file for a noun of src/sql", () => {
    const nouns = new Set(sqlFiles.map(nounOf));
    const stray = readdirSync(TEST_DIR).filter((f) => f.endsWith(".test.ts") && !nouns.has(nounOf(f)));
    expect(stray).toEqual([]);
  });
});
