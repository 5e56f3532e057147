/**
 * The task status sets (contract/task-status.ts) as the SQL asks about them.
 *
 * A set goes into a statement as SQL text, never as a bind parameter: `taskWithStatusSets(q)` splices it
 * into the template, so the statement Postgres gets is the one written out by hand, and the
 * planner still matches the partial indexes whose predicates name these statuses
 * (`tasks_active_idx`, `tasks_lease_idx` on `status in ('running', 'cancelling')`,
 * `tasks_upstream_orphans_idx` on the terminal ones; migrations/0000, 0005). As a parameter
 * (`= any($1)`) it could not once a prepared statement gets its generic plan (which cannot prove
 * the index predicate), and the claim's and the gate's counts would scan the table. Spliced text
 * is a constant of this module, never a value, so nothing from a client can reach it.
 * db/schema.ts declares the partial indexes with the same sets.
 */
import {
  activeStatuses,
  cancellableStatuses,
  type TaskStatus,
  terminalStatuses,
  unfinishedStatuses,
} from "../contract/task-status.js";
import type { Queryable } from "../db/client.js";

/** A set as SQL text, `('running', 'cancelling')`, for `taskWithStatusSets`. */
export class StatusSet {
  readonly text: string;
  constructor(statuses: readonly TaskStatus[]) {
    this.text = `(${statuses.map((s) => `'${s}'`).join(", ")})`;
  }
}

export const ACTIVE = new StatusSet(activeStatuses);
export const TERMINAL = new StatusSet(terminalStatuses);
export const UNFINISHED = new StatusSet(unfinishedStatuses);
export const CANCELLABLE = new StatusSet(cancellableStatuses);

/**
 * `q` whose tagged templates take `StatusSet`s as SQL text (`status in ${ACTIVE}`); every other
 * value stays a bind parameter. Works on the pool, a transaction and a pipelined transaction alike
 * (db/pipeline.ts does not support nested query fragments, which `q.unsafe` would be).
 */
export function taskWithStatusSets<Q extends Queryable>(q: Q): Q {
  return new Proxy(q, {
    apply: (target, self, [strings, ...values]: [TemplateStringsArray, ...unknown[]]) =>
      Reflect.apply(target, self, splice(strings, values)),
  });
}

/**
 * One template per spliced text: postgres.js keys per-statement caches on the template object, so
 * a new one per call would grow them. Bounded by the number of statements that use a set.
 */
const spliced = new Map<string, TemplateStringsArray>();

function splice(strings: TemplateStringsArray, values: unknown[]): [TemplateStringsArray, ...unknown[]] {
  if (!values.some((v) => v instanceof StatusSet)) return [strings, ...values];
  const parts = [strings[0]];
  const parameters: unknown[] = [];
  values.forEach((value, i) => {
    if (value instanceof StatusSet) parts[parts.length - 1] += value.text + strings[i + 1];
    else {
      parameters.push(value);
      parts.push(strings[i + 1]);
    }
  });
  const key = parts.join("\u0000");
  let template = spliced.get(key);
  if (!template) {
    template = Object.freeze(Object.assign([...parts], { raw: Object.freeze([...parts]) }));
    spliced.set(key, template);
  }
  return [template, ...parameters];
}
