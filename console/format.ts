/** How the views write times, durations and payload previews. */

/** "12 s", "3 min", "2 h" — a duration for people. */
export function duration(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${s % 60} s`;
  return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
}

/** "12 s ago" from an ISO time, or "—". */
export function ago(iso: string | null | undefined, now: number): string {
  if (!iso) return "—";
  return `${duration(now - Date.parse(iso))} ago`;
}

/** A short text for any JSON value: strings as they are, the rest as compact JSON. */
export function previewText(value: unknown, max = 400): string {
  const text = typeof value === "string" ? value : JSON.stringify(value);
  return text === undefined ? "" : text.length > max ? `${text.slice(0, max)}…` : text;
}

export function shortId(id: string): string {
  return id.slice(0, 8);
}

/** Turns are numbered from 1 everywhere in the console (the API's `turnIndex` counts from 0). */
export const turnNumber = (t: { turnIndex: number }): number => t.turnIndex + 1;

/** A span of work: tenths of a second below a minute ("0.4 s"), else as `duration`. */
export function elapsed(ms: number): string {
  return ms < 60_000 ? `${(Math.max(0, ms) / 1000).toFixed(1)} s` : duration(ms);
}

interface Timed {
  createdAt: string;
  startedAt: string | null;
  finishedAt: string | null;
}

/** How long a task waited for a slot, and ran ("—" before it started); counted to `now` while it still does. */
export function taskDurations(t: Timed, now: number): { queued: string; ran: string } {
  const end = t.finishedAt ? Date.parse(t.finishedAt) : now;
  const started = t.startedAt ? Date.parse(t.startedAt) : null;
  return {
    queued: elapsed((started ?? end) - Date.parse(t.createdAt)),
    ran: started === null ? "—" : elapsed(end - started),
  };
}
