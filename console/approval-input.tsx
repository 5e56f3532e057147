/**
 * What a person approves, shown whole: a permission request's tool input as the agent
 * will run it. A stream's preview (`truncated`) is replaced by the whole input from the event's
 * payload before any Allow is possible; long runs of blanks and invisible characters are drawn
 * visibly, so a command padded far to the right cannot hide its tail.
 */
import type { ComponentChildren } from "preact";
import type { MooringEvent } from "../src/client/index.js";
import { usePayload, wholeText } from "./payload.js";

/** Blanks in a row drawn as one marker ("⟨5000 blanks⟩") instead of as empty space. */
const BLANK_RUN = 8;
const hidden = new RegExp(`[ \\t]{${BLANK_RUN},}|(?![\\n\\t])[\\p{Cc}\\p{Cf}\\p{Zl}\\p{Zp}]`, "gu");

/** The text with long blank runs and invisible characters as marked, readable pieces. */
export function visible(text: string): ComponentChildren[] {
  const parts: ComponentChildren[] = [];
  let last = 0;
  for (const m of text.matchAll(hidden)) {
    if (m.index > last) parts.push(text.slice(last, m.index));
    const s = m[0];
    parts.push(
      s.length >= BLANK_RUN ? (
        <mark class="blanks">⟨{s.length} blanks⟩</mark>
      ) : (
        <mark class="invisible">{`U+${s.codePointAt(0)!.toString(16).toUpperCase().padStart(4, "0")}`}</mark>
      ),
    );
    last = m.index + s.length;
  }
  if (last < text.length) parts.push(text.slice(last));
  return parts;
}

/** The input as approved: whole, or null while (or because) only a preview is at hand. */
export function useWholeInput(request: MooringEvent): { whole: { input: unknown } | null; note: string | null } {
  const toolCall = ((request.data ?? {}) as Record<string, any>).toolCall ?? {};
  const cut = toolCall.truncated === true;
  const loaded = usePayload(request, cut);
  if (!cut) return { whole: { input: toolCall.input }, note: null };
  const bytes = `${toolCall.inputBytes ?? "?"} bytes`;
  if (loaded?.state === "loaded") {
    const value = loaded.value as Record<string, unknown> | null;
    // The stored whole input is `{input}`; an event without one answers its own data (the preview).
    if (value && typeof value === "object" && "input" in value && !("requestId" in value)) {
      return { whole: { input: value.input }, note: `The stream sent a preview of this input; it is shown whole (${bytes}).` };
    }
    return { whole: null, note: `Only a preview of this input (${bytes}) exists, so it cannot be allowed.` };
  }
  if (loaded?.state === "failed") {
    return { whole: null, note: `The whole input (${bytes}) could not be loaded: ${loaded.error}. It cannot be allowed until it is shown.` };
  }
  return { whole: null, note: `The stream sent a preview of this input (${bytes}); loading the whole of it…` };
}

export function ApprovalInput({ request, whole, note }: { request: MooringEvent; whole: { input: unknown } | null; note: string | null }) {
  const toolCall = ((request.data ?? {}) as Record<string, any>).toolCall ?? {};
  const shown = whole ? whole.input : toolCall.input;
  return (
    <div class="approval-input">
      {note && (
        <p class="cut" role="note">
          {note}
        </p>
      )}
      {shown !== undefined && (
        <figure aria-label={whole ? "Tool input" : "Tool input preview"}>
          <pre class={whole ? "whole" : "preview"}>{visible(wholeText(shown))}</pre>
        </figure>
      )}
    </div>
  );
}
