/** The driver boundary's repair of agent text (src/agents/storable-text.ts), property-checked. */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { isStorableString, storable, storableString } from "../../src/agents/storable-text.js";

/** Strings of arbitrary UTF-16 units: NUL, lone halves of surrogate pairs, whole pairs, anything. */
const anyText = fc.string({ unit: fc.integer({ min: 0, max: 0xffff }).map((n) => String.fromCharCode(n)) });
const anyJson = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: "small" },
    anyText,
    fc.integer(),
    fc.boolean(),
    fc.constant(null),
    fc.array(tie("value"), { maxLength: 4 }),
    fc.dictionary(anyText, tie("value"), { maxKeys: 4 }),
  ),
})).value;

/** What Postgres accepts: JSON with no `\u0000` and no escaped lone surrogate. */
function postgresAccepts(value: unknown): boolean {
  const json = JSON.stringify(value);
  return isStorableString(json) && !/\\u0000|\\ud[89a-f][0-9a-f]{2}/i.test(json);
}

describe("storable text", () => {
  it("repairs NUL and lone surrogates, keeps pairs and everything else", () => {
    expect(storableString("a\u0000b")).toBe("a\uFFFDb");
    expect(storableString("x\uD800y\uDC00z")).toBe("x\uFFFDy\uFFFDz");
    expect(storableString(`${"a".repeat(199)}\uD83D`)).toBe(`${"a".repeat(199)}\uFFFD`);
    expect(storableString("emoji 😀 ok")).toBe("emoji 😀 ok");
  });

  it("any string becomes storable; a storable one comes back as it is", () => {
    fc.assert(
      fc.property(anyText, (text) => {
        const fixed = storableString(text);
        expect(isStorableString(fixed)).toBe(true);
        expect(fixed.length).toBe(text.length);
        if (isStorableString(text)) expect(fixed).toBe(text);
      }),
    );
  });

  it("any JSON value (keys included) becomes one Postgres accepts; nothing is copied when nothing needs repair", () => {
    fc.assert(
      fc.property(anyJson, (value) => {
        const fixed = storable(value);
        expect(postgresAccepts(fixed)).toBe(true);
        if (postgresAccepts(value)) expect(fixed).toBe(value);
      }),
    );
  });
});
