import { describe, expect, it } from "vitest";
import type { AgentUsage } from "../../src/agents/driver.js";
import {
  contextPercent,
  contextWindowFor,
  contextWindowOf,
  withContextSuffix,
} from "../../src/domain/context.js";

const usage = (input: number, creation = 0, read = 0): AgentUsage => ({
  inputTokens: input,
  outputTokens: 999_999,
  cacheCreationInputTokens: creation,
  cacheReadInputTokens: read,
});

describe("context indicator", () => {
  it("counts input, cache creation and cache read tokens but not output", () => {
    expect(contextPercent(usage(50_000, 20_000, 30_000), 200_000)).toBe(50);
    expect(contextPercent(usage(1_234, 100, 50), 200_000)).toBe(1);
    expect(contextPercent(usage(0), 200_000)).toBe(0);
  });

  it("rounds to the nearest integer", () => {
    expect(contextPercent(usage(124_999), 200_000)).toBe(62);
    expect(contextPercent(usage(125_000), 200_000)).toBe(63);
  });

  it("caps at 100", () => {
    expect(contextPercent(usage(250_000, 10_000), 200_000)).toBe(100);
  });

  it("uses a 1,000,000-token window for [1m] models and the default otherwise", () => {
    expect(contextWindowFor("claude-sonnet-4-5[1m]", 200_000)).toBe(1_000_000);
    expect(contextWindowFor("claude-sonnet-4-5", 200_000)).toBe(200_000);
    expect(contextWindowFor(undefined, 150_000)).toBe(150_000);
    expect(contextPercent(usage(250_000), contextWindowFor("opus[1m]", 200_000))).toBe(25);
  });

  it("prefers the window the agent reported over the model id and the default", () => {
    expect(contextWindowOf({ ...usage(1), contextWindow: 128_000 }, 200_000)).toBe(128_000);
    expect(contextWindowOf({ ...usage(1), model: "opus[1m]", contextWindow: 500_000 }, 200_000)).toBe(
      500_000,
    );
    expect(contextWindowOf({ ...usage(1), model: "opus[1m]" }, 200_000)).toBe(1_000_000);
    expect(contextWindowOf({ ...usage(1), contextWindow: 0 }, 150_000)).toBe(150_000);
    expect(contextWindowOf(usage(1), 150_000)).toBe(150_000);
  });

  it("appends the suffix on its own line", () => {
    expect(withContextSuffix("Done.", 62)).toBe("Done.\n[ctx: 62%]");
  });
});
