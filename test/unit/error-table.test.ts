/**
 * The error table of the API contract (docs/api.md, Errors; the README points there) is kept in
 * step with the one registry, src/errors.ts: every code with its HTTP status and JSON-RPC code,
 * no row without a code behind it, no code without a row. A failure names the row that differs.
 * And the registry's constructors (`errors.taskNotFound(id)`) against its codes, both ways: every
 * code has one, every one builds a registered code with a message; nothing outside src/errors.ts
 * writes `new MooringError(` (its messages are written once, beside the codes).
 */
import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { describe, expect, it } from "vitest";
import { type ErrorCode, errorCodes, errors, MooringError } from "../../src/errors.js";
import { repoRoot } from "../support/gateway.js";

interface Row {
  code: string;
  http: number;
  rpc: number;
  line: number;
}

const apiDoc = readFileSync(join(repoRoot, "docs/api.md"), "utf8");

/** The body of the `## Errors` section, up to the next `## ` heading. */
function section(markdown: string, heading: string): { text: string; firstLine: number } {
  const lines = markdown.split("\n");
  const start = lines.findIndex((l) => l.trim() === `## ${heading}`);
  if (start < 0) throw new Error(`docs/api.md has no "## ${heading}" section`);
  const end = lines.findIndex((l, i) => i > start && l.startsWith("## "));
  return { text: lines.slice(start, end < 0 ? undefined : end).join("\n"), firstLine: start + 1 };
}

/** Rows of the table whose header is `| code | HTTP | JSON-RPC | when |`. */
function errorRows(): Row[] {
  const { text, firstLine } = section(apiDoc, "Errors");
  const lines = text.split("\n");
  const header = lines.findIndex((l) => /^\|\s*code\s*\|\s*HTTP\s*\|\s*JSON-RPC\s*\|/.test(l));
  if (header < 0) throw new Error("docs/api.md, Errors: no table with the columns code | HTTP | JSON-RPC");
  const rows: Row[] = [];
  for (let i = header + 2; i < lines.length && lines[i].startsWith("|"); i++) {
    const cells = lines[i].split("|").map((c) => c.trim());
    const code = /^`([A-Z_]+)`$/.exec(cells[1])?.[1];
    if (!code)
      throw new Error(`docs/api.md line ${firstLine + i}: the first cell is not a \`CODE\`: ${lines[i]}`);
    rows.push({ code, http: Number(cells[2]), rpc: Number(cells[3]), line: firstLine + i });
  }
  return rows;
}

describe("docs/api.md error table and src/errors.ts", () => {
  const rows = errorRows();

  it("has a row for every registered code, with its HTTP status and JSON-RPC code", () => {
    const differences: string[] = [];
    for (const [code, { http, rpc }] of Object.entries(errorCodes)) {
      const row = rows.find((r) => r.code === code);
      if (!row) {
        differences.push(`${code}: no row (errors.ts says HTTP ${http}, JSON-RPC ${rpc})`);
        continue;
      }
      if (row.http !== http || row.rpc !== rpc) {
        differences.push(
          `${code} (docs/api.md line ${row.line}): the table says HTTP ${row.http}, JSON-RPC ${row.rpc}; errors.ts says HTTP ${http}, JSON-RPC ${rpc}`,
        );
      }
    }
    expect(differences).toEqual([]);
  });

  it("has no row for a code errors.ts does not register, and no code twice", () => {
    const unknown = rows.filter((r) => !(r.code in errorCodes)).map((r) => `${r.code} (line ${r.line})`);
    expect(unknown).toEqual([]);
    const seen = new Set<string>();
    const twice = rows
      .filter((r) => seen.size === seen.add(r.code).size)
      .map((r) => `${r.code} (line ${r.line})`);
    expect(twice).toEqual([]);
  });

  it("lists the codes a terminal task may carry exactly as TaskErrorCode does", () => {
    // TaskErrorCode is a type: read its members from the source.
    const source = readFileSync(join(repoRoot, "src/errors.ts"), "utf8");
    const union = /export type TaskErrorCode =([^;]+);/.exec(source)?.[1];
    expect(union, "src/errors.ts declares TaskErrorCode").toBeTruthy();
    const declared = [...union!.matchAll(/"([A-Z_]+)"/g)].map((m) => m[1]).sort();
    const { text } = section(apiDoc, "Errors");
    const paragraph = text.slice(text.indexOf("Codes in a terminal task's `error`"));
    const sentence = paragraph.slice(
      0,
      paragraph.indexOf("\n\n") < 0 ? undefined : paragraph.indexOf("\n\n"),
    );
    expect(sentence, "docs/api.md, Errors: the paragraph on terminal task codes").toContain(
      "Codes in a terminal task's",
    );
    // Configuration options named in the paragraph (`MOORING_…`) are not codes.
    const documented = [...new Set([...sentence.matchAll(/`([A-Z][A-Z_]+)`/g)].map((m) => m[1]))]
      .filter((name) => !name.startsWith("MOORING_"))
      .sort();
    expect(documented).toEqual(declared);
  });
});

/** Arguments to call each constructor with (a constructor added without a line here fails to compile). */
const sampleArgs: { [K in keyof typeof errors]: Parameters<(typeof errors)[K]> } = {
  invalidRequest: ["prompt must not be empty", "prompt"],
  emptyBody: [],
  invalidJson: [],
  invalidUrl: ["param_too_long"],
  socketOnly: ["events.subscribe"],
  invalidWorkspace: ["workspace must be a non-empty absolute path"],
  unauthorized: [],
  workspaceNotAllowed: ["/etc"],
  originNotAllowed: ["https://elsewhere.example"],
  hostNotAllowed: ["evil.example"],
  noRoute: ["GET", "/v1/nope"],
  sessionBusyForRollback: ["00000000-0000-4000-8000-000000000001"],
  webhookDeliveryNotFound: ["d1"],
  instanceNotFound: ["i1"],
  adminOnly: ["only an admin may drain an instance", "instanceId"],
  methodNotAllowed: ["PUT", "/v1/gate", ["GET"]],
  sessionNotFound: ["s1"],
  taskNotFound: ["t1"],
  eventNotFound: ["s1", 3],
  permissionNotFound: ["p1", "t1"],
  sessionArchived: ["s1"],
  sessionBusy: ["s1"],
  taskNotRunning: ["t1", "queued"],
  steerNotSupported: ["acp-agent"],
  sessionPurgeBusy: ["s1", 10],
  resyncRequired: [3, 10, "session"],
  permissionResolved: ["p1", { by: "client" }],
  workspaceConflict: [["a.txt"]],
  checkpointNotFound: ["turn 3 of session s1"],
  sessionNotIdle: ["s1"],
  payloadTooLarge: [],
  unsupportedMediaType: ["application/json"],
  bodyEncoded: ["gzip"],
  unsupportedCharset: ["latin1", "application/json"],
  upgradeRequired: [],
  gatewayBusy: [],
  socketCallsInFlight: [64, 64],
  tenantBusy: [3],
  notReady: ["database"],
  internal: [],
};

describe("src/errors.ts: the codes and their constructors", () => {
  const built = Object.entries(sampleArgs).map(([name, args]) => {
    const make = errors[name as keyof typeof errors] as (...a: unknown[]) => unknown;
    return { name, error: make(...args) };
  });

  it("every constructor builds a MooringError of a registered code, with a message", () => {
    const wrong = built
      .filter(
        ({ error }) =>
          !(error instanceof MooringError) || !(error.code in errorCodes) || error.message.trim() === "",
      )
      .map(({ name }) => name);
    expect(wrong).toEqual([]);
  });

  it("every registered code has a constructor", () => {
    const made = new Set(built.map(({ error }) => (error as MooringError).code));
    const without = (Object.keys(errorCodes) as ErrorCode[]).filter((code) => !made.has(code));
    expect(without).toEqual([]);
  });

  it("nothing outside src/errors.ts writes `new MooringError(`", () => {
    const src = join(repoRoot, "src");
    const files = (dir: string): string[] =>
      readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
        e.isDirectory() ? files(join(dir, e.name)) : e.name.endsWith(".ts") ? [join(dir, e.name)] : [],
      );
    const all = files(src);
    const offenders = all
      .filter((file) => relative(src, file) !== "errors.ts")
      .filter((file) => /\bnew\s+MooringError\s*\(/.test(readFileSync(file, "utf8")))
      .map((file) => relative(src, file));
    expect(offenders).toEqual([]);
    // The scan reads the registry itself (so it is not vacuous).
    expect(/\bnew\s+MooringError\s*\(/.test(readFileSync(join(src, "errors.ts"), "utf8"))).toBe(true);
  });
});
