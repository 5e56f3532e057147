/**
 * Each tenant's own workspace roots (docs/tenants.md), normalized once as the global ones are at
 * start, so a symlinked root still contains its real children. Both the create check
 * (domain/sessions.ts) and the check before every agent start (domain/conversation-pool.ts) ask
 * here, so the two can never disagree about a tenant's roots.
 */
import type { TenantDirectory } from "./tenants.js";
import { normalizeRoots } from "./workspace.js";

export class TenantRoots {
  private readonly cache = new Map<string, Promise<string[]>>();

  constructor(private readonly tenants: Pick<TenantDirectory, "tenant">) {}

  /**
   * The roots of the tenant named `name` (empty: the global roots alone apply). A tenant no longer
   * configured has no roots of its own; the global ones still hold for its sessions.
   */
  of(name: string): Promise<string[]> {
    let roots = this.cache.get(name);
    if (!roots) {
      roots = normalizeRoots(this.tenants.tenant(name)?.workspaceRoots ?? []);
      this.cache.set(name, roots);
    }
    return roots;
  }
}
