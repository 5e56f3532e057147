/**
 * The gateway's own session feeds as a client SDK `LocalEventSource` (client/stream.ts): what an
 * `/acp` connection's loopback client follows its runs through, so an agent event crosses one
 * socket (to the ACP client), not two. A subscribe here is the socket's `events.subscribe` for the
 * same caller: readiness, the tenant's session check and RESYNC_REQUIRED (openSubscription), then
 * the session's feed from the session's head, replay then live; a purged session ends it.
 */
import type { LocalEventSource } from "../client/stream.js";
import type { MooringEvent } from "../client/types.js";
import type { Caller } from "../domain/tenants.js";
import { MooringError } from "../errors.js";
import type { Subscriber } from "../stream/session-feeds.js";
import { notReady } from "./readiness.js";
import type { Services } from "./services.js";

/**
 * `count`: the subscriptions of `caller` open now are added to it (the route's count, for
 * `holding()`: what streams in process, not over a socket).
 */
export function localEventSource(s: Services, caller: Caller, count: { open: number }): LocalEventSource {
  return {
    bootId: s.identity.bootId,
    async subscribe(sessionId, afterSeq, onEvents, onEnd) {
      let opened: { headSeq: number };
      try {
        const refusal = notReady(s);
        if (refusal) throw refusal;
        opened = await s.events.openSubscription(sessionId, afterSeq, caller.tenant);
      } catch (err) {
        // The client sees the error the socket would have answered: its code, status and details.
        if (err instanceof MooringError)
          throw { code: err.code, message: err.message, status: err.httpStatus, details: err.details ?? {} };
        throw err;
      }
      let open = true;
      const subscriber: Subscriber = {
        cursor: afterSeq,
        // The feed's events are its cache's and every subscriber's: the client reads them as they are.
        deliver: (events) => onEvents(events as MooringEvent[]),
        end: (reason) => {
          if (!open) return;
          open = false;
          count.open--;
          onEnd(`session_${reason}`);
        },
      };
      const unsubscribe = s.feeds.subscribe(sessionId, opened.headSeq, subscriber);
      count.open++;
      return () => {
        if (!open) return;
        open = false;
        count.open--;
        unsubscribe();
      };
    },
  };
}
