/**
 * Reads a Server-Sent Events body (`GET /v1/sessions/:id/events`) with fetch, so it works the same
 * in Node and browsers and can send the token as a header. Yields each record's data; `onActivity`
 * hears every chunk, heartbeat comments included, for the idle check.
 */
export async function* sseRecords(
  body: ReadableStream<Uint8Array>,
  onActivity: () => void,
): AsyncGenerator<string> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      onActivity();
      buffer += decoder.decode(value, { stream: true });
      for (let end = buffer.indexOf("\n\n"); end >= 0; end = buffer.indexOf("\n\n")) {
        const record = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        // A named record (`event: end`, a purged session's last) is no event: the stream's end says it.
        if (record.split("\n").some((line) => line.startsWith("event:"))) continue;
        const data = record
          .split("\n")
          .filter((line) => line.startsWith("data:"))
          .map((line) => line.slice(line.startsWith("data: ") ? 6 : 5))
          .join("\n");
        if (data !== "") yield data;
      }
    }
  } finally {
    reader.cancel().catch(() => {});
  }
}
