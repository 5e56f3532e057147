/**
 * What the transports call (transport/services.ts): the domain services composed on the database,
 * reached through getters because the HTTP server listens before they exist (until then readiness
 * refuses every request that would reach them).
 */
import type { Clock } from "../clock.js";
import type { Identity } from "../domain/runtime.js";
import type { TenantDirectory } from "../domain/tenants.js";
import type { Services } from "../transport/services.js";
import { DeliveriesService } from "../webhooks/deliveries-service.js";
import type { Parts } from "./compose.js";
import type { Readiness } from "./readiness.js";

export function transportServices(
  parts: () => Parts | null,
  identity: Identity,
  clock: Clock,
  tenants: TenantDirectory,
  readiness: Readiness,
): Services {
  const composed = (): Parts => {
    const p = parts();
    if (!p) throw new Error("gateway not started");
    return p;
  };
  return {
    get sessions() {
      return composed().sessions;
    },
    get tasks() {
      return composed().tasks;
    },
    get events() {
      return composed().events;
    },
    get feeds() {
      return composed().feeds;
    },
    get instances() {
      return composed().instances;
    },
    get permissions() {
      return composed().permissions;
    },
    get checkpoints() {
      return composed().checkpoints;
    },
    webhookDeliveries: new DeliveriesService(() => composed().db),
    identity,
    clock,
    tenants,
    readiness: () => readiness.check(),
  };
}
