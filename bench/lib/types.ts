/** Shapes shared by the benchmark modules and the runner. */
import type { BenchDatabases } from "./db.js";

export interface BenchOptions {
  /** Small version of every benchmark (CI): seconds, not minutes. */
  quick: boolean;
  /** Repetitions per benchmark; the table shows the median of each figure. */
  runs: number;
  /** Print progress lines. */
  verbose: boolean;
}

export interface BenchContext {
  options: BenchOptions;
  databases: BenchDatabases;
  log(line: string): void;
}

/** One repetition's measurements: metric name → value. */
export type Sample = Record<string, number>;

export interface Row {
  benchmark: string;
  /** What is measured, e.g. "turns/s". */
  figure: string;
  value: number;
  unit: string;
  /** The reference measured in the same run (or a published figure). */
  reference: { label: string; value: number; unit: string } | null;
  /** value / reference.value. */
  ratio: number | null;
  /** e.g. "≥ 0.5× pgbench" or "≤ 20 ms"; null when the figure has no target. */
  target: string | null;
  met: boolean | null;
  /** Extra context printed under the table. */
  note?: string;
}

export interface Benchmark {
  id: string;
  title: string;
  /** One repetition. Everything it starts it stops before returning. */
  run(ctx: BenchContext, repetition: number): Promise<Sample>;
  /** Table rows from the per-metric medians over the repetitions. */
  rows(median: Sample, ctx: BenchContext): Row[];
  /** What the run measured (parameters), for the report. */
  describe(ctx: BenchContext): string;
}

export function ratio(value: number, reference: number): number | null {
  if (!Number.isFinite(value) || !Number.isFinite(reference) || reference === 0) return null;
  return value / reference;
}

/** A ratio target, "≤ N× reference", and whether `r` meets it (null: no ratio to judge). */
export function upTo(
  r: number | null,
  max: number,
  reference: string,
): { target: string; met: boolean | null } {
  return { target: `≤ ${max}× ${reference}`, met: r === null ? null : r <= max };
}

/** A ratio target, "≥ N× reference", and whether `r` meets it (null: no ratio to judge). */
export function atLeast(
  r: number | null,
  min: number,
  reference: string,
): { target: string; met: boolean | null } {
  return { target: `≥ ${min}× ${reference}`, met: r === null ? null : r >= min };
}
