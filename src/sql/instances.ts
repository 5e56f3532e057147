import type { Queryable } from "../db/client.js";

export interface InstanceInfo {
  bootId: string;
  instanceId: string;
  host: string;
  pid: number;
  version: string;
}

/** One row per process start; an earlier boot of the same instanceId keeps its own row. */
export async function registerInstance(q: Queryable, info: InstanceInfo): Promise<void> {
  await q`
    insert into instances (boot_id, instance_id, host, pid, version)
    values (${info.bootId}, ${info.instanceId}, ${info.host}, ${info.pid}, ${info.version})`;
}

export async function heartbeatInstance(q: Queryable, bootId: string): Promise<void> {
  await q`update instances set heartbeat_at = now() where boot_id = ${bootId}`;
}

export async function markInstanceStopped(q: Queryable, bootId: string): Promise<void> {
  await q`update instances set stopped_at = now() where boot_id = ${bootId}`;
}
