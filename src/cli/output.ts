/**
 * stdout carries only the answer (or JSON lines); every write goes straight to the stream, so a
 * reader sees text as it arrives. `flushed()` waits until everything written has been handed to
 * the OS, so the process may exit without cutting a long line. On a terminal (and not `--raw`)
 * everything is made visible first (terminal-text.ts).
 */
import type { Writable } from "node:stream";
import { escapesFor, visible, visibleJson } from "./terminal-text.js";

export class Stdout {
  /** Whether the last text written ended a line (the status line may then be drawn below it). */
  atLineStart = true;
  wroteAny = false;
  private readonly escapes: boolean;

  constructor(
    readonly stream: Writable & { isTTY?: boolean } = process.stdout,
    options: { raw?: boolean } = {},
  ) {
    this.escapes = escapesFor(stream, options.raw);
  }

  get isTTY(): boolean {
    return this.stream.isTTY === true;
  }

  /** `text` as it will be written: made visible on a terminal (for a table cell, before padding). */
  readonly shown = (text: string): string => (this.escapes ? visible(text) : text);

  text(chunk: string): void {
    if (chunk === "") return;
    this.stream.write(this.shown(chunk));
    this.wroteAny = true;
    this.atLineStart = chunk.endsWith("\n");
  }

  jsonLine(value: unknown): void {
    const line = JSON.stringify(value);
    this.stream.write(`${this.escapes ? visibleJson(line) : line}\n`);
    this.atLineStart = true;
  }

  flushed(): Promise<void> {
    return new Promise((resolve) => {
      if (this.stream.writableLength === 0) return resolve();
      this.stream.write("", () => resolve());
    });
  }
}
