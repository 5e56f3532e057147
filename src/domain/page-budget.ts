/**
 * List pages are bounded in bytes as well as in items: a session may carry 16 KiB of metadata and
 * 16 KiB of agentConfig, a task a 200,000-character prompt and an agent's whole answer, so 200 items
 * could be megabytes (60 sessions with large metadata once made a 54 MB answer). A page stops
 * before the item that would take it past the budget (MOORING_LIST_PAGE_BYTES); it always holds at
 * least one item, and its nextCursor continues after its last item.
 */

/** How many leading `items` fit in `budgetBytes` of JSON (at least one when there is one). */
export function fittingCount(items: readonly unknown[], budgetBytes: number): number {
  let total = 2; // the brackets
  for (let i = 0; i < items.length; i++) {
    total += Buffer.byteLength(JSON.stringify(items[i]) ?? "") + 1;
    if (total > budgetBytes && i > 0) return i;
  }
  return items.length;
}
