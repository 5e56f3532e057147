/**
 * `mooring serve`: the gateway, exactly as `npm start` starts it: the same entry point in this
 * process, configured by the same environment variables (docs/configuration.md), with its own
 * signal handling and exit codes.
 */
export async function serveCommand(): Promise<void> {
  await import("../main.js");
}
