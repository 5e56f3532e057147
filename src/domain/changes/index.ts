/**
 * The state changes: every write that changes a session's or a task's state is built here, one
 * file per change, and sent by the committer (domain/committer.ts). The services around them
 * (admission, worker, sessions, sweeper, permissions, the webhook delivery worker...) decide when
 * and call the builders; they build no statements themselves.
 *
 * One naming rule, by the committer's two inline strategies:
 * - `<verb>Change(deps?, ...args)`: a pipelined change (`Committer.commit`), a value with its
 *   `statements(q)` (every decision raised in SQL) and `outcome(answers)`; the answers are typed
 *   (`Answers<ReturnType<typeof statements>>`), in the shape the statements were built in, never
 *   read by string key.
 * - `<verb>In(tx, deps?, ...args)`: an interactive change (`Committer.transaction`), run inside the
 *   transaction and answering `{ value, effects }`.
 * `deps` names what a change needs (e.g. `ClaimDeps`: identity, lease, limits) rather than the
 * whole `Runtime`, which satisfies them.
 *
 * The turn's own writes (settlement, steered input) stay beside the turn: domain/turn-end.ts,
 * domain/turn-inputs.ts, and the event log's flush (`flushChange`, domain/committer.ts).
 */
export { admitChange, admissionStatements } from "./admit.js";
export { announcePositionsChange } from "./announce-positions.js";
export { answerPermissionChange } from "./answer-permission.js";
export { archiveSessionIn } from "./archive.js";
export { cancelTaskIn, mergeEffects } from "./cancel.js";
export { claimAndStart, claimChange } from "./claim.js";
export { claimDeliveriesChange } from "./claim-deliveries.js";
export { requestDrainIn } from "./drain.js";
export { expireQueuedIn } from "./expire.js";
export { forkSessionIn } from "./fork.js";
export { interruptOrphansIn } from "./interrupt.js";
export { purgeSessionIn } from "./purge.js";
export { recordRevertIn } from "./record-revert.js";
export { rollbackIn } from "./rollback.js";
