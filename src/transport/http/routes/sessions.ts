import type { FastifyInstance } from "fastify";
import type { Static } from "typebox";
import { routeResponses } from "../../../contract/responses.js";
import {
  CreateSessionBody,
  DeleteSessionQuery,
  ForkSessionBody,
  ListSessionsQuery,
  RevertBody,
  RollbackSessionBody,
  SessionDiffQuery,
  SessionIdParams,
  SubmitTurnBody,
} from "../../../contract/requests.js";
import type { Services } from "../../services.js";
import { tenantOf } from "../auth.js";

export function registerSessionRoutes(app: FastifyInstance, s: Services): void {
  app.post<{ Body: Static<typeof CreateSessionBody> }>(
    "/sessions",
    {
      schema: {
        summary: "Create a session",
        tags: ["sessions"],
        body: CreateSessionBody,
        response: routeResponses["POST /v1/sessions"],
      },
    },
    async (req, reply) => {
      const { session, created } = await s.sessions.create(req.body, tenantOf(req, s.tenants));
      reply.header("location", `/v1/sessions/${session.id}`);
      return reply.status(created ? 201 : 200).send(session);
    },
  );

  app.get(
    "/agents",
    {
      schema: {
        summary: "The agents the caller may name in a create",
        tags: ["sessions"],
        response: routeResponses["GET /v1/agents"],
      },
    },
    async (req) => s.sessions.agents(tenantOf(req, s.tenants)),
  );

  app.get<{ Querystring: Static<typeof ListSessionsQuery> }>(
    "/sessions",
    {
      schema: {
        summary: "List sessions, newest first",
        tags: ["sessions"],
        querystring: ListSessionsQuery,
        response: routeResponses["GET /v1/sessions"],
      },
    },
    async (req) => s.sessions.list(req.query, tenantOf(req, s.tenants)),
  );

  app.get<{ Params: Static<typeof SessionIdParams> }>(
    "/sessions/:id",
    {
      schema: {
        summary: "A session with its recent turns (previews only)",
        tags: ["sessions"],
        params: SessionIdParams,
        response: routeResponses["GET /v1/sessions/:id"],
      },
    },
    async (req) => s.sessions.get(req.params.id, tenantOf(req, s.tenants)),
  );

  app.delete<{ Params: Static<typeof SessionIdParams>; Querystring: Static<typeof DeleteSessionQuery> }>(
    "/sessions/:id",
    {
      schema: {
        summary: "Archive a session (its open turns are cancelled); with purge=true, also delete it with everything of it",
        tags: ["sessions"],
        params: SessionIdParams,
        querystring: DeleteSessionQuery,
        response: routeResponses["DELETE /v1/sessions/:id"],
      },
    },
    async (req) => {
      const tenant = tenantOf(req, s.tenants);
      if (req.query.purge === true) return s.sessions.purge(req.params.id, tenant);
      return s.sessions.archive(req.params.id, tenant);
    },
  );

  app.post<{ Params: Static<typeof SessionIdParams>; Body: Static<typeof ForkSessionBody> }>(
    "/sessions/:id/fork",
    {
      schema: {
        summary: "Fork a session at a turn: a new session carrying its history up to that turn",
        tags: ["sessions"],
        params: SessionIdParams,
        body: ForkSessionBody,
        response: routeResponses["POST /v1/sessions/:id/fork"],
      },
    },
    async (req, reply) => {
      const { session, created } = await s.sessions.fork(
        req.params.id,
        req.body ?? {},
        tenantOf(req, s.tenants),
      );
      reply.header("location", `/v1/sessions/${session.id}`);
      return reply.status(created ? 201 : 200).send(session);
    },
  );

  app.post<{ Params: Static<typeof SessionIdParams>; Body: Static<typeof RollbackSessionBody> }>(
    "/sessions/:id/rollback",
    {
      schema: {
        summary: "Roll back the last completed turns of an idle session (their events stay in the log)",
        tags: ["sessions"],
        params: SessionIdParams,
        body: RollbackSessionBody,
        response: routeResponses["POST /v1/sessions/:id/rollback"],
      },
    },
    async (req) => s.sessions.rollback(req.params.id, req.body.turns, tenantOf(req, s.tenants)),
  );

  app.post<{ Params: Static<typeof SessionIdParams>; Body: Static<typeof SubmitTurnBody> }>(
    "/sessions/:id/turns",
    {
      schema: {
        summary: "Submit a turn; it becomes a durable task behind the admission gate",
        tags: ["turns"],
        params: SessionIdParams,
        body: SubmitTurnBody,
        response: routeResponses["POST /v1/sessions/:id/turns"],
      },
    },
    async (req, reply) => {
      // A W3C traceparent header makes the client's span the parent of the turn's (docs/operations.md, Tracing).
      const traceparent = req.headers.traceparent;
      const input = typeof traceparent === "string" ? { ...req.body, traceparent } : req.body;
      const { task, created } = await s.tasks.submit(req.params.id, input, tenantOf(req, s.tenants));
      reply.header("location", `/v1/tasks/${task.id}`);
      return reply.status(created ? 202 : 200).send(task);
    },
  );

  app.get<{ Params: Static<typeof SessionIdParams>; Querystring: Static<typeof SessionDiffQuery> }>(
    "/sessions/:id/diff",
    {
      schema: {
        summary: "What turns fromTurn..toTurn changed in the workspace, paged by files",
        tags: ["sessions"],
        params: SessionIdParams,
        querystring: SessionDiffQuery,
        response: routeResponses["GET /v1/sessions/:id/diff"],
      },
    },
    async (req) => s.checkpoints.diffSession(req.params.id, req.query, tenantOf(req, s.tenants)),
  );

  app.post<{ Params: Static<typeof SessionIdParams>; Body: Static<typeof RevertBody> }>(
    "/sessions/:id/revert",
    {
      schema: {
        summary: "Restore the workspace (or some paths) to the checkpoint before a turn; idle sessions only",
        tags: ["sessions"],
        params: SessionIdParams,
        body: RevertBody,
        response: routeResponses["POST /v1/sessions/:id/revert"],
      },
    },
    async (req) => s.checkpoints.revert(req.params.id, req.body, tenantOf(req, s.tenants)),
  );
}
