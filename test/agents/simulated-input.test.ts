/**
 * The simulated agent's `[input]` (docs/simulated-agent.md): the Nth `[input]` of a prompt waits
 * until the agent has taken N steered inputs in the turn, whenever they came: before the agent
 * reached the directive, several in one delivery, or one by one while it waits. Each is echoed once.
 * (The steer API test once hung for 30 s when its first input came before the agent reached its
 * first `[input]`: echoed at that boundary, the directive then waited for a third input.)
 */
import pino from "pino";
import { describe, expect, it } from "vitest";
import {
  type AgentEvent,
  emptyCursor,
  type TurnInput,
  type TurnOutcome,
  type TurnSink,
} from "../../src/agents/driver.js";
import { simulatedDriver } from "../../src/agents/simulated/driver.js";

class Sink implements TurnSink {
  readonly events: AgentEvent[] = [];
  private onEmit: (() => void) | null = null;
  emit(event: AgentEvent): void {
    this.events.push(event);
    this.onEmit?.();
  }
  async saveCursor(): Promise<void> {}
  deltas(): string[] {
    return this.events.flatMap((e) => (e.type === "message.delta" ? [e.text] : []));
  }
  /** Resolves once `n` deltas were emitted. */
  async deltasReach(n: number): Promise<void> {
    while (this.deltas().length < n) await new Promise<void>((resolve) => (this.onEmit = resolve));
    this.onEmit = null;
  }
}

/** A turn input the test hands texts to; `before`: delivered at once when the driver takes it. */
function testInput(before: string[] = []): TurnInput & { send(...texts: string[]): void } {
  let deliver: ((text: string) => void) | null = null;
  return {
    take(d) {
      deliver = d;
      for (const text of before) d(text);
      return () => {
        deliver = null;
      };
    },
    send(...texts) {
      if (!deliver) throw new Error("the driver has not taken its input");
      for (const text of texts) deliver(text);
    },
  };
}

function run(prompt: string, input: TurnInput, sink: Sink): Promise<TurnOutcome> {
  const conversation = simulatedDriver.open({
    sessionId: "s-input",
    workspace: "/nonexistent",
    resolveWorkspace: async () => "/nonexistent",
    env: {},
    entry: { name: "simulated", driver: "simulated", args: [], env: {}, permissions: "deny" },
    agentConfig: {},
    cursor: emptyCursor(),
    settings: { contextWindow: 200_000 },
    log: pino({ level: "silent" }),
  });
  return conversation.runTurn({ prompt, sink, signal: new AbortController().signal, input });
}

// A lost input shows as a turn that never ends: failed here in seconds rather than the 60 s default.
describe("simulated agent [input]", { timeout: 10_000 }, () => {
  it("an input that came before the agent reached its [input] counts for it", async () => {
    const sink = new Sink();
    const input = testInput(["a"]);
    const outcome = run("[input] [input]", input, sink);
    await sink.deltasReach(1);
    input.send("b");
    expect((await outcome).text).toBe("steered a steered b ");
    expect(sink.deltas()).toEqual(["steered a ", "steered b "]);
  });

  it("two inputs delivered at once while it waits satisfy two [input]s", async () => {
    const sink = new Sink();
    const input = testInput();
    const outcome = run("[input] [input]", input, sink);
    // At once, whether the agent waits at its first [input] yet or not.
    input.send("a", "b");
    expect((await outcome).text).toBe("steered a steered b ");
    expect(sink.deltas()).toEqual(["steered a ", "steered b "]);
  });

  it("both inputs before the turn starts: it does not wait at all", async () => {
    const sink = new Sink();
    const outcome = await run("[input] [deltas 1] [input]", testInput(["a", "b"]), sink);
    expect(outcome.text).toBe("steered a steered b chunk 1 ");
    expect(sink.deltas()).toEqual(["steered a ", "steered b ", "chunk 1 "]);
  });

  it("one at a time, each echoed at the boundary after it came", async () => {
    const sink = new Sink();
    const input = testInput();
    const outcome = run("[input] [deltas 1] [input]", input, sink);
    input.send("a");
    await sink.deltasReach(2);
    expect(sink.deltas()).toEqual(["steered a ", "chunk 1 "]);
    input.send("b");
    expect((await outcome).text).toBe("steered a chunk 1 steered b ");
  });
});
