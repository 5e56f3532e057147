/** `mooring/client`: a typed client for the mooring gateway (docs/client.md). */
export { MooringClient, type MooringClientOptions, type SubmitOptions } from "./client.js";
export type { Clock } from "./clock.js";
export * from "./errors.js";
export type { FollowOptions, FollowState, StateChange, Transport } from "./follow.js";
export type { FetchLike } from "./http.js";
export { Run, type RunHandlers } from "./run.js";
export type { LocalEventSource } from "./stream.js";
export * from "./types.js";
