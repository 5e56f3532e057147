/**
 * When each startup step was done, in ms since the process started: logged with "ready", so where
 * the startup time goes is in the log (bench/README.md, "Startup, where the time went").
 */
export class StartupSteps {
  readonly done: Record<string, number> = {};
  /** What the startup reconcile settled, also logged with "ready". */
  reconciled: Record<string, number> = {};

  mark(step: string): void {
    this.done[step] = Math.round(performance.now());
  }
}
