/**
 * One gateway per embedded data folder, for the gateway's whole life. Without it a
 * second `npm start` in the same folder took the running gateway's postmaster for a leftover and
 * stopped it.
 *
 * The lock is a unix socket the owner listens on. On Linux it is an abstract socket (no file): the
 * kernel drops it the moment the owner's process ends, kill -9 included, so a lock is never stale
 * and taking it is one atomic bind. Elsewhere it is a socket file beside the data folder's hash in
 * the temp folder; one that refuses connections is left over by a dead owner and is replaced. A
 * second start connects to the socket and reads who owns the folder (pid, URL) for its message.
 */
import { createHash } from "node:crypto";
import { realpathSync } from "node:fs";
import { unlink } from "node:fs/promises";
import { connect, createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** Who holds a data folder, as the owner answers on its socket. */
export interface Owner {
  pid: number;
  /** The gateway's URL once it listens; unset while it is still starting. */
  url?: string;
}

/** The data folder belongs to a running gateway: this start must not touch it. */
export class DataDirBusy extends Error {
  constructor(
    readonly dataDir: string,
    readonly owner: Owner | null,
  ) {
    super(
      `another gateway already runs on the data folder ${dataDir} (${describeOwner(owner)}); stop it first, or start this one with another MOORING_DATA_DIR or a DATABASE_URL`,
    );
  }
}

function describeOwner(owner: Owner | null): string {
  if (!owner) return "it did not say which";
  if (!owner.url) return `pid ${owner.pid}, still starting`;
  const port = new URL(owner.url).port;
  return `pid ${owner.pid}, port ${port}, ${owner.url}`;
}

export interface DataDirLock {
  /** Released when the gateway stops (idempotent); the process ending releases it too. */
  release(): Promise<void>;
}

/** How long a second start waits for the owner to say who it is. */
const ASK_TIMEOUT_MS = 3000;

/**
 * Take `dataDir` for this process, or throw DataDirBusy naming its owner. `owner` is read at each
 * question, so a URL set once the gateway listens is what a later second start is told.
 */
export async function lockDataDir(dataDir: string, owner: Owner): Promise<DataDirLock> {
  const address = socketAddress(dataDir);
  const server = createServer((socket) => {
    socket.on("error", () => {});
    socket.end(JSON.stringify(owner));
  });
  server.unref(); // the lock never keeps the process alive
  for (let attempt = 0; ; attempt++) {
    const taken = await listen(server, address);
    if (taken) break;
    const holder = await ask(address);
    if (holder !== "gone") throw new DataDirBusy(dataDir, holder);
    // A socket file whose owner died (not on Linux, where abstract sockets go with their process).
    if (attempt > 0 || address.startsWith("\0")) throw new DataDirBusy(dataDir, null);
    await unlink(address).catch(() => {});
  }
  let released: Promise<void> | null = null;
  return {
    release: () =>
      (released ??= new Promise<void>((resolve) => server.close(() => resolve())).then(async () => {
        if (!address.startsWith("\0")) await unlink(address).catch(() => {});
      })),
  };
}

/** The socket's name: a hash of the folder's real path, so every spelling of it is the same lock. */
function socketAddress(dataDir: string): string {
  let real = dataDir;
  try {
    real = realpathSync(dataDir);
  } catch {
    // not created yet: the path as given
  }
  const hash = createHash("sha256").update(real).digest("hex").slice(0, 32);
  return process.platform === "linux" ? `\0mooring-data-${hash}` : join(tmpdir(), `mooring-data-${hash}.sock`);
}

function listen(server: Server, address: string): Promise<boolean> {
  return new Promise((resolve, reject) => {
    const onError = (err: NodeJS.ErrnoException) => {
      if (err.code === "EADDRINUSE") resolve(false);
      else reject(err);
    };
    server.once("error", onError);
    server.listen(address, () => {
      server.removeListener("error", onError);
      resolve(true);
    });
  });
}

/** What the owner says on its socket; "gone" when nobody listens there. */
function ask(address: string): Promise<Owner | null | "gone"> {
  return new Promise((resolve) => {
    const socket = connect(address);
    let text = "";
    const timer = setTimeout(() => {
      socket.destroy();
      resolve(null);
    }, ASK_TIMEOUT_MS);
    socket.on("data", (chunk: Buffer) => {
      text += chunk;
    });
    socket.on("end", () => {
      clearTimeout(timer);
      try {
        resolve(JSON.parse(text) as Owner);
      } catch {
        resolve(null);
      }
    });
    socket.on("error", (err: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      resolve(err.code === "ECONNREFUSED" || err.code === "ENOENT" ? "gone" : null);
    });
  });
}
