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
