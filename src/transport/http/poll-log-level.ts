/**
 * The log level of routes that are polled: health probes, Prometheus scrapes, and the console's
 * gate heartbeat (every second per open page). Their "incoming request" / "request completed"
 * lines at info would bury everything else; a failure (warn or error) is still logged.
 */
export const pollLogLevel = "warn";
