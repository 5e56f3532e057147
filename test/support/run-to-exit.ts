/** Run the real entry point (`node --import tsx src/main.ts`) until it exits, e.g. to see it refuse a configuration. */
import { spawn } from "node:child_process";
import { once } from "node:events";
import { type GatewayCommand, gatewayCommands, repoRoot } from "./gateway.js";

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** Runs the gateway (`command`, gateway.ts) with `env` over the current environment; kills it if it is still running after `timeoutMs`. */
export async function runGatewayToExit(
  env: Record<string, string>,
  timeoutMs = 45_000,
  command: GatewayCommand = "tsx",
): Promise<Exit> {
  const child = spawn(process.execPath, [...gatewayCommands[command]], {
    cwd: repoRoot,
    env: { ...process.env, MOORING_LOG_FORMAT: "json", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (chunk: Buffer) => {
    stdout += chunk.toString();
  });
  child.stderr.on("data", (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
  const [code, signal] = (await once(child, "exit")) as [number | null, NodeJS.Signals | null];
  clearTimeout(timer);
  return { code, signal, stdout, stderr };
}
