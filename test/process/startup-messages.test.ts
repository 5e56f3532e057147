/**
 * What a newcomer sees when a start goes wrong, asserted from spawned gateway
 * processes: a taken port is one line naming the port, its holder and how to pick another (exit
 * 2, no stack); an initdb failure shows its cause whole; an unknown MOORING_* variable is warned
 * about with the nearest option. And the Node version the README states is the one package.json
 * declares, which every installed dependency accepts (so `npm ci` on it prints no engine warning).
 */
import { readFileSync } from "node:fs";
import { mkdir, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { createServer, type Server } from "node:net";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { repoRoot, spawnGateway } from "../support/gateway.js";
import { runGatewayToExit } from "../support/run-to-exit.js";
import { useProcessGateway } from "../support/use-gateway.js";

// A database for the starts that get that far, and a folder for data folders.
const suite = useProcessGateway({ workspace: true });

/** Lines that would be a stack trace or an uncaught exception's report. */
const noStack = (text: string) => {
  expect(text).not.toMatch(/^\s+at /m);
  expect(text).not.toContain("uncaught");
};

describe("a port in use", () => {
  let holder: Server;
  let port: number;
  beforeAll(async () => {
    holder = createServer();
    await new Promise<void>((resolve) => holder.listen(0, "127.0.0.1", resolve));
    port = (holder.address() as { port: number }).port;
  });
  afterAll(() => new Promise<void>((resolve) => holder.close(() => resolve())));

  it("is one line naming the port, who holds it and how to pick another; exit 2", async () => {
    const run = await runGatewayToExit({
      DATABASE_URL: suite.databaseUrl,
      HOST: "127.0.0.1",
      PORT: String(port),
    });
    expect(run.code).toBe(2);
    const lines = run.stderr.trim().split("\n");
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(
      new RegExp(
        `^mooring: port ${port} is already in use by pid ${process.pid} \\(.*node.*\\), so the gateway cannot listen on 127\\.0\\.0\\.1:${port}; stop that process or pick another with PORT=<port> \\(PORT=0 picks a free one\\)$`,
      ),
    );
    noStack(run.stdout + run.stderr);
  });
});

it("an initdb failure shows its cause, the folder's path whole", async () => {
  const dataDir = join(suite.workspace, "not-empty");
  await mkdir(join(dataDir, "pg"), { recursive: true });
  await writeFile(join(dataDir, "pg", "stray.txt"), "left here\n");
  const run = await runGatewayToExit({
    DATABASE_URL: "",
    MOORING_DATA_DIR: dataDir,
    MOORING_CLUSTER_TEMPLATE_DIR: "off",
    PORT: "0",
    LOG_LEVEL: "info",
  });
  expect(run.code).toBe(1);
  const pg = join(dataDir, "pg");
  expect(run.stderr).toContain(
    `mooring: startup failed: initdb failed in ${pg} (exit code 1): error: directory ${pg} exists but is not empty`,
  );
  expect(run.stderr).not.toContain("…");
  // The log keeps the cause too (the serializer's cuts leave an unquoted path alone).
  expect(run.stdout).toContain(`directory ${pg} exists but is not empty`);
  noStack(run.stderr);
});

it("an unknown MOORING_* variable is warned about, naming the nearest option", async () => {
  const gw = await spawnGateway({
    DATABASE_URL: suite.databaseUrl,
    HOST: "127.0.0.1",
    PORT: "0",
    MOORING_MAXACTIVE: "3",
    MOORING_FOO: "1",
    MOORING_URL: "http://127.0.0.1:1", // the CLI's: known, not warned about
  });
  try {
    await gw.waitReady();
    const warnings = gw
      .output()
      .split("\n")
      .filter((line) => line.startsWith("{"))
      .map((line) => JSON.parse(line))
      .filter((record) => record.variable !== undefined);
    expect(warnings.map((w) => [w.level, w.variable, w.closest, w.msg])).toEqual([
      [
        40,
        "MOORING_FOO",
        null,
        "MOORING_FOO is not a mooring option and is ignored; see docs/configuration.md",
      ],
      [
        40,
        "MOORING_MAXACTIVE",
        "MOORING_MAX_ACTIVE",
        "MOORING_MAXACTIVE is not a mooring option and is ignored; did you mean MOORING_MAX_ACTIVE?",
      ],
    ]);
  } finally {
    gw.kill("SIGTERM");
    await gw.exited;
  }
});

it("the README's Node requirement is package.json's engines, accepted by every installed dependency", () => {
  const pkg = JSON.parse(readFileSync(join(repoRoot, "package.json"), "utf8"));
  const readme = readFileSync(join(repoRoot, "README.md"), "utf8");
  const stated = /Requirements: Node\.js (\d+) \((\d+\.\d+) or newer\) or (\d+) /.exec(readme);
  expect(stated).not.toBeNull();
  const [, older, olderMinimum, newer] = stated!;
  expect(olderMinimum.startsWith(`${older}.`)).toBe(true);
  expect(pkg.engines.node).toBe(`^${olderMinimum}.0 || ^${newer}.0.0`);
  // semver comes with npm's own tooling in node_modules (a dependency of several packages).
  const semver = createRequire(import.meta.url)("semver") as typeof import("semver");
  // The lowest version of each tested line must satisfy every dependency.
  const minimums = pkg.engines.node
    .split("||")
    .map((range: string) => semver.minVersion(range.trim())!.version);
  expect(minimums).toEqual([`${olderMinimum}.0`, `${newer}.0.0`]);
  const refusing: string[] = [];
  const lock = JSON.parse(readFileSync(join(repoRoot, "node_modules", ".package-lock.json"), "utf8"));
  for (const [path, entry] of Object.entries<any>(lock.packages)) {
    const range = entry.engines?.node;
    if (typeof range !== "string" || !path) continue;
    for (const minimum of minimums)
      if (!semver.satisfies(minimum, range)) refusing.push(`${path} (${range}) on ${minimum}`);
  }
  expect(refusing).toEqual([]);
});
