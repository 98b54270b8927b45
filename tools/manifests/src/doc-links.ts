import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';

/** A link in a Markdown file whose target is a path in the repository (not a URL), with the line it is on. */
export interface DocLink {
  readonly file: string;
  readonly line: number;
  readonly target: string;
}

/** Lines outside fenced code blocks, with their 1-based numbers: links and headings in code are not Markdown. */
function proseLines(text: string): { line: number; text: string }[] {
  const out: { line: number; text: string }[] = [];
  let fence: string | undefined;
  text.split('\n').forEach((raw, i) => {
    const opener = /^\s{0,3}(`{3,}|~{3,})/.exec(raw)?.[1];
    if (fence === undefined && opener !== undefined) {
      fence = opener;
      return;
    }
    if (fence !== undefined) {
      if (opener !== undefined && opener[0] === fence[0] && opener.length >= fence.length) fence = undefined;
      return;
    }
    out.push({ line: i + 1, text: raw });
  });
  return out;
}

/** Inline code spans hold no links: `[a](b)` inside backticks is text. */
function withoutCodeSpans(line: string): string {
  return line.replace(/(`+)(?:(?!\1).)+?\1/g, '');
}

/** Every inline link and image target of a Markdown text (`[text](target)`, `![alt](target "title")`). */
export function markdownLinkTargets(text: string): { line: number; target: string }[] {
  const out: { line: number; target: string }[] = [];
  for (const { line, text: raw } of proseLines(text)) {
    // The text of a link may hold one level of brackets, e.g. [`x[]`](y); the target ends at the first space or ')'.
    for (const m of withoutCodeSpans(raw).matchAll(/!?\[(?:[^[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+"[^"]*")?\s*\)/g)) {
      out.push({ line, target: m[1] ?? '' });
    }
  }
  return out;
}

/**
 * The anchor GitHub gives a heading: its text as rendered (no code ticks, emphasis or link syntax), lower-cased,
 * without punctuation and symbols, spaces as hyphens (what github-slugger does); repeats get -1, -2, ...
 */
export function headingAnchors(text: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  for (const { text: raw } of proseLines(text)) {
    const heading = /^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$/.exec(raw)?.[1];
    if (heading === undefined) continue;
    const rendered = heading.replace(/!?\[((?:[^[\]]|\[[^\]]*\])*)\]\([^)]*\)/g, '$1').replace(/`/g, '');
    const slug = rendered
      .toLowerCase()
      .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '')
      .replace(/ /g, '-');
    const count = seen.get(slug) ?? 0;
    seen.set(slug, count + 1);
    anchors.add(count === 0 ? slug : `${slug}-${count}`);
  }
  // Explicit anchors (<a id="x"></a> or name="x") count too.
  for (const m of text.matchAll(/<a\s+(?:id|name)="([^"]+)"/g)) anchors.add(m[1] ?? '');
  return anchors;
}

/** Markdown files under a directory, recursively, skipping node_modules. */
export function markdownFilesUnder(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return entry.name === 'node_modules' ? [] : markdownFilesUnder(path);
    return entry.name.endsWith('.md') ? [path] : [];
  });
}

/** Targets with a scheme (https:, mailto:) or protocol-relative ones leave the repository: not checked here. */
function isExternal(target: string): boolean {
  return /^[a-z][a-z0-9+.-]*:/i.test(target) || target.startsWith('//');
}

/**
 * Every relative link of the given Markdown files that does not resolve: a path that does not exist (relative to
 * the linking file), or an anchor that no heading of the target Markdown file (or of the same file) produces.
 * Returned as `file:line: target (why)` with the file relative to `root`, so a failure names what to fix.
 */
export function brokenDocLinks(root: string, files: readonly string[]): string[] {
  const anchorsOf = new Map<string, Set<string>>();
  const anchors = (path: string): Set<string> => {
    let found = anchorsOf.get(path);
    if (found === undefined) {
      found = headingAnchors(readFileSync(path, 'utf8'));
      anchorsOf.set(path, found);
    }
    return found;
  };
  const broken: string[] = [];
  for (const file of files) {
    for (const { line, target } of markdownLinkTargets(readFileSync(file, 'utf8'))) {
      if (target === '' || isExternal(target)) continue;
      const hash = target.indexOf('#');
      const pathPart = decodeURIComponent(hash === -1 ? target : target.slice(0, hash));
      const anchor = hash === -1 ? undefined : decodeURIComponent(target.slice(hash + 1));
      const where = `${relative(root, file)}:${line}: ${target}`;
      const resolved = pathPart === '' ? file : pathPart.startsWith('/') ? join(root, pathPart) : join(dirname(file), pathPart);
      if (!existsSync(resolved)) {
        broken.push(`${where} (no such file)`);
        continue;
      }
      if (anchor === undefined || anchor === '') continue;
      if (statSync(resolved).isDirectory() || !resolved.endsWith('.md')) continue;
      if (!anchors(resolved).has(anchor.toLowerCase())) broken.push(`${where} (no heading with this anchor)`);
    }
  }
  return broken;
}
