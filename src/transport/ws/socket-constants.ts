/** What a WebSocket client of `WS /v1/ws` sees of the socket itself: its close codes and subprotocol. */

/** A client too slow to read what it subscribed to; it resubscribes with its last seq. */
export const CLOSE_TOO_SLOW = 4008;
/** The one subprotocol the socket accepts when a client offers any (docs/api.md, Streaming). */
export const WS_SUBPROTOCOL = "mooring.v1";
/** The gateway is shutting down or draining; the client reconnects (to another instance). */
export const CLOSE_GOING_AWAY = 1001;
