/**
 * REST calls: bearer token, JSON both ways, errors as their classes, and the retry rules. Only an
 * idempotent request is ever sent twice (GETs, cancel, archive, and creates and submits, which
 * carry an idempotency key made once per call): after a lost answer (the connection died), after
 * 503 NOT_READY (a gateway still starting or briefly without its database) and after 429 (honouring
 * Retry-After), for at most `retryTimeoutMs` in all.
 */
import { backoffMs, type Clock, sleep } from "./clock.js";
import { AbortError, apiError, ConnectionError, MooringApiError } from "./errors.js";

export type FetchLike = (input: string, init?: RequestInit) => Promise<Response>;

export interface HttpConfig {
  url: string;
  token?: string;
  fetch: FetchLike;
  clock: Clock;
  /** How long transient failures are retried before the error is thrown. */
  retryTimeoutMs: number;
}

export interface RequestOptions {
  body?: unknown;
  query?: Record<string, string | number | boolean | undefined>;
  signal?: AbortSignal;
  accept?: string;
  /** Gives up on this one attempt after this long (a long-poll's wait plus a margin). */
  timeoutMs?: number;
  /** Extra request headers (a submit's `traceparent`). */
  headers?: Record<string, string>;
}

export interface HttpAnswer<T> {
  status: number;
  body: T;
  headers: Headers;
}

export class Http {
  constructor(readonly config: HttpConfig) {}

  async request<T>(method: string, path: string, options: RequestOptions = {}): Promise<HttpAnswer<T>> {
    const started = this.config.clock.now();
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.once<T>(method, path, options);
      } catch (err) {
        const wait = this.retryDelay(err, attempt);
        if (wait === null || this.config.clock.now() + wait - started > this.config.retryTimeoutMs) throw err;
        await sleep(this.config.clock, wait, options.signal);
      }
    }
  }

  /**
   * Milliseconds before the next attempt, or null when this error is not retried. Every request the
   * SDK sends through `request` is safe to send again (submits carry their idempotency key).
   */
  private retryDelay(err: unknown, attempt: number): number | null {
    if (err instanceof ConnectionError) return backoffMs(attempt, 200, 2000);
    if (err instanceof MooringApiError && (err.status === 503 || err.status === 429)) {
      return err.retryAfterMs ?? backoffMs(attempt, 200, 2000);
    }
    return null;
  }

  async once<T>(method: string, path: string, options: RequestOptions = {}): Promise<HttpAnswer<T>> {
    const headers: Record<string, string> = { ...options.headers, accept: options.accept ?? "application/json" };
    if (this.config.token) headers.authorization = `Bearer ${this.config.token}`;
    if (options.body !== undefined) headers["content-type"] = "application/json";
    const query = Object.entries(options.query ?? {}).filter(([, v]) => v !== undefined);
    const qs = query.length > 0 ? `?${query.map(([k, v]) => `${k}=${encodeURIComponent(String(v))}`).join("&")}` : "";
    const controller = new AbortController();
    const abort = () => controller.abort();
    options.signal?.addEventListener("abort", abort, { once: true });
    const timer = options.timeoutMs ? this.config.clock.setTimeout(abort, options.timeoutMs) : undefined;
    let res: Response;
    try {
      if (options.signal?.aborted) throw new AbortError();
      res = await this.config.fetch(this.config.url + path + qs, {
        method,
        headers,
        body: options.body === undefined ? undefined : JSON.stringify(options.body),
        signal: controller.signal,
      });
      const text = await res.text();
      const body = text === "" ? null : parseJson(text);
      if (res.status >= 400) throw errorOf(res, body);
      return { status: res.status, body: body as T, headers: res.headers };
    } catch (err) {
      if (options.signal?.aborted) throw new AbortError();
      if (err instanceof MooringApiError) throw err;
      throw new ConnectionError(`${method} ${path}: ${(err as Error)?.message ?? String(err)}`, err);
    } finally {
      if (timer !== undefined) this.config.clock.clearTimeout(timer);
      options.signal?.removeEventListener("abort", abort);
    }
  }
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

export function errorOf(res: Response, body: unknown): MooringApiError {
  const e = (body as { error?: Record<string, unknown> } | null)?.error;
  const retryAfter = Number(res.headers.get("retry-after"));
  const retryAfterMs = Number.isFinite(retryAfter) && retryAfter > 0 ? retryAfter * 1000 : undefined;
  if (!e || typeof e.code !== "string") {
    return apiError(res.status >= 500 ? "INTERNAL" : "INVALID_REQUEST", `HTTP ${res.status}`, {
      status: res.status,
      retryAfterMs,
    });
  }
  const { code, message, reason, ...details } = e;
  return apiError(code, String(message ?? code), {
    status: res.status,
    reason: typeof reason === "string" ? reason : undefined,
    details,
    retryAfterMs,
  });
}
