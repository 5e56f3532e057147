/**
 * Text Postgres can store, from whatever an agent produced.
 *
 * Postgres text and jsonb cannot hold NUL (`\u0000` is refused in jsonb, 0x00 in text) nor
 * ill-formed UTF-16 (a lone surrogate, e.g. an emoji cut in half, makes the JSON invalid). Agents
 * produce both in ordinary work (`printf 'a\000b'`, `find -print0`, `cat` of a binary file, a
 * string sliced in the middle of a pair), and one such event used to be refused by every retry of
 * its flush, freezing the event lane. So everything a driver hands the pipeline (events, the
 * resume cursor, the outcome or failure of a turn) passes `storable` once, at the driver boundary
 * (`storableSink` and the worker's settlement): NUL becomes U+FFFD and lone surrogates become
 * U+FFFD (`String.prototype.toWellFormed`), deep through objects and arrays, keys included.
 *
 * Client input is not rewritten here: it is validated and refused (the transport's job).
 *
 * Fast path: `isWellFormed` and `includes` are native scans; a value that needs no repair is
 * returned as it is, without a copy.
 */
import type { ResumeCursor, TurnSink } from "./driver.js";

const REPLACEMENT = "\uFFFD";

/** ES2024 string methods (Node 20 has them; the project's TypeScript lib is older). */
interface WellFormedString {
  isWellFormed(): boolean;
  toWellFormed(): string;
}

/** Nesting beyond this is left as it is (JSON from an agent is never this deep in practice). */
const MAX_DEPTH = 512;

export function isStorableString(s: string): boolean {
  return (s as unknown as WellFormedString).isWellFormed() && !s.includes("\0");
}

export function storableString(s: string): string {
  if (isStorableString(s)) return s;
  const wellFormed = (s as unknown as WellFormedString).toWellFormed();
  return wellFormed.includes("\0") ? wellFormed.replaceAll("\0", REPLACEMENT) : wellFormed;
}

/** `value` with every string in it (values and keys) storable; the same value when nothing changed. */
export function storable<T>(value: T): T {
  return repair(value, 0) as T;
}

function repair(value: unknown, depth: number): unknown {
  if (typeof value === "string") return storableString(value);
  if (typeof value !== "object" || value === null || depth >= MAX_DEPTH) return value;
  if (Array.isArray(value)) {
    let copy: unknown[] | null = null;
    for (let i = 0; i < value.length; i++) {
      const item = value[i];
      const fixed = repair(item, depth + 1);
      if (fixed !== item) {
        copy ??= value.slice();
        copy[i] = fixed;
      }
    }
    return copy ?? value;
  }
  // Plain objects only (JSON from an agent, the pipeline's own shapes); Dates and the like pass.
  const proto = Object.getPrototypeOf(value);
  if (proto !== Object.prototype && proto !== null) return value;
  let copy: Record<string, unknown> | null = null;
  for (const key of Object.keys(value)) {
    const item = (value as Record<string, unknown>)[key];
    const fixed = repair(item, depth + 1);
    const fixedKey = storableString(key);
    if (fixed !== item || fixedKey !== key) {
      if (!copy) {
        copy = {};
        // Keep the keys before this one in order.
        for (const k of Object.keys(value)) {
          if (k === key) break;
          copy[k] = (value as Record<string, unknown>)[k];
        }
      }
    }
    if (copy) copy[fixedKey] = fixed;
  }
  return copy ?? value;
}

/** The sink a driver gets: what it emits or saves is made storable before the pipeline sees it. */
export function storableSink(sink: TurnSink): TurnSink {
  return {
    emit: (event) => sink.emit(storable(event)),
    saveCursor: (cursor: ResumeCursor) => sink.saveCursor(storable(cursor)),
    drained: sink.drained && (() => sink.drained!()),
    requestPermission: sink.requestPermission && ((ask) => sink.requestPermission!(storable(ask))),
  };
}
