/**
 * The one-line messages of a start that cannot go on: a data folder another gateway
 * owns, a port that is taken or may not be used. main.ts prints them as `mooring: <line>` and
 * exits 2, instead of an uncaught exception with its stack.
 */
import type { Config } from "./config.js";
import { DataDirBusy } from "./db/data-dir-lock.js";
import { portHolder } from "./lib/port-holder.js";

/** The line for a start refused by its environment, or null when `err` is something else. */
export function startRefusal(err: unknown, config: Pick<Config, "host" | "port">): string | null {
  if (err instanceof DataDirBusy) return err.message;
  // Only the HTTP server's own listen: an EACCES reading a workspace root is no port problem.
  const { code, syscall } = (err ?? {}) as NodeJS.ErrnoException;
  if (syscall !== "listen") return null;
  const where = `${config.host}:${config.port}`;
  const pick = "pick another with PORT=<port> (PORT=0 picks a free one)";
  if (code === "EADDRINUSE") {
    const holder = portHolder(config.port);
    const by = holder ? ` by pid ${holder.pid} (${holder.command})` : "";
    return `port ${config.port} is already in use${by}, so the gateway cannot listen on ${where}; stop that process or ${pick}`;
  }
  if (code === "EACCES") return `not allowed to listen on ${where} (ports below 1024 need privileges); ${pick}`;
  if (code === "EADDRNOTAVAIL") {
    return `HOST=${config.host} is not an address of this machine, so the gateway cannot listen on ${where}; set HOST to one of its addresses (default 127.0.0.1)`;
  }
  return null;
}
