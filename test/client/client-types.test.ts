/**
 * The client's public types, checked by the type checker (`npm run typecheck`
 * compiles this file; vitest's expectTypeOf fails it when a type drifts) and run as a test.
 */
import { describe, expectTypeOf, it } from "vitest";
import type { EventData, MooringEvent, RawEvent, RunItem, Task, TaskStatus } from "../../src/client/index.js";
import { isResyncItem } from "../../src/client/index.js";

describe("MooringEvent is discriminated by its type", () => {
  it("narrows data on type, for every event type", () => {
    const use = (event: MooringEvent) => {
      if (event.type === "message.delta") expectTypeOf(event.data).toEqualTypeOf<{ text: string }>();
      if (event.type === "tool.result") expectTypeOf(event.data.bytes).toEqualTypeOf<number>();
      if (event.type === "usage") expectTypeOf(event.data.contextPercent).toEqualTypeOf<number>();
      if (event.type === "task.completed") {
        expectTypeOf(event.data.status).toEqualTypeOf<TaskStatus>();
        expectTypeOf(event.data.result).toEqualTypeOf<Task["result"]>();
      }
      if (event.type === "session.reset")
        expectTypeOf(event.data.reason).toEqualTypeOf<"unsaved" | "resume_failed" | "fork" | "rollback">();
      // @ts-expect-error: without narrowing, data is one of the shapes, not any of them.
      event.data.text;
    };
    expectTypeOf(use).parameter(0).toEqualTypeOf<MooringEvent>();
    expectTypeOf<MooringEvent["type"]>().toEqualTypeOf<keyof EventData>();
  });

  it("keeps the wire shape apart, and a run's items tell a resync from an event", () => {
    expectTypeOf<RawEvent["data"]>().toBeUnknown();
    const take = (item: RunItem) => {
      if (isResyncItem(item)) expectTypeOf(item.fromSeq).toEqualTypeOf<number>();
      else expectTypeOf(item).toEqualTypeOf<MooringEvent>();
    };
    expectTypeOf(take).returns.toBeVoid();
  });
});
