/**
 * Previews keep snapshots and live turns small however large an agent's tool output is (docs/api.md,
 * Wire budget): an event carries at most PREVIEW_BYTES of any tool input or output and its full size;
 * the whole payload stays in the log, fetched on demand.
 */
export const PREVIEW_BYTES = 2048;

export interface Preview {
  preview: string;
  bytes: number;
  truncated: boolean;
}

export function toText(value: unknown): string {
  if (typeof value === "string") return value;
  if (value === undefined) return "";
  return JSON.stringify(value) ?? "";
}

/** Cut `value`'s text form to at most `limit` UTF-8 bytes without splitting a character. */
export function preview(value: unknown, limit = PREVIEW_BYTES): Preview {
  const text = toText(value);
  const bytes = Buffer.byteLength(text);
  if (bytes <= limit) return { preview: text, bytes, truncated: false };
  const buffer = Buffer.from(text).subarray(0, limit);
  // Drop a trailing partial UTF-8 sequence (continuation bytes are 10xxxxxx).
  let end = buffer.length;
  while (end > 0 && (buffer[end - 1] & 0xc0) === 0x80) end--;
  if (end > 0 && buffer[end - 1] >= 0xc0) end--;
  return { preview: buffer.subarray(0, end).toString("utf8"), bytes, truncated: true };
}
