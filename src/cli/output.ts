/**
 * stdout carries only the answer (or JSON lines); every write goes straight to the stream, so a
 * reader sees text as it arrives. `flushed()` waits until everything written has been handed to
 * the OS, so the process may exit without cutting a long line.
 */
import type { Writable } from "node:stream";

export class Stdout {
  /** Whether the last text written ended a line (the status line may then be drawn below it). */
  atLineStart = true;
  wroteAny = false;

  constructor(readonly stream: Writable & { isTTY?: boolean } = process.stdout) {}

  get isTTY(): boolean {
    return this.stream.isTTY === true;
  }

  text(chunk: string): void {
    if (chunk === "") return;
    this.stream.write(chunk);
    this.wroteAny = true;
    this.atLineStart = chunk.endsWith("\n");
  }

  jsonLine(value: unknown): void {
    this.stream.write(`${JSON.stringify(value)}\n`);
    this.atLineStart = true;
  }

  flushed(): Promise<void> {
    return new Promise((resolve) => {
      if (this.stream.writableLength === 0) return resolve();
      this.stream.write("", () => resolve());
    });
  }
}
