/**
 * Asking every live boot of an instance to drain, one transaction: the row says so (read back by
 * that boot's heartbeat) and the notification goes after the commit, so the owner hears it or, if
 * it was lost, reads the row. Answers the boots asked.
 */
import type { Tx } from "../../db/client.js";
import { instanceRequestDrain } from "../../sql/instance.js";
import type { Effects } from "../committer.js";

export async function requestDrainIn(
  tx: Tx,
  instanceId: string,
  leaseMs: number,
): Promise<{ value: string[]; effects: Effects }> {
  const boots = await instanceRequestDrain(tx, instanceId, leaseMs);
  return { value: boots, effects: { notify: { drain: boots, when: "afterCommit" } } };
}
