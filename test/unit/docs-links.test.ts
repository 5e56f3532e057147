/**
 * Every relative link in README.md and docs/*.md reaches an existing file, and its `#anchor` a
 * heading of that file (GitHub's slugs), so moving a section between pages cannot leave a link
 * dangling (the README's reference sections moved to docs/ once).
 */
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { describe, expect, it } from "vitest";

const repoRoot = join(import.meta.dirname, "..", "..");
const pages = [
  "README.md",
  ...readdirSync(join(repoRoot, "docs"))
    .filter((f) => f.endsWith(".md"))
    .map((f) => `docs/${f}`),
];

/** The text outside fenced code blocks and inline code, where a link is a link. */
function prose(markdown: string): string {
  return markdown.replace(/^```[\s\S]*?^```/gm, "").replace(/`[^`\n]*`/g, "");
}

/** GitHub's anchor of a heading: lowercased, punctuation dropped, spaces to hyphens, repeats numbered. */
function anchors(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const result = new Set<string>();
  for (const [, heading] of markdown.replace(/^```[\s\S]*?^```/gm, "").matchAll(/^#{1,6} (.+)$/gm)) {
    const text = heading
      .replace(/\[([^\]]*)\]\([^)]*\)/g, "$1")
      .trim()
      .toLowerCase();
    const slug = text.replace(/[^\p{L}\p{N}\s_-]/gu, "").replace(/\s/g, "-");
    const n = seen.get(slug) ?? 0;
    seen.set(slug, n + 1);
    result.add(n === 0 ? slug : `${slug}-${n}`);
  }
  return result;
}

function relativeLinks(markdown: string): string[] {
  const targets = [...prose(markdown).matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)].map((m) => m[1]);
  return targets.filter((t) => !/^[a-z][a-z0-9+.-]*:/i.test(t));
}

describe("relative links in README.md and docs/", () => {
  it("the slugs follow GitHub's rule", () => {
    expect([
      ...anchors(
        "# Chained gateways (driver `mooring`)\n## Registering agents: `MOORING_AGENTS`\n## A\n## A",
      ),
    ]).toEqual(["chained-gateways-driver-mooring", "registering-agents-mooring_agents", "a", "a-1"]);
  });

  it("finds the links (the README links every docs page it moved sections to)", () => {
    const readme = relativeLinks(readFileSync(join(repoRoot, "README.md"), "utf8"));
    for (const page of [
      "configuration",
      "security",
      "decisions",
      "operations",
      "testing",
      "tenants",
      "webhooks",
      "benchmarks",
      "simulated-agent",
    ]) {
      expect(
        readme.some((t) => t.startsWith(`docs/${page}.md`)),
        page,
      ).toBe(true);
    }
  });

  it.each(pages)("%s: every link reaches a file and every anchor a heading", (page) => {
    const text = readFileSync(join(repoRoot, page), "utf8");
    const broken: string[] = [];
    for (const target of relativeLinks(text)) {
      const [path, anchor] = target.split("#", 2) as [string, string | undefined];
      const file = path === "" ? join(repoRoot, page) : join(repoRoot, dirname(page), decodeURI(path));
      if (!existsSync(file)) {
        broken.push(`${target}: no file ${relative(repoRoot, file)}`);
        continue;
      }
      if (anchor === undefined || !file.endsWith(".md") || statSync(file).isDirectory()) continue;
      if (!anchors(readFileSync(file, "utf8")).has(anchor)) broken.push(`${target}: no heading #${anchor}`);
    }
    expect(broken).toEqual([]);
  });
});
