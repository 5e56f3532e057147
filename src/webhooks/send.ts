/**
 * One delivery attempt over HTTP: POST the signed body with a timeout, follow no redirect (a
 * redirect is a failed attempt: the URL was configured, not discovered), and keep a short excerpt
 * of the answer for the deliveries list. Never throws.
 */
import { signatureHeaders } from "./signature.js";

/** What of a receiver's answer is kept (characters). */
const EXCERPT_CHARS = 256;

export interface AttemptResult {
  ok: boolean;
  statusCode: number | null;
  response: string;
}

export async function sendDelivery(
  delivery: { id: string; url: string; body: string },
  secret: string,
  timeoutMs: number,
  /** The delivery's span as a W3C traceparent, sent to the receiver (tracing on only). */
  traceparent: string | null = null,
): Promise<AttemptResult> {
  const headers = {
    "content-type": "application/json",
    "user-agent": "mooring-webhooks",
    ...signatureHeaders(secret, delivery.id, delivery.body, new Date()),
    ...(traceparent ? { traceparent } : {}),
  };
  try {
    const res = await fetch(delivery.url, {
      method: "POST",
      headers,
      body: delivery.body,
      redirect: "manual",
      signal: AbortSignal.timeout(timeoutMs),
    });
    const response = await excerpt(res);
    return { ok: res.status >= 200 && res.status < 300, statusCode: res.status, response };
  } catch (err) {
    const name = (err as Error).name;
    const reason =
      name === "TimeoutError" || name === "AbortError"
        ? `timeout after ${timeoutMs} ms`
        : `request failed: ${((err as Error).cause as NodeJS.ErrnoException | undefined)?.code ?? (err as Error).message}`;
    return { ok: false, statusCode: null, response: reason };
  }
}

/** The first characters of a body, reading no more than needed. */
async function excerpt(res: Response): Promise<string> {
  if (!res.body) return "";
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let text = "";
  try {
    while (text.length < EXCERPT_CHARS) {
      const { done, value } = await reader.read();
      if (done) break;
      text += decoder.decode(value, { stream: true });
    }
  } catch {
    // the excerpt is best effort
  } finally {
    reader.cancel().catch(() => {});
  }
  return text.slice(0, EXCERPT_CHARS);
}
