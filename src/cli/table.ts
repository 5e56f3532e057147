/**
 * A plain text table for a terminal: columns padded to their widest cell, long cells cut. `shown`
 * is how a cell will look on the output (control characters made visible, terminal-text.ts), so
 * widths are counted on what the reader sees.
 */
export function table(
  headers: string[],
  rows: string[][],
  shown: (cell: string) => string = (cell) => cell,
  maxCell = 60,
): string {
  const cut = (s: string) => (s.length > maxCell ? `${s.slice(0, maxCell - 1)}…` : s);
  const cells = [headers, ...rows.map((r) => r.map((c) => cut(shown(c.replace(/\s+/g, " ")))))];
  const widths = headers.map((_, i) => Math.max(...cells.map((r) => (r[i] ?? "").length)));
  return (
    cells
      .map((r) =>
        r
          .map((c, i) => (c ?? "").padEnd(widths[i]))
          .join("  ")
          .trimEnd(),
      )
      .join("\n") + "\n"
  );
}
