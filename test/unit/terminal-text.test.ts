/**
 * The escaping of what a terminal would interpret, itself (src/cli/terminal-text.ts): which characters are made
 * visible and how, that JSON stays the same value, and that table columns are measured on what the
 * terminal shows. The pseudo-terminal runs are in cli-terminal.test.ts.
 */
import { describe, expect, it } from "vitest";
import { table } from "../../src/cli/table.js";
import { escapesFor, visible, visibleJson } from "../../src/cli/terminal-text.js";

describe("visible", () => {
  it("shows every C0 but newline and tab, DEL and C1 as \\xHH", () => {
    for (let code = 0; code < 0xa0; code++) {
      const c = String.fromCharCode(code);
      const kept = c === "\n" || c === "\t" || (code >= 0x20 && code < 0x7f);
      expect(visible(c)).toBe(kept ? c : `\\x${code.toString(16).padStart(2, "0")}`);
    }
  });

  it("keeps a CR that ends a line, shows a lone one", () => {
    expect(visible("a\r\nb\rc")).toBe("a\r\nb\\x0dc");
  });

  it("leaves printable text, multi-byte characters and backslashes alone", () => {
    const text = "naïve — 日本語 🚢 C:\\path\\x41";
    expect(visible(text)).toBe(text);
  });
});

describe("visibleJson", () => {
  it("escapes DEL and C1 in a JSON text, which still parses to the same value", () => {
    const value = { text: "\x1b]0;t\x07 \u009b2J \x7f", n: 1 };
    const json = visibleJson(JSON.stringify(value));
    expect(json).not.toMatch(/[\x00-\x1f\x7f-\x9f]/);
    expect(JSON.parse(json)).toEqual(value);
  });
});

describe("escapesFor", () => {
  it("a terminal unless raw; never a pipe", () => {
    expect(escapesFor({ isTTY: true })).toBe(true);
    expect(escapesFor({ isTTY: true }, true)).toBe(false);
    expect(escapesFor({ isTTY: false })).toBe(false);
    expect(escapesFor({})).toBe(false);
  });
});

describe("table", () => {
  it("pads columns to the width of what the terminal shows", () => {
    const out = table(
      ["A", "B"],
      [
        ["\x1b[2J", "x"],
        ["abcdefg", "y"],
      ],
      visible,
    );
    const lines = out.split("\n");
    expect(lines[1]).toBe("\\x1b[2J  x");
    expect(lines[2]).toBe("abcdefg  y");
  });
});
