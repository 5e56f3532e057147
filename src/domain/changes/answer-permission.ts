/**
 * A client's answer to a permission request, a pipelined change: the first answer wins (a
 * conditional update, sql/permission.ts); only the winner wakes the waiting turn, here at once or
 * on another instance through mooring_permissions after the commit. Answers the resolved row, or
 * null when the request was already resolved.
 */
import type { Tx } from "../../db/client.js";
import { permissionResolve } from "../../sql/permission.js";
import type { Answers, Effects } from "../committer.js";

export type ClientAnswer = Omit<Parameters<typeof permissionResolve>[2], "by">;

export function answerPermissionChange(requestId: string, answer: ClientAnswer) {
  const statements = (q: Tx) => ({ won: permissionResolve(q, requestId, { ...answer, by: "client" }) });
  return {
    statements,
    outcome: ({ won }: Answers<ReturnType<typeof statements>>) => ({
      value: won,
      effects: (won
        ? {
            permissionsResolved: [requestId],
            notify: { when: "afterCommit" as const, permissions: [requestId] },
          }
        : {}) as Effects<"afterCommit">,
    }),
  };
}
