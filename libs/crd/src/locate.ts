import { isMap, isScalar, isSeq, type Document, type LineCounter, type Node } from 'yaml';
import { parsePath, type ValidationProblem } from './problems';

const startOf = (node: unknown): number | undefined => (node as Node | null | undefined)?.range?.[0];

/**
 * Where the field a problem's path names is written in a parsed document: its key for a mapping entry, the item
 * for a sequence element. A path that does not exist in the text (a required field left out) points at the
 * deepest part of it that does, the mapping the field belongs in.
 */
export function locateField(doc: Document, path: string, lines: LineCounter): { line: number; column: number } {
  let node: unknown = doc.contents;
  let offset = startOf(node) ?? 0;
  for (const part of parsePath(path)) {
    if (isMap(node)) {
      const pair = node.items.find((p) => String(isScalar(p.key) ? p.key.value : p.key) === String(part));
      if (!pair) break;
      offset = startOf(pair.key) ?? offset;
      node = pair.value;
    } else if (isSeq(node) && typeof part === 'number' && node.items[part] !== undefined) {
      node = node.items[part];
      offset = startOf(node) ?? offset;
    } else {
      break;
    }
  }
  const { line, col } = lines.linePos(offset);
  return { line, column: col };
}

/** The problem with the line and column of its field in `doc`. */
export function locateProblem(doc: Document, problem: ValidationProblem, lines: LineCounter): ValidationProblem {
  return { ...problem, ...locateField(doc, problem.path, lines) };
}
