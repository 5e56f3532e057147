/**
 * The context indicator, computed from what a driver reports (pure: drivers and the pipeline both use it).
 * The context indicator (docs/api.md, Restarts, resume and recovery): how full the model's context window was at the last
 * model call of a turn.
 */
import type { AgentUsage } from "./driver.js";

/** Models whose id carries this marker run with a 1,000,000-token window. */
const oneMillionMarker = "[1m]";

export function contextWindowFor(model: string | undefined, defaultWindow: number): number {
  return model?.includes(oneMillionMarker) ? 1_000_000 : defaultWindow;
}

/**
 * The window a usage report is measured against: the agent's own figure when it gave a sane one,
 * else 1,000,000 for a `[1m]` model, else the configured default.
 */
export function contextWindowOf(usage: AgentUsage, defaultWindow: number): number {
  const reported = usage.contextWindow;
  if (reported !== undefined && Number.isFinite(reported) && reported > 0) return reported;
  return contextWindowFor(usage.model, defaultWindow);
}

/**
 * Percentage of the window the last call's prompt filled. Output tokens are left out: they become
 * input only on the next call, which reports them itself.
 */
export function contextPercent(usage: AgentUsage, window: number): number {
  if (window <= 0) return 100;
  const used = usage.inputTokens + usage.cacheCreationInputTokens + usage.cacheReadInputTokens;
  return Math.min(100, Math.round((used / window) * 100));
}

/** The `[ctx: NN%]` line some clients want appended to the assistant's reply. */
export function withContextSuffix(text: string, percent: number): string {
  return `${text}\n[ctx: ${percent}%]`;
}
