/**
 * Which process listens on a TCP port, for the message of a start that found it taken. Linux only
 * (/proc/net/tcp*, then the socket among each process's file descriptors); only processes this
 * user may look into are found. null when it cannot tell: the message then names the port alone.
 */
import { readdirSync, readFileSync, readlinkSync } from "node:fs";

export interface PortHolder {
  pid: number;
  command: string;
}

const LISTEN = "0A";

export function portHolder(port: number): PortHolder | null {
  const inodes = listeningInodes(port);
  if (inodes.size === 0) return null;
  let pids: string[];
  try {
    pids = readdirSync("/proc").filter((name) => /^\d+$/.test(name));
  } catch {
    return null;
  }
  for (const pid of pids) {
    let fds: string[];
    try {
      fds = readdirSync(`/proc/${pid}/fd`);
    } catch {
      continue; // another user's process, or gone
    }
    for (const fd of fds) {
      let target: string;
      try {
        target = readlinkSync(`/proc/${pid}/fd/${fd}`);
      } catch {
        continue;
      }
      const inode = /^socket:\[(\d+)\]$/.exec(target)?.[1];
      if (inode && inodes.has(inode)) return { pid: Number(pid), command: commandOf(pid) };
    }
  }
  return null;
}

function listeningInodes(port: number): Set<string> {
  const hexPort = port.toString(16).toUpperCase().padStart(4, "0");
  const inodes = new Set<string>();
  for (const table of ["/proc/net/tcp", "/proc/net/tcp6"]) {
    let text: string;
    try {
      text = readFileSync(table, "utf8");
    } catch {
      continue;
    }
    for (const line of text.split("\n").slice(1)) {
      const fields = line.trim().split(/\s+/);
      // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
      if (fields.length < 10 || fields[3] !== LISTEN) continue;
      if (fields[1].split(":")[1] === hexPort) inodes.add(fields[9]);
    }
  }
  return inodes;
}

/** The command line, shortened for a one-line message. */
function commandOf(pid: string): string {
  try {
    const text = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").filter(Boolean).join(" ");
    return text.length > 80 ? `${text.slice(0, 79)}…` : text;
  } catch {
    return "?";
  }
}
