import type { FastifyInstance } from "fastify";
import type { Static } from "typebox";
import { routeResponses } from "../../../contract/responses.js";
import { describeCaller, tenantOf } from "../auth.js";
import {
  GetTaskQuery,
  ListTasksQuery,
  PermissionParams,
  RespondPermissionBody,
  SteerBody,
  TaskDiffQuery,
  TaskIdParams,
} from "../../../contract/requests.js";
import type { Services } from "../../services.js";

export function registerTaskRoutes(app: FastifyInstance, s: Services): void {
  app.get<{ Params: Static<typeof TaskIdParams>; Querystring: Static<typeof GetTaskQuery> }>(
    "/tasks/:id",
    {
      schema: {
        summary: "A task; with waitMs, holds until its state changes or the wait ends",
        tags: ["tasks"],
        params: TaskIdParams,
        querystring: GetTaskQuery,
        response: routeResponses["GET /v1/tasks/:id"],
      },
    },
    async (req) => s.tasks.get(req.params.id, req.query.waitMs ?? 0, tenantOf(req, s.tenants)),
  );

  app.get<{ Querystring: Static<typeof ListTasksQuery> }>(
    "/tasks",
    { schema: { summary: "List tasks, newest first", tags: ["tasks"], querystring: ListTasksQuery, response: routeResponses["GET /v1/tasks"] } },
    async (req) => s.tasks.list(req.query, tenantOf(req, s.tenants)),
  );

  app.get<{ Params: Static<typeof TaskIdParams>; Querystring: Static<typeof TaskDiffQuery> }>(
    "/tasks/:id/diff",
    {
      schema: {
        summary: "What the turn changed in the workspace: its checkpoints' unified diff, paged by files",
        tags: ["tasks"],
        params: TaskIdParams,
        querystring: TaskDiffQuery,
        response: routeResponses["GET /v1/tasks/:id/diff"],
      },
    },
    async (req) => s.checkpoints.diffTask(req.params.id, req.query, tenantOf(req, s.tenants)),
  );

  app.post<{ Params: Static<typeof TaskIdParams> }>(
    "/tasks/:id/cancel",
    { schema: { summary: "Cancel a task (idempotent)", tags: ["tasks"], params: TaskIdParams, response: routeResponses["POST /v1/tasks/:id/cancel"] } },
    async (req) => s.tasks.cancel(req.params.id, tenantOf(req, s.tenants)),
  );

  app.post<{ Params: Static<typeof TaskIdParams>; Body: Static<typeof SteerBody> }>(
    "/tasks/:id/input",
    {
      schema: {
        summary: "Steer: add input to the turn the task runs (stored as a turn.input event before the agent sees it)",
        tags: ["tasks"],
        params: TaskIdParams,
        body: SteerBody,
        response: routeResponses["POST /v1/tasks/:id/input"],
      },
    },
    async (req, reply) => {
      const answer = await s.tasks.steering.steer(req.params.id, req.body, tenantOf(req, s.tenants));
      return reply.status(answer.created ? 202 : 200).send(answer);
    },
  );

  app.post<{ Params: Static<typeof PermissionParams>; Body: Static<typeof RespondPermissionBody> }>(
    "/tasks/:id/permissions/:requestId",
    {
      schema: {
        summary: "Answer a permission request of a running turn (the first answer wins)",
        tags: ["tasks"],
        params: PermissionParams,
        body: RespondPermissionBody,
        response: routeResponses["POST /v1/tasks/:id/permissions/:requestId"],
      },
    },
    async (req) =>
      s.permissions.respond(
        req.params.id,
        req.params.requestId,
        req.body,
        `http ${describeCaller(req)}`,
        tenantOf(req, s.tenants),
      ),
  );

  app.get("/gate", { schema: { summary: "Admission gate status", tags: ["gate"], response: routeResponses["GET /v1/gate"] } }, async (req) => s.tasks.gate(tenantOf(req, s.tenants)));
}
