/**
 * Answers `session/request_permission` without a person in the loop: the registry entry's policy,
 * or the session's own choice when the entry delegates it (`client`, default deny).
 */
import type {
  PermissionOption,
  PermissionOptionKind,
  RequestPermissionResponse,
} from "@agentclientprotocol/sdk";
import type { AgentEntry } from "../registry.js";

export type PermissionAnswer = "allow" | "deny";

/** The policy of a session: a fixed answer, or `ask` a person through the gateway. */
export function permissionAnswer(
  entry: AgentEntry,
  agentConfig: Record<string, unknown>,
): PermissionAnswer | "ask" {
  if (entry.permissions === "client") {
    const chosen = agentConfig.permissions;
    return chosen === "allow" || chosen === "ask" ? chosen : "deny";
  }
  return entry.permissions;
}

/**
 * A person's answer as ACP wants it: the option chosen, as the agent offered it. A request
 * resolved by a stop of the turn (cancel, restart) or without any option is `cancelled`, as ACP
 * requires of a client whose prompt turn is cancelled.
 */
export function relayedAnswer(
  answer: { optionId: string | null; by: string },
  options: PermissionOption[],
): RequestPermissionResponse {
  if (answer.by === "cancel" || answer.by === "restart" || answer.optionId === null) {
    return { outcome: { outcome: "cancelled" } };
  }
  if (!options.some((o) => o.optionId === answer.optionId)) return { outcome: { outcome: "cancelled" } };
  return { outcome: { outcome: "selected", optionId: answer.optionId } };
}

// "Once" first: a standing grant would outlive the policy that gave it if the operator changes it.
const preferred: Record<PermissionAnswer, PermissionOptionKind[]> = {
  allow: ["allow_once", "allow_always"],
  deny: ["reject_once", "reject_always"],
};

/** Picks the option matching the answer; without one, the request is cancelled (never allowed). */
export function answerPermission(
  answer: PermissionAnswer,
  options: PermissionOption[],
): RequestPermissionResponse {
  for (const kind of preferred[answer]) {
    const option = options.find((o) => o.kind === kind);
    if (option) return { outcome: { outcome: "selected", optionId: option.optionId } };
  }
  return { outcome: { outcome: "cancelled" } };
}
