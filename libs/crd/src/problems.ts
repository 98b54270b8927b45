/** One validation problem: where (a JSON path such as `spec.rules[0].targetModels`) and what is wrong. */
export interface ValidationProblem {
  readonly path: string;
  readonly message: string;
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
