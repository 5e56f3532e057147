/**
 * The whole value behind an event's preview (`GET /v1/sessions/:id/events/:seq/payload`), fetched
 * through the SDK's REST client, so the token travels in the Authorization header and never in a
 * URL (browser history, proxy logs), and shown in the page, never in a new tab.
 */
import { useEffect, useState } from "preact/hooks";
import type { MooringEvent } from "../src/client/index.js";
import { state } from "./store.js";

interface EventPayload {
  sessionId: string;
  seq: number;
  type: string;
  /** The stored payload (`{input}`, `{output}`), or the event's own data when nothing was cut. */
  payload: unknown;
}

export async function fetchPayload(event: MooringEvent): Promise<unknown> {
  const path = `/v1/sessions/${encodeURIComponent(event.sessionId)}/events/${event.seq}/payload`;
  return (await state.client.http.request<EventPayload>("GET", path)).body.payload;
}

export type Loaded<T> = { state: "loading" } | { state: "loaded"; value: T } | { state: "failed"; error: string };

/** `fetchPayload(event)` once when `wanted` (re-run for another event); its answer or error. */
export function usePayload(event: MooringEvent, wanted: boolean): Loaded<unknown> | null {
  const [loaded, setLoaded] = useState<Loaded<unknown> | null>(null);
  useEffect(() => {
    if (!wanted) return;
    let stale = false;
    setLoaded({ state: "loading" });
    fetchPayload(event).then(
      (value) => !stale && setLoaded({ state: "loaded", value }),
      (err) => !stale && setLoaded({ state: "failed", error: (err as Error).message }),
    );
    return () => {
      stale = true;
    };
  }, [event.sessionId, event.seq, wanted]);
  return wanted ? loaded : null;
}

/** A tool call's or result's whole value: a button that loads it into the page. */
export function PayloadButton({ event, label, pick }: { event: MooringEvent; label: string; pick: (payload: any) => unknown }) {
  const [open, setOpen] = useState(false);
  const loaded = usePayload(event, open);
  return (
    <div class="payload">
      <button type="button" onClick={() => setOpen(!open)} aria-expanded={open}>
        {open ? `Hide ${label.toLowerCase()}` : label}
      </button>
      {loaded?.state === "loading" && <p>Loading…</p>}
      {loaded?.state === "failed" && (
        <p role="alert" class="error">
          {loaded.error}
        </p>
      )}
      {loaded?.state === "loaded" && (
        <figure aria-label={label}>
          <pre>{wholeText(pick(loaded.value) ?? loaded.value)}</pre>
        </figure>
      )}
    </div>
  );
}

/** A value as text: a string as it is, anything else as indented JSON. */
export function wholeText(value: unknown): string {
  return typeof value === "string" ? value : (JSON.stringify(value, null, 2) ?? "");
}
