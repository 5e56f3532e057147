/**
 * The prompt of `mooring run`: the argument, or stdin only when the argument is `-` or absent. A
 * prompt argument never touches stdin (a script whose stdin never closes must not hang), and an
 * absent argument on a terminal is a usage error rather than a silent wait for typing.
 */
import { UsageError } from "./exit-codes.js";

export async function readPrompt(
  arg: string | undefined,
  stdin: NodeJS.ReadStream = process.stdin,
): Promise<string> {
  let prompt: string;
  if (arg !== undefined && arg !== "-") prompt = arg;
  else {
    if (arg === undefined && stdin.isTTY) {
      throw new UsageError('no prompt: pass it as an argument, or pipe it in (use "-" to read a terminal)');
    }
    const chunks: Buffer[] = [];
    for await (const chunk of stdin) chunks.push(chunk as Buffer);
    prompt = Buffer.concat(chunks).toString("utf8");
  }
  if (prompt.trim() === "") throw new UsageError("the prompt is empty");
  return prompt;
}
