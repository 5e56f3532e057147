/**
 * Self-reported context (`agentConfig.selfReportContext`, docs/agents.md): Claude is asked to end
 * every reply with `[ctx: ~NN%]`, its own estimate of how full its context is. Users never see the
 * marker: it is cut from each complete message, and from the streamed deltas by holding back only
 * as much of the tail as could still become a marker (so text streams on without waiting for the
 * reply to end).
 */
import type { AgentEvent, TurnSink } from "../driver.js";

/** Passed with `--append-system-prompt`. */
export const selfReportInstruction =
  "End every reply with your own estimate of how full your context window is, on its own line, " +
  "exactly in the form [ctx: ~NN%] (NN a whole number from 0 to 100). Write nothing after it.";

/** The marker at the very end of a text, with the whitespace before it. */
const trailingMarker = /\s*\[ctx: ~(\d{1,3})%\]\s*$/;
const marker = "[ctx: ~";

/**
 * The longest tail of `text` that is the beginning of a marker (or a whole marker followed only by
 * whitespace), with the whitespace before it: what a delta stream must hold back.
 */
export function markerTailStart(text: string): number {
  const open = text.lastIndexOf("[");
  const tail = open === -1 ? "" : text.slice(open);
  const couldStart =
    open !== -1 &&
    marker.startsWith(tail.slice(0, marker.length)) &&
    (tail.length <= marker.length || /^\d{0,3}(%(\]\s*)?)?$/.test(tail.slice(marker.length)));
  // Trailing whitespace may be what comes before a marker, too.
  let start = couldStart ? open : text.length;
  while (start > 0 && /\s/.test(text[start - 1] as string)) start--;
  return start;
}

/** Cuts a trailing marker: the text without it and the figure, or the text as it is and null. */
export function stripMarker(text: string): { text: string; percent: number | null } {
  const match = trailingMarker.exec(text);
  if (!match) return { text, percent: null };
  const percent = Number(match[1]);
  if (percent > 100) return { text, percent: null };
  return { text: text.slice(0, match.index), percent };
}

/**
 * A sink that removes the marker from what the agent emits and remembers the last figure seen.
 * Deltas are held back from the first character that could start a marker; the complete message
 * decides: a marker is dropped, anything else is released as a delta before the message.
 */
export class MarkerStrippingSink implements TurnSink {
  /** The figure of the last message that carried a marker in this turn; null when none did. */
  percent: number | null = null;
  private held = "";

  constructor(private readonly inner: TurnSink) {}

  emit(event: AgentEvent): void {
    if (event.type === "message.delta") {
      const pending = this.held + event.text;
      const cut = markerTailStart(pending);
      this.held = pending.slice(cut);
      if (cut > 0) this.inner.emit({ type: "message.delta", text: pending.slice(0, cut) });
      return;
    }
    if (event.type === "message") {
      const stripped = stripMarker(event.text);
      if (stripped.percent !== null) this.percent = stripped.percent;
      const heldMarker = stripMarker(this.held);
      // Held text that is not (only) the marker was real text after all.
      const release = heldMarker.percent !== null ? heldMarker.text : this.held;
      this.held = "";
      if (release !== "") this.inner.emit({ type: "message.delta", text: release });
      this.inner.emit({ ...event, text: stripped.text });
      return;
    }
    this.release();
    this.inner.emit(event);
  }

  /** Releases held text that is no marker (the turn ended without a complete message for it). */
  release(): void {
    const held = stripMarker(this.held);
    this.held = "";
    if (held.percent !== null) this.percent = held.percent;
    if (held.text !== "") this.inner.emit({ type: "message.delta", text: held.text });
  }

  saveCursor: TurnSink["saveCursor"] = (cursor) => this.inner.saveCursor(cursor);
  get drained() {
    return this.inner.drained?.bind(this.inner);
  }
  get requestPermission() {
    return this.inner.requestPermission?.bind(this.inner);
  }
}
