/**
 * The `mooring` process itself: `npx mooring` works from the clone (the package's bin),
 * it exits within 100 ms of the terminal event, and `mooring serve` starts the gateway as
 * `npm start` does.
 */
import { spawn } from "node:child_process";
import { once } from "node:events";
import { describe, expect, it } from "vitest";
import { runCli, spawnCli } from "../support/cli.js";
import { cliFixture } from "../support/cli-fixture.js";
import { repoRoot, testEnv } from "../support/gateway.js";

const t = cliFixture();

describe("the mooring process", () => {
  it("npx mooring runs the package's bin from the clone", async () => {
    const npx = spawn("npx", ["--offline", "mooring", "--help"], {
      cwd: repoRoot,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    npx.stdout.setEncoding("utf8").on("data", (c) => {
      out += c;
    });
    const [code] = await once(npx, "close");
    expect(code).toBe(0);
    for (const command of ["run", "attach", "sessions", "tasks", "gate", "serve"])
      expect(out).toContain(command);
  });

  it("exits within 100 ms of the terminal event", async () => {
    // Best of three: the point is that nothing holds the process open (a keep-alive socket, a
    // timer, a loader thread would fail every run), not the scheduling noise of a loaded machine.
    const delays: number[] = [];
    for (let i = 0; i < 3; i++) {
      const cli = spawnCli(
        ["run", "--workspace", t.workspace, "--agent", "simulated", "--json", "[deltas 3]"],
        {
          env: { XDG_STATE_HOME: t.stateHome, MOORING_URL: t.url },
        },
      );
      let terminalAt = 0;
      cli.child.stdout!.on("data", () => {
        if (!terminalAt && cli.stdout().includes('"type":"task.completed"')) terminalAt = performance.now();
      });
      await once(cli.child, "exit");
      expect(cli.child.exitCode).toBe(0);
      expect(terminalAt).toBeGreaterThan(0);
      delays.push(performance.now() - terminalAt);
    }
    expect(Math.min(...delays), delays.join(", ")).toBeLessThan(100);
  });

  it("mooring serve starts the gateway from the environment, as npm start does", async () => {
    const serve = spawnCli(["serve"], {
      env: { ...testEnv(t.databaseUrl), LOG_LEVEL: "info", MOORING_LOG_FORMAT: "json" },
    });
    await serve.waitFor(/"url":"http:\/\/[^"]+"/);
    const url = serve.stdout().match(/"url":"(http:\/\/[^"]+)"/)![1];
    const gate = await runCli(["gate", "--json", "--url", url], {});
    expect(gate.code).toBe(0);
    expect(JSON.parse(gate.stdout)).toHaveProperty("maxActive");
    serve.child.kill("SIGTERM");
    expect(await serve.exited).toBe(0);
  });
});
