/** Small hooks the views share: the console state, a value refreshed on an interval, the clock. */
import { useEffect, useState } from "preact/hooks";
import { type ConsoleState, state, subscribe } from "./store.js";

/** Re-render on every change of the console state. */
export function useConsole(): ConsoleState {
  const [, setTick] = useState(0);
  useEffect(() => subscribe(() => setTick((n) => n + 1)), []);
  return state;
}

/** `load()` now and every `everyMs`, its latest answer (or error); `deps` restart it. */
export function usePolled<T>(
  load: () => Promise<T>,
  everyMs: number,
  deps: unknown[],
): { value: T | null; error: string | null; reload: () => void } {
  const [value, setValue] = useState<T | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [nonce, setNonce] = useState(0);
  useEffect(() => {
    let stopped = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const run = async () => {
      try {
        const v = await load();
        if (stopped) return;
        setValue(v);
        setError(null);
      } catch (err) {
        if (!stopped) setError((err as Error).message);
      }
      if (!stopped) timer = setTimeout(run, everyMs);
    };
    void run();
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }, [...deps, nonce]);
  return { value, error, reload: () => setNonce((n) => n + 1) };
}

/** The current time, ticking every second (countdowns, ages). */
export function useNow(): number {
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    const timer = setInterval(() => setNow(Date.now()), 1000);
    return () => clearInterval(timer);
  }, []);
  return now;
}

/** The route: the part of the location hash after `#/`, split on `/`. */
export function useRoute(): string[] {
  const read = () => location.hash.replace(/^#\/?/, "").split("/").filter(Boolean).map(decodeURIComponent);
  const [route, setRoute] = useState(read);
  useEffect(() => {
    const onHash = () => setRoute(read());
    addEventListener("hashchange", onHash);
    return () => removeEventListener("hashchange", onHash);
  }, []);
  return route;
}
