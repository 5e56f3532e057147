/**
 * `mooring acp`: an ACP agent on stdin/stdout (docs/acp-server.md) that an editor spawns, relaying
 * to a gateway through the client SDK, so it inherits the SDK's recovery: a gateway restart or a
 * network flap is a notice in the editor, not a lost answer. Only ACP goes to stdout; diagnostics
 * go to stderr (never the token: every message passes `redact`).
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { Readable, Writable } from "node:stream";
import { ndJsonStream } from "@agentclientprotocol/sdk";
import { mooringAcpAgent } from "../acp-server/agent.js";
import { packageRoot } from "../package-root.js";
import { type ConnectionOptions, connect } from "./connection.js";
import { ExitCode, UsageError } from "./exit-codes.js";

export interface AcpCommandOptions extends ConnectionOptions {
  agent?: string;
  agentConfig?: string;
}

function parseAgentConfig(text: string | undefined): Record<string, unknown> | undefined {
  if (text === undefined) return undefined;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new UsageError("--agent-config must be a JSON object");
  }
  if (!value || typeof value !== "object" || Array.isArray(value)) throw new UsageError("--agent-config must be a JSON object");
  return value as Record<string, unknown>;
}

const version = (): string => {
  try {
    return String(JSON.parse(readFileSync(join(packageRoot, "package.json"), "utf8")).version);
  } catch {
    return "0.0.0";
  }
};

export async function acpCommand(options: AcpCommandOptions, env: NodeJS.ProcessEnv = process.env): Promise<void> {
  let conn: ReturnType<typeof connect>;
  let defaultAgentConfig: Record<string, unknown> | undefined;
  try {
    conn = connect(options, env);
    defaultAgentConfig = parseAgentConfig(options.agentConfig);
  } catch (err) {
    process.stderr.write(`mooring acp: ${(err as Error).message}\n`);
    process.exit(ExitCode.usage);
  }
  const app = mooringAcpAgent({
    mooring: conn.client,
    defaultAgent: options.agent || env.MOORING_ACP_AGENT || env.MOORING_AGENT || "claude-code",
    defaultAgentConfig,
    version: version(),
    warn: (message, fields) =>
      process.stderr.write(conn.redact(`mooring acp: ${message}${fields ? ` ${JSON.stringify(fields)}` : ""}\n`)),
  });
  const connection = app.connect(
    ndJsonStream(
      Writable.toWeb(process.stdout) as WritableStream<Uint8Array>,
      Readable.toWeb(process.stdin) as ReadableStream<Uint8Array>,
    ),
  );
  // stdin closing is the editor's "we are done": the turns go on on the gateway.
  await connection.closed;
  process.exit(0);
}
