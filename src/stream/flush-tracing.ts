/**
 * The event lanes' tracing (docs/operations.md, Tracing): a `mooring.flush` span per traced turn
 * with events or a settlement in a flush, and a `mooring.fanout` span around the committer's
 * fan-out of its events. With tracing off, the traced map is empty and nothing here runs.
 */
import type { StoredEvent } from "../sql/event-append.js";
import { noSpan, type Span, type Tracer, tracingOff } from "../tracing/tracer.js";
import type { PendingEvent } from "./event-types.js";
import type { SessionWork } from "./flush-plan.js";

export class FlushTracing {
  constructor(
    /** Running turns traced on this instance (EventLog.traceTurn); empty when tracing is off. */
    private readonly traced: ReadonlyMap<string, Span>,
    private readonly tracer: Tracer = tracingOff,
  ) {}

  get on(): boolean {
    return this.traced.size > 0;
  }

  /** One `mooring.flush` span per traced turn with events or a settlement in this flush. */
  flushSpans(batch: PendingEvent[], items: SessionWork[]): Span[] {
    const counts = new Map<string, { events: number; settles: boolean; writes: number }>();
    const count = (taskId: string | undefined) => {
      if (!taskId || !this.traced.has(taskId)) return null;
      const c = counts.get(taskId) ?? { events: 0, settles: false, writes: 0 };
      counts.set(taskId, c);
      return c;
    };
    for (const event of batch) {
      const c = count(event.fence?.taskId);
      if (c) c.events++;
    }
    for (const item of items) {
      const c = count(item.kind === "write" ? item.write.fence.taskId : item.request.fence.taskId);
      if (!c) continue;
      if (item.kind === "write") c.writes++;
      else c.settles = true;
    }
    const { tracer } = this;
    return [...counts].map(([taskId, c]) =>
      tracer.span("mooring.flush", this.traced.get(taskId) ?? noSpan, {
        "mooring.flush.events": c.events,
        "mooring.flush.batch_events": batch.length,
        "mooring.flush.session_writes": c.writes,
        "mooring.flush.settles": c.settles,
      }),
    );
  }

  /**
   * Around the committer's fan-out of a flush's events (the subscribers' feeds, waiting long polls):
   * one `mooring.fanout` span per traced turn whose events these are.
   */
  fanOut(events: StoredEvent[], apply: () => void): void {
    if (this.traced.size === 0) {
      apply();
      return;
    }
    const counts = new Map<string, number>();
    for (const event of events) {
      if (event.taskId && this.traced.has(event.taskId))
        counts.set(event.taskId, (counts.get(event.taskId) ?? 0) + 1);
    }
    const { tracer } = this;
    const spans = [...counts].map(([taskId, n]) =>
      tracer.span("mooring.fanout", this.traced.get(taskId) ?? noSpan, { "mooring.fanout.events": n }),
    );
    try {
      apply();
    } finally {
      for (const span of spans) span.end();
    }
  }
}
