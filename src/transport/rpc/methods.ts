/**
 * The JSON-RPC method table (docs/api.md, JSON-RPC), shared by `POST /v1/rpc` and `WS /v1/ws`. Each method
 * validates its params with the shared schemas and calls the domain.
 */
import type { Static } from "typebox";
import type { Caller } from "../../domain/tenants.js";
import { errors } from "../../errors.js";
import { rpcParams } from "../../contract/requests.js";
import { notReady } from "../readiness.js";
import type { Services } from "../services.js";
import { validate } from "../validate.js";

/** What a socket adds to a call; absent over HTTP. */
export interface CallContext {
  subscribe?(sessionId: string, afterSeq: number | undefined, batch: boolean): Promise<unknown>;
  unsubscribe?(sessionId: string): Promise<unknown>;
  /** Who calls, for the log (transport and peer address; never a token). */
  who?: string;
  /** The tenant the call acts for (the token's; the open caller on a gateway without tokens). */
  caller: Caller;
}

type Params = { [K in keyof typeof rpcParams]: Static<(typeof rpcParams)[K]> };
type Handler<K extends keyof Params> = (s: Services, p: Params[K], ctx: CallContext) => Promise<unknown>;

const handlers: { [K in keyof Params]: Handler<K> } = {
  "sessions.create": async (s, p, ctx) => (await s.sessions.create(p, ctx.caller.tenant)).session,
  "sessions.get": (s, p, ctx) => s.sessions.get(p.sessionId, ctx.caller.tenant),
  "sessions.list": (s, p, ctx) => s.sessions.list(p, ctx.caller.tenant),
  "sessions.archive": (s, p, ctx) => s.sessions.archive(p.sessionId, ctx.caller.tenant),
  "sessions.fork": async (s, p, ctx) => {
    const { sessionId, ...input } = p;
    return (await s.sessions.fork(sessionId, input, ctx.caller.tenant)).session;
  },
  "sessions.rollback": (s, p, ctx) => s.sessions.rollback(p.sessionId, p.turns, ctx.caller.tenant),
  "turns.submit": async (s, p, ctx) => {
    const { sessionId, _meta, ...input } = p;
    const traceparent = _meta?.traceparent;
    return (await s.tasks.submit(sessionId, traceparent ? { ...input, traceparent } : input, ctx.caller.tenant)).task;
  },
  "tasks.get": (s, p, ctx) => s.tasks.get(p.taskId, p.waitMs ?? 0, ctx.caller.tenant),
  "tasks.cancel": (s, p, ctx) => s.tasks.cancel(p.taskId, ctx.caller.tenant),
  "turns.steer": (s, p, ctx) => {
    const { taskId, ...input } = p;
    return s.tasks.steering.steer(taskId, input, ctx.caller.tenant);
  },
  "tasks.list": (s, p, ctx) => s.tasks.list(p, ctx.caller.tenant),
  "tasks.diff": (s, p, ctx) => {
    const { taskId, ...page } = p;
    return s.checkpoints.diffTask(taskId, page, ctx.caller.tenant);
  },
  "sessions.diff": (s, p, ctx) => {
    const { sessionId, ...query } = p;
    return s.checkpoints.diffSession(sessionId, query, ctx.caller.tenant);
  },
  "sessions.revert": (s, p, ctx) => {
    const { sessionId, ...body } = p;
    return s.checkpoints.revert(sessionId, body, ctx.caller.tenant);
  },
  "permissions.respond": (s, p, ctx) => {
    const { taskId, requestId, ...answer } = p;
    return s.permissions.respond(taskId, requestId, answer, ctx.who ?? "rpc", ctx.caller.tenant);
  },
  "gate.status": (s, _p, ctx) => s.tasks.gate(ctx.caller.tenant),
  // A browser cannot see WebSocket pings; this lets any client prove the socket still carries answers.
  ping: async () => ({ pong: true, at: new Date().toISOString() }),
  "instances.list": (s) => s.instances.list(),
  "events.subscribe": (_s, p, ctx) => {
    if (!ctx.subscribe) throw socketOnly("events.subscribe");
    return ctx.subscribe(p.sessionId, p.afterSeq, p.batch ?? true);
  },
  "events.unsubscribe": (_s, p, ctx) => {
    if (!ctx.unsubscribe) throw socketOnly("events.unsubscribe");
    return ctx.unsubscribe(p.sessionId);
  },
};

const socketOnly = errors.socketOnly;

export function hasMethod(method: string): method is keyof Params {
  return Object.hasOwn(handlers, method);
}

export async function callMethod(services: Services, method: keyof Params, params: unknown, ctx: CallContext) {
  const refusal = notReady(services);
  if (refusal) throw refusal;
  const valid = validate<Params[typeof method]>(rpcParams[method], params ?? {});
  return (handlers[method] as Handler<typeof method>)(services, valid, ctx);
}
