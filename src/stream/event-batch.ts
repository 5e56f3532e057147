/**
 * Pure helpers of the event log's flush: how many pending events go in one transaction, and how
 * they are grouped into one append statement per session and writer.
 */
import type { NewEvent, OwnerFence } from "../sql/event-append.js";
import type { PendingEvent } from "./event-types.js";

/** Bounds on one transaction, so a burst of huge tool outputs never becomes one giant write. */
const MAX_EVENTS_PER_TX = 256;
const MAX_BYTES_PER_TX = 8 * 1024 * 1024;

/** Remove and return the oldest events that fit in one transaction (always at least one). */
export function takeBatch(pending: PendingEvent[]): PendingEvent[] {
  let bytes = 0;
  let n = 0;
  while (n < pending.length && n < MAX_EVENTS_PER_TX) {
    bytes += approximateBytes(pending[n]);
    if (n > 0 && bytes > MAX_BYTES_PER_TX) break;
    n++;
  }
  return pending.splice(0, n);
}

/** Tool output dominates an event's size; strings are measured, anything else counted small. */
function approximateBytes(event: PendingEvent): number {
  const payload = event.payload as { output?: unknown; input?: unknown } | undefined;
  const big = payload?.output ?? payload?.input;
  return 256 + (typeof big === "string" ? big.length : 0);
}

export interface Group {
  sessionId: string;
  fence?: OwnerFence;
  events: NewEvent[];
}

/**
 * Keep per-session order; merge runs of `message.delta` of the same task into one event, so a
 * chatty agent costs one row per flush instead of one per token.
 */
export function groupBySessionAndFence(batch: PendingEvent[]): Group[] {
  const groups = new Map<string, Group>();
  for (const event of batch) {
    const key = `${event.sessionId}|${event.fence ? `${event.fence.taskId}:${event.fence.attempt}` : ""}`;
    let group = groups.get(key);
    if (!group) {
      group = { sessionId: event.sessionId, fence: event.fence, events: [] };
      groups.set(key, group);
    }
    const last = group.events[group.events.length - 1];
    if (
      last &&
      last.type === "message.delta" &&
      event.type === "message.delta" &&
      last.taskId === event.taskId
    ) {
      const merged = (last.data as { text: string }).text + (event.data as { text: string }).text;
      group.events[group.events.length - 1] = { ...last, data: { text: merged } };
    } else {
      group.events.push({ taskId: event.taskId, type: event.type, data: event.data, payload: event.payload });
    }
  }
  return [...groups.values()];
}
