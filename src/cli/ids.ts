/**
 * Session and task ids as a user types them: the full id, or the start of one (the console shows
 * the first 8 characters). A start is looked up among the newest `prefixScan` sessions or tasks;
 * it must match exactly one, else a usage error says what to pass instead.
 */
import type { MooringClient } from "../client/index.js";
import { UsageError } from "./exit-codes.js";

const fullId = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const idStart = /^[0-9a-f][0-9a-f-]{0,34}$/i;

/** How many of the newest sessions (or tasks) a short id is looked for among. */
export const prefixScan = 1000;

type Kind = "session" | "task";

export const resolveSessionId = (client: MooringClient, arg: string) =>
  resolveId("session", arg, client.sessions.list({ limit: 200 }));

export const resolveTaskId = (client: MooringClient, arg: string) =>
  resolveId("task", arg, client.tasks.list({ limit: 200 }));

async function resolveId(
  kind: Kind,
  arg: string,
  newestFirst: AsyncIterable<{ id: string }>,
): Promise<string> {
  // Not hex at all: the gateway's own answer (not found, or a bad id) says it best.
  if (fullId.test(arg) || !idStart.test(arg)) return arg;
  const start = arg.toLowerCase();
  const matches: string[] = [];
  let seen = 0;
  for await (const item of newestFirst) {
    if (item.id.toLowerCase().startsWith(start)) matches.push(item.id);
    if (matches.length > 1 || ++seen >= prefixScan) break;
  }
  const list = `mooring ${kind}s list`;
  if (matches.length === 1) return matches[0];
  if (matches.length === 0) {
    throw new UsageError(
      `no ${kind} id starts with ${JSON.stringify(arg)} (among the newest ${prefixScan}); pass the full id, as \`${list}\` shows it`,
    );
  }
  throw new UsageError(
    `${JSON.stringify(arg)} is the start of more than one ${kind} id (${matches.join(", ")}); pass more of it, or the full id`,
  );
}
