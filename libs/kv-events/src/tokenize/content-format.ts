/** How vLLM hands message content to a template: joined text (`string`) or the list of typed parts (`openai`). */
export type ContentFormat = 'string' | 'openai';

interface Node {
  readonly type: string;
  readonly [field: string]: unknown;
}

const isNode = (v: unknown): v is Node => typeof v === 'object' && v !== null && typeof (v as { type?: unknown }).type === 'string';

/** Every node of a parsed template, depth first. */
function* walk(node: unknown): Generator<Node> {
  if (Array.isArray(node)) {
    for (const item of node) yield* walk(item);
    return;
  }
  if (node instanceof Map) {
    for (const [k, v] of node) {
      yield* walk(k);
      yield* walk(v);
    }
    return;
  }
  if (!isNode(node)) return;
  yield node;
  for (const value of Object.values(node)) if (typeof value === 'object' && value !== null) yield* walk(value);
}

const isName = (n: unknown, name: string): boolean => isNode(n) && n.type === 'Identifier' && n['value'] === name;

function isKeyAccess(n: Node, name: string, key: string): boolean {
  if (n.type !== 'MemberExpression' || !isName(n['object'], name)) return false;
  const property = n['property'];
  if (!isNode(property)) return false;
  return n['computed'] === true
    ? property.type === 'StringLiteral' && property['value'] === key
    : property.type === 'Identifier' && property['value'] === key;
}

/** `name` (or `name[key]` / `name.key`), possibly through filters, tests, a slice or a `for … if` selection. */
function accesses(n: unknown, name: string, key?: string): boolean {
  if (!isNode(n)) return false;
  if (n.type === 'FilterExpression' || n.type === 'TestExpression') return accesses(n['operand'], name, key);
  if (n.type === 'SelectExpression') return accesses(n['lhs'], name, key);
  if (n.type === 'MemberExpression' && isNode(n['property']) && n['property'].type === 'SliceExpression') {
    return accesses(n['object'], name, key);
  }
  return key === undefined ? isName(n, name) : isKeyAccess(n, name, key);
}

/** `name` and every variable assigned from it (or from those), breadth first. */
function aliases(nodes: readonly Node[], name: string): string[] {
  const found = [name];
  for (let i = 0; i < found.length; i++) {
    for (const n of nodes) {
      if (n.type !== 'SetStatement' || !accesses(n['value'], found[i])) continue;
      const target = n['assignee'];
      if (isNode(target) && target.type === 'Identifier' && !found.includes(target['value'] as string))
        found.push(target['value'] as string);
    }
  }
  return found;
}

function loopVarsOver(nodes: readonly Node[], iterable: (it: unknown) => boolean): string[] {
  const out: string[] = [];
  for (const n of nodes) {
    if (n.type !== 'For' || !iterable(n['iterable'])) continue;
    const v = n['loopvar'];
    if (isNode(v) && v.type === 'Identifier') out.push(v['value'] as string);
  }
  return out;
}

/**
 * vLLM's `--chat-template-content-format auto` (vllm/renderers/hf.py `_detect_content_format`): `openai` when the
 * template has a `{% for part in message['content'] %}` loop over a variable that iterates `messages` (or a variable
 * assigned from it), else `string`. Also returns every identifier the template mentions.
 */
export function contentFormatOf(program: unknown): { format: ContentFormat; names: Set<string> } {
  const nodes = [...walk(program)];
  const names = new Set<string>();
  for (const n of nodes) if (n.type === 'Identifier') names.add(n['value'] as string);
  const messageLists = aliases(nodes, 'messages');
  const messageVars = loopVarsOver(nodes, (it) => messageLists.some((m) => accesses(it, m)));
  const partLoops = loopVarsOver(nodes, (it) => messageVars.some((m) => accesses(it, m, 'content')));
  return { format: partLoops.length > 0 ? 'openai' : 'string', names };
}
