/** Every driver this gateway knows, by name (the registry's `driver` field). */
import { acpDriver } from "./acp/driver.js";
import { claudeCodeDriver } from "./claude-code/driver.js";
import type { AgentDriver } from "./driver.js";
import { mooringDriver } from "./mooring/driver.js";
import type { DriverName } from "./registry.js";
import { simulatedDriver } from "./simulated/driver.js";

export const drivers: Record<DriverName, AgentDriver> = {
  simulated: simulatedDriver,
  "claude-code": claudeCodeDriver,
  acp: acpDriver,
  mooring: mooringDriver,
};
