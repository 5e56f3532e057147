/**
 * The ACP client side of one agent process, built on the SDK's `client()` app over the process's
 * stdio. Only `session/update` and `session/request_permission` are served: the client advertises
 * no fs or terminal capability, so a well-behaved agent never asks for them (the SDK answers
 * "method not found" if one does).
 */
import { Readable, Writable } from "node:stream";
import {
  type ClientConnection,
  client,
  ndJsonStream,
  PROTOCOL_VERSION,
  type InitializeRequest,
  type RequestPermissionRequest,
  type RequestPermissionResponse,
  type SessionNotification,
} from "@agentclientprotocol/sdk";
import type { AgentProcess } from "./process.js";

export interface ClientHandlers {
  /** Called synchronously, in arrival order, for every `session/update`. */
  onUpdate(notification: SessionNotification): void;
  /** May wait (interactive approvals: a person answers through the gateway). */
  onPermission(request: RequestPermissionRequest): RequestPermissionResponse | Promise<RequestPermissionResponse>;
}

export function connectToAgent(proc: AgentProcess, handlers: ClientHandlers): ClientConnection {
  const stream = ndJsonStream(
    Writable.toWeb(proc.child.stdin) as WritableStream<Uint8Array>,
    Readable.toWeb(proc.child.stdout) as ReadableStream<Uint8Array>,
  );
  return client({ name: "mooring" })
    .onNotification("session/update", ({ params }) => handlers.onUpdate(params))
    .onRequest("session/request_permission", ({ params }) => handlers.onPermission(params))
    .connect(stream);
}

export const initializeRequest: InitializeRequest = {
  protocolVersion: PROTOCOL_VERSION,
  clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false },
};

/**
 * Resolves after every message already received has gone through its handlers. The SDK hands a
 * response to its caller a few microtasks before the `session/update` notifications that preceded
 * it reach the handlers; a macrotask boundary lets those finish first, so a turn never ends (or
 * starts) with updates still in flight.
 */
export const drainReceived = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));
