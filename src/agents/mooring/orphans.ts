/**
 * Letting go of an upstream task whose downstream turn died with its gateway (kill -9): cancelled
 * at the next boot (domain/upstream-orphans.ts), so no upstream work is orphaned.
 */
import type { Logger } from "pino";
import { MooringApiError } from "../../client/errors.js";
import type { AgentEntry } from "../registry.js";
import { isUnreachable, upstreamClient } from "./link.js";

const CANCEL_TIMEOUT_MS = 10_000;

/** True once the upstream task is cancelled (or gone, or the upstream refuses us for good); false to retry. */
export async function cancelUpstreamTask(
  entry: AgentEntry,
  upstreamTaskId: string,
  log: Logger,
): Promise<boolean> {
  if (!entry.upstream) return true;
  const client = upstreamClient(entry.upstream);
  try {
    const answer = await client.http.once<{ status: string }>("POST", `/v1/tasks/${upstreamTaskId}/cancel`, {
      timeoutMs: CANCEL_TIMEOUT_MS,
    });
    log.info({ upstreamTaskId, status: answer.body.status }, "orphaned upstream turn cancelled");
    return true;
  } catch (err) {
    if (isUnreachable(err)) return false;
    const code = err instanceof MooringApiError ? err.code : String(err);
    log.warn({ upstreamTaskId, code }, "orphaned upstream turn could not be cancelled; giving up");
    return true;
  }
}
