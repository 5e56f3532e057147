/**
 * The `acp` driver: runs any Agent Client Protocol agent the operator registered, over stdio
 * (docs/agents.md). See docs/acp.md.
 *
 * The conversation code, and with it the ACP SDK, is loaded with the first turn of an ACP session,
 * not at start: the SDK builds its zod schemas when imported, which took about as long as loading
 * the rest of the gateway, for gateways that may never run an ACP agent.
 */
import type {
  AgentConversation,
  AgentDriver,
  OpenConversationOptions,
  RunTurnOptions,
  TurnOutcome,
} from "../driver.js";
import { validateAcpConfig } from "./config.js";

/** An AcpConversation made on the first turn; until then alive unless closed. */
class LazyAcpConversation implements AgentConversation {
  private inner: AgentConversation | null = null;
  private closedBeforeUse = false;

  constructor(private readonly options: OpenConversationOptions) {}

  get alive(): boolean {
    return this.inner ? this.inner.alive : !this.closedBeforeUse;
  }

  async runTurn(options: RunTurnOptions): Promise<TurnOutcome> {
    if (!this.inner) {
      const { AcpConversation } = await import("./conversation.js");
      if (!this.inner) {
        this.inner = new AcpConversation(this.options);
        // Closed while the code loaded: the turn meets a closed conversation, as it would have.
        if (this.closedBeforeUse) await this.inner.close("kill");
      }
    }
    return this.inner.runTurn(options);
  }

  async close(mode: "graceful" | "kill"): Promise<void> {
    if (this.inner) return this.inner.close(mode);
    this.closedBeforeUse = true;
  }
}

export const acpDriver: AgentDriver = {
  name: "acp",
  validateConfig: validateAcpConfig,
  // Nothing is spawned here: the process starts with the first turn, which can report failures.
  open: (options) => new LazyAcpConversation(options),
};
