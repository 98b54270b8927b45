/** One validation problem: where (a JSON path such as `spec.rules[0].targetModels`) and what is wrong. */
export interface ValidationProblem {
  readonly path: string;
  readonly message: string;
  /** 1-based line and column of the field in the YAML text, when the problem comes from a parsed file. */
  readonly line?: number;
  readonly column?: number;
}

const IDENT = /^[A-Za-z_$][A-Za-z0-9_$]*$/;

/** Renders a path like zod's (`['spec', 'rules', 0, 'weight']`) as `spec.rules[0].weight`; odd keys are quoted. */
export function formatPath(path: readonly PropertyKey[]): string {
  let out = '';
  for (const part of path) {
    if (typeof part === 'number') out += `[${part}]`;
    else if (typeof part === 'string' && IDENT.test(part)) out += out ? `.${part}` : part;
    else out += `[${JSON.stringify(String(part))}]`;
  }
  return out;
}

/** `path: message`, the one-line form used in logs, status conditions and CLI output. */
export function formatProblem(p: ValidationProblem): string {
  return p.path ? `${p.path}: ${p.message}` : p.message;
}

const SEGMENT = /\.?([A-Za-z_$][A-Za-z0-9_$]*)|\[(\d+)\]|\[("(?:[^"\\]|\\.)*")\]/y;

/** The parts of a path {@link formatPath} wrote (`spec.rules[0]["a.b"]` → `spec`, `rules`, 0, `a.b`), as far as it reads. */
export function parsePath(path: string): (string | number)[] {
  const parts: (string | number)[] = [];
  SEGMENT.lastIndex = 0;
  while (SEGMENT.lastIndex < path.length) {
    const m = SEGMENT.exec(path);
    if (!m) break;
    if (m[1] !== undefined) parts.push(m[1]);
    else if (m[2] !== undefined) parts.push(Number(m[2]));
    else parts.push(JSON.parse(m[3]) as string);
  }
  return parts;
}
