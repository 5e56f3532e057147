/**
 * A strict reader of the Prometheus text exposition format (0.0.4) for tests: every line must be
 * a HELP, a TYPE or a sample of a declared family, labels well quoted, values numbers, and each
 * histogram's buckets cumulative with the +Inf bucket equal to its count. Throws on anything else.
 */
export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

export interface Exposition {
  types: Map<string, string>;
  help: Map<string, string>;
  samples: Sample[];
  /** The value of one sample (labels must match exactly), or undefined. */
  value(name: string, labels?: Record<string, string>): number | undefined;
}

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const TYPES = new Set(["counter", "gauge", "histogram", "summary", "untyped"]);

export function parseExposition(text: string): Exposition {
  const types = new Map<string, string>();
  const help = new Map<string, string>();
  const samples: Sample[] = [];
  if (!text.endsWith("\n")) throw new Error("exposition must end with a newline");
  for (const [i, line] of text.slice(0, -1).split("\n").entries()) {
    const where = `line ${i + 1}: ${line}`;
    if (line === "") continue;
    if (line.startsWith("#")) {
      const m = line.match(/^# (HELP|TYPE) (\S+) (.*)$/);
      if (!m) {
        if (/^# (HELP|TYPE)/.test(line)) throw new Error(`malformed ${where}`);
        continue; // a plain comment
      }
      const [, kind, name, rest] = m;
      if (!NAME.test(name)) throw new Error(`bad metric name, ${where}`);
      if (kind === "TYPE") {
        if (!TYPES.has(rest)) throw new Error(`unknown type, ${where}`);
        if (types.has(name)) throw new Error(`TYPE twice, ${where}`);
        types.set(name, rest);
      } else {
        if (help.has(name)) throw new Error(`HELP twice, ${where}`);
        help.set(name, rest);
      }
      continue;
    }
    samples.push(parseSample(line, where, types));
  }
  checkHistograms(types, samples);
  const value = (name: string, labels: Record<string, string> = {}) =>
    samples.find(
      (s) =>
        s.name === name &&
        Object.keys(s.labels).length === Object.keys(labels).length &&
        Object.entries(labels).every(([k, v]) => s.labels[k] === v),
    )?.value;
  return { types, help, samples, value };
}

function parseSample(line: string, where: string, types: Map<string, string>): Sample {
  const m = line.match(/^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)( -?\d+)?$/);
  if (!m) throw new Error(`malformed sample, ${where}`);
  const [, name, , body, raw] = m;
  const family = familyOf(name, types);
  if (!family) throw new Error(`sample of an undeclared family, ${where}`);
  const labels: Record<string, string> = {};
  let rest = body ?? "";
  while (rest !== "") {
    const l = rest.match(/^([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\["\\n])*)"(,|$)/);
    if (!l) throw new Error(`malformed labels, ${where}`);
    if (l[1] in labels) throw new Error(`label twice, ${where}`);
    labels[l[1]] = l[2].replace(/\\(["\\n])/g, (_, c) => (c === "n" ? "\n" : c));
    rest = rest.slice(l[0].length);
  }
  // Prometheus parses values with Go's ParseFloat, which takes NaN and Inf in any case (prom-client
  // writes `Nan`, e.g. for an event-loop lag with no sample yet).
  const special = raw.toLowerCase();
  const isNaNText = special === "nan";
  const value =
    special === "+inf" || special === "inf"
      ? Infinity
      : special === "-inf"
        ? -Infinity
        : isNaNText
          ? NaN
          : Number(raw);
  if (Number.isNaN(value) && !isNaNText) throw new Error(`bad value, ${where}`);
  return { name, labels, value };
}

function familyOf(name: string, types: Map<string, string>): string | null {
  if (types.has(name)) return name;
  for (const suffix of ["_bucket", "_sum", "_count"]) {
    const base = name.endsWith(suffix) ? name.slice(0, -suffix.length) : null;
    if (base && (types.get(base) === "histogram" || (types.get(base) === "summary" && suffix !== "_bucket")))
      return base;
  }
  return null;
}

function checkHistograms(types: Map<string, string>, samples: Sample[]): void {
  for (const [name, type] of types) {
    if (type !== "histogram") continue;
    const buckets = samples.filter((s) => s.name === `${name}_bucket`);
    const key = (s: Sample) =>
      JSON.stringify(
        Object.entries(s.labels)
          .filter(([k]) => k !== "le")
          .sort(),
      );
    for (const series of new Set(buckets.map(key))) {
      const mine = buckets.filter((b) => key(b) === series);
      const les = mine.map((b) => (b.labels.le === "+Inf" ? Infinity : Number(b.labels.le)));
      if (les.at(-1) !== Infinity) throw new Error(`${name}: no +Inf bucket`);
      for (let i = 1; i < mine.length; i++) {
        if (!(les[i] > les[i - 1]) || mine[i].value < mine[i - 1].value)
          throw new Error(`${name}: buckets not cumulative`);
      }
      const count = samples.find((s) => s.name === `${name}_count` && key(s) === series);
      if (!count || count.value !== mine.at(-1)!.value)
        throw new Error(`${name}: +Inf bucket differs from _count`);
    }
  }
}
