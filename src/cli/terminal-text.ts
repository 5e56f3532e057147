/**
 * Text from the gateway made safe for a terminal (docs/cli.md, "Terminal safety"). Agent output,
 * tool names, prompts, workspaces and error messages may carry escape sequences (an OSC 52
 * clipboard write, an OSC 8 link, a screen clear, a window title); on a terminal each control
 * character is shown as `\xHH` instead of being obeyed: C0 except newline and tab (a CR too, unless
 * it ends a line), DEL and C1. A lone ESC is all a sequence needs, so escaping it disarms the rest,
 * one character at a time: a sequence split across two deltas is caught as well.
 *
 * Not a terminal, or `--raw` on stdout: bytes pass unchanged (a pipe gets exactly what was sent).
 */

// C0 but \t and \n, a CR not followed by \n, DEL, C1.
const control = /[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]|\r(?!\n)/g;
// Inside JSON.stringify's output only DEL and C1 are left raw (it escapes C0 itself).
const jsonControl = /[\x7f-\x9f]/g;

const hex = (c: string) => c.charCodeAt(0).toString(16).padStart(2, "0");

/** `text` with every control character shown as `\xHH` (newlines and tabs kept). */
export function visible(text: string): string {
  return text.replace(control, (c) => `\\x${hex(c)}`);
}

/** A JSON text with DEL and C1 as `\u00HH`: the same JSON value, nothing a terminal obeys. */
export function visibleJson(json: string): string {
  return json.replace(jsonControl, (c) => `\\u00${hex(c)}`);
}

/** Whether what is written to `stream` must be made visible: a terminal, and not `--raw`. */
export function escapesFor(stream: { isTTY?: boolean }, raw = false): boolean {
  return stream.isTTY === true && !raw;
}

/** The one way the CLI writes a line of its own to stderr: `mooring: <text>`, made visible on a terminal. */
export function stderrLine(
  text: string,
  stream: NodeJS.WritableStream & { isTTY?: boolean } = process.stderr,
): void {
  stream.write(`mooring: ${escapesFor(stream) ? visible(text) : text}\n`);
}
