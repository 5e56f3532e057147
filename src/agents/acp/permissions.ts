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

export function permissionAnswer(entry: AgentEntry, agentConfig: Record<string, unknown>): PermissionAnswer {
  if (entry.permissions === "client") return agentConfig.permissions === "allow" ? "allow" : "deny";
  return entry.permissions;
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
