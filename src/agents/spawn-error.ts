/**
 * Why a program could not be started, fit for a client: the error code and what it means, never
 * the program's path (Node's message, "spawn /opt/agents/bin/x ENOENT", names it). The log keeps
 * the whole error.
 */
const meanings: Record<string, string> = {
  ENOENT: "the program or the working folder was not found",
  EACCES: "permission denied",
  ENOTDIR: "a path component is not a folder",
  EMFILE: "too many open files",
  EAGAIN: "the system could not create another process",
};

export function describeSpawnError(err: Error): string {
  const code = (err as NodeJS.ErrnoException).code;
  if (!code) return "the program could not be started";
  return `${code}: ${meanings[code] ?? "the program could not be started"}`;
}
