/**
 * What a client may choose for a claude-code session: only options that cannot make the gateway run
 * something the operator did not allow.
 */
import { carryOverCharsProblem } from "../carry-over.js";
import type { AgentEntry } from "../registry.js";

export interface ClaudeCodeConfig {
  model?: string;
  permissionMode?: string;
  /** Append `[ctx: NN%]` to each turn's final text. */
  contextSuffix?: boolean;
  /** Ask Claude to end each reply with `[ctx: ~NN%]`; the marker is stripped and reported (context-marker.ts). */
  selfReportContext?: boolean;
  /** The recap budget of a fresh start (agents/carry-over.ts); read by the pool, not the driver. */
  carryOverChars?: number;
}

/** Longest accepted `model` (model ids are tens of characters). */
export const MAX_MODEL_CHARS = 256;

type Validation = { ok: true; config: Record<string, unknown> } | { ok: false; problem: string };

export function validateClaudeCodeConfig(entry: AgentEntry, config: Record<string, unknown>): Validation {
  const cleaned: ClaudeCodeConfig = {};
  for (const [field, value] of Object.entries(config)) {
    if (value === undefined) continue;
    switch (field) {
      case "model": {
        if (typeof value !== "string" || value.trim() === "") {
          return { ok: false, problem: "agentConfig.model must be a non-empty string" };
        }
        // It becomes a command-line argument: a 200 KB model failed the spawn (E2BIG).
        if (value.length > MAX_MODEL_CHARS) {
          return { ok: false, problem: `agentConfig.model must be at most ${MAX_MODEL_CHARS} characters` };
        }
        if (entry.models && !entry.models.includes(value)) {
          return { ok: false, problem: `agentConfig.model must be one of: ${entry.models.join(", ")}` };
        }
        cleaned.model = value;
        break;
      }
      case "permissionMode": {
        // Permission modes widen what the agent may do unasked, so the operator opts in to each.
        const allowed = entry.permissionModes ?? ["default"];
        if (typeof value !== "string" || !allowed.includes(value)) {
          return { ok: false, problem: `agentConfig.permissionMode must be one of: ${allowed.join(", ")}` };
        }
        cleaned.permissionMode = value;
        break;
      }
      case "carryOverChars": {
        const problem = carryOverCharsProblem(value);
        if (problem) return { ok: false, problem };
        cleaned.carryOverChars = value as number;
        break;
      }
      case "contextSuffix":
      case "selfReportContext": {
        if (typeof value !== "boolean") {
          return { ok: false, problem: `agentConfig.${field} must be a boolean` };
        }
        cleaned[field] = value;
        break;
      }
      default:
        return { ok: false, problem: `agentConfig.${field} is not allowed for claude-code` };
    }
  }
  return { ok: true, config: { ...cleaned } };
}

/** Reads a config that already passed validation. */
export function readClaudeCodeConfig(config: Record<string, unknown>): ClaudeCodeConfig {
  return {
    model: typeof config.model === "string" ? config.model : undefined,
    permissionMode: typeof config.permissionMode === "string" ? config.permissionMode : undefined,
    contextSuffix: config.contextSuffix === true,
    selfReportContext: config.selfReportContext === true,
  };
}
