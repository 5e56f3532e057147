/** The domain operations the transports call; transports hold no business rules. */
import type { CheckpointService } from "../domain/checkpoints.js";
import type { EventService } from "../domain/events.js";
import type { InstanceService } from "../domain/instances.js";
import type { Permissions } from "../domain/permissions.js";
import type { Identity } from "../domain/runtime.js";
import type { SessionService } from "../domain/sessions.js";
import type { TaskService } from "../domain/tasks.js";
import type { TenantDirectory } from "../domain/tenants.js";
import type { NotReadyCause } from "../errors.js";
import type { SessionFeeds } from "../stream/session-feeds.js";
import type { DeliveriesService } from "../webhooks/deliveries-service.js";
import type { Clock } from "../clock.js";

export interface Services {
  sessions: SessionService;
  tasks: TaskService;
  events: EventService;
  feeds: SessionFeeds;
  instances: InstanceService;
  /** Interactive approvals: clients answer agents' permission requests. */
  permissions: Permissions;
  /** Workspace checkpoints: diffs and reverts. */
  checkpoints: CheckpointService;
  /** The webhook outbox as operators see it. */
  webhookDeliveries: DeliveriesService;
  identity: Identity;
  /** The gateway's clock: socket pings, SSE heartbeats (src/clock.ts). */
  clock: Clock;
  /** Tokens → tenants: who a request acts for. */
  tenants: TenantDirectory;
  /** Startup done and the database reachable; else why not (transport/readiness.ts words the refusal). */
  readiness(): { ready: true } | { ready: false; cause: NotReadyCause };
}
