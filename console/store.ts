/**
 * The console's shared state: the client (remade when the token changes), the gate figures the
 * heartbeat reads, and the connection state shown in the header. The connection state combines
 * the heartbeat (a REST call every second, which also notices a new boot id) with the state of
 * every turn the page follows through the SDK: one reconnecting run makes the page "reconnecting",
 * one polling run makes it "polling".
 */
import { type GateStatus, MooringClient, type StateChange, UnauthorizedError } from "../src/client/index.js";

export type Connection = "connecting" | "live" | "reconnecting" | "polling";

export interface ConsoleState {
  client: MooringClient;
  /** A token is needed (tokens are set and the one we have, if any, was refused). */
  needsToken: boolean;
  tokenRefused: boolean;
  gate: GateStatus | null;
  connection: Connection;
  /** Why the connection is not live, when it is not. */
  detail: string;
  bootId: string | null;
  /** When the page last saw the gateway restart (a new boot id), and the new boot id. */
  restartedAt: number | null;
}

const TOKEN_KEY = "mooring.token";
const listeners = new Set<() => void>();
const runStates = new Map<string, StateChange["state"]>();
let heartbeatFailed: string | null = null;

function makeClient(token: string | null): MooringClient {
  return new MooringClient({ url: location.origin, token: token ?? undefined, readyTimeoutMs: 10_000 });
}

export const state: ConsoleState = {
  client: makeClient(sessionStorage.getItem(TOKEN_KEY)),
  needsToken: false,
  tokenRefused: false,
  gate: null,
  connection: "connecting",
  detail: "",
  bootId: null,
  restartedAt: null,
};

export function subscribe(listener: () => void): () => void {
  listeners.add(listener);
  return () => listeners.delete(listener);
}

function changed(): void {
  for (const listener of listeners) listener();
}

function recompute(): void {
  const runs = [...runStates.values()];
  if (heartbeatFailed !== null) {
    state.connection = "reconnecting";
    state.detail = heartbeatFailed;
  } else if (runs.includes("reconnecting")) {
    state.connection = "reconnecting";
    state.detail = "a followed turn is reconnecting its stream";
  } else if (runs.includes("polling")) {
    state.connection = "polling";
    state.detail = "streams are blocked; following turns by polling";
  } else if (state.bootId !== null) {
    state.connection = "live";
    state.detail = "";
  }
  changed();
}

/** A new boot id from any answer or stream: the gateway restarted. */
export function sawBoot(bootId: string | null): void {
  if (!bootId) return;
  if (state.bootId !== null && state.bootId !== bootId) state.restartedAt = Date.now();
  state.bootId = bootId;
}

/** A followed turn's state (from `run.on("state")`); `done` forgets the run. */
export function runState(taskId: string, change: StateChange): void {
  if (change.state === "restart") state.restartedAt = Date.now();
  else if (change.state === "done") runStates.delete(taskId);
  else runStates.set(taskId, change.state);
  recompute();
}

/** Try a token: kept in sessionStorage when the gateway accepts it. */
export async function useToken(token: string): Promise<boolean> {
  const client = makeClient(token);
  try {
    await client.http.once("GET", "/v1/gate");
  } catch (err) {
    if (err instanceof UnauthorizedError) {
      state.tokenRefused = true;
      changed();
      return false;
    }
  }
  sessionStorage.setItem(TOKEN_KEY, token);
  state.client = client;
  state.needsToken = false;
  state.tokenRefused = false;
  changed();
  void beat();
  return true;
}

/** The heartbeat: the gate figures, the boot id, and whether the gateway answers at all. */
async function beat(): Promise<void> {
  try {
    const answer = await state.client.http.once<GateStatus>("GET", "/v1/gate", { timeoutMs: 5000 });
    sawBoot(answer.headers.get("x-mooring-boot-id"));
    state.gate = answer.body;
    heartbeatFailed = null;
  } catch (err) {
    if (err instanceof UnauthorizedError) {
      state.needsToken = true;
      heartbeatFailed = null;
      changed();
      return;
    }
    const code = (err as { code?: string }).code;
    heartbeatFailed =
      code === "NOT_READY" ? "the gateway is starting" : `the gateway does not answer (${(err as Error).message})`;
  }
  recompute();
}

export function startHeartbeat(): void {
  let inFlight = false;
  const tick = () => {
    if (inFlight || state.needsToken) return;
    inFlight = true;
    void beat().finally(() => {
      inFlight = false;
    });
  };
  tick();
  setInterval(tick, 1000);
}
