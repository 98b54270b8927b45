import { SeededRandom } from './seeded-random';

// Structure-aware fuzzing of OpenAI request bodies: start from a valid chat or completions body, then mutate it
// the ways clients and attackers get it wrong — wrong types, missing, huge or deeply nested fields, bad media parts,
// odd unicode, unknown and engine-internal fields, broken JSON — so a gateway can be checked to answer each with a
// 200 or an OpenAI-shaped 4xx, never a 5xx or a crash. Deterministic per seed.

/** One fuzzed request. */
export interface FuzzCase {
  readonly index: number;
  readonly path: '/v1/chat/completions' | '/v1/completions';
  /** The request body as sent (bytes: some cases are not valid UTF-8). */
  readonly body: Buffer;
  /** `content-type` to send (absent: none). */
  readonly contentType: string | undefined;
  /** What was done to the valid body, for the failure message. */
  readonly mutations: readonly string[];
}

export interface FuzzOptions {
  /** Model names the valid bodies use (the gateway serves them); an unknown one is mixed in by the mutations. */
  readonly models: readonly string[];
  /** Models whose bodies carry media parts (EPD). */
  readonly multimodalModels?: readonly string[];
}

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type Container = Json[] | { [key: string]: Json };

const UNICODE = [
  '\u0000',
  '\ud83d\ude00',
  '\u202e',
  '\u200b\u200d',
  '\ufeff',
  'Ω≈ç√∫',
  '𝕋𝕣𝕚𝕒𝕕',
  'ｆｕｌｌｗｉｄｔｈ',
  '\ud800',
  '\udfff',
  '\u0085\u2028\u2029',
  'e\u0301',
  '\\',
  '"',
  '</script>',
  '%00',
  '{{7*7}}',
  '${jndi:x}',
];

/**
 * A value nested `depth` levels deep. It stands in the tree as a marker string and is expanded in the text
 * (`expandNesting`), since building and serializing thousands of levels as objects would overflow the stack here.
 */
function nested(depth: number, _leaf: Json, asArray: boolean): Json {
  return `@@nest:${depth}:${asArray ? 'a' : 'o'}@@`;
}

function expandNesting(text: string): string {
  return text.replace(/"@@nest:(\d+):([ao])@@"/g, (_m, n: string, kind: string) => {
    const depth = Number(n);
    return kind === 'a' ? `${'['.repeat(depth)}"deep"${']'.repeat(depth)}` : `${'{"a":'.repeat(depth)}"deep"${'}'.repeat(depth)}`;
  });
}

/** A value of a random wrong or extreme kind. */
function oddValue(rng: SeededRandom): Json {
  switch (rng.int(16)) {
    case 0:
      return null;
    case 1:
      return rng.chance(0.5);
    case 2:
      return rng.pick([0, -1, 1.5, 1e308, -1e308, 2 ** 53 + 1, 4294967296, Number.MIN_VALUE]);
    case 3:
      return '';
    case 4:
      return rng.pick(UNICODE).repeat(1 + rng.int(64));
    case 5:
      return 'x'.repeat(rng.pick([1024, 65_536, 300_000, 11 * 1024 * 1024]));
    case 6:
      return [];
    case 7:
      return {};
    case 8:
      return nested(rng.pick([10, 63, 65, 200]), 'deep', rng.chance(0.5));
    case 9:
      return Array.from({ length: rng.pick([100, 2000]) }, (_, i) => i);
    case 10:
      return { role: 'user', content: 'nested message' };
    case 11:
      return [{ type: 'text', text: 'a part' }];
    case 12:
      return rng.pick(['NaN', 'Infinity', '-0', '1e999', 'true', 'null']);
    case 13:
      return JSON.parse('{"__proto__":{"polluted":1},"constructor":{"prototype":1}}') as Json;
    case 14:
      return rng.pick(UNICODE);
    default:
      return -rng.int(1000);
  }
}

const IMAGE_PNG = 'data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==';

/** A media part, valid or broken in one of the ways clients break them. */
function mediaPart(rng: SeededRandom): Json {
  switch (rng.int(14)) {
    case 0:
      return { type: 'image_url', image_url: { url: `https://example.com/${rng.int(1e6)}.png` } };
    case 1:
      return { type: 'image_url', image_url: { url: IMAGE_PNG } };
    case 2:
      return { type: 'image_url' };
    case 3:
      return { type: 'image_url', image_url: oddValue(rng) };
    case 4:
      return { type: 'image_url', image_url: { url: oddValue(rng) } };
    case 5:
      return { type: 'image_url', image_url: { url: 'data:image/png;base64,!!!not-base64!!!' } };
    case 6:
      return { type: 'image_url', image_url: { url: 'data:;base64,' } };
    case 7:
      return { type: 'input_audio', input_audio: { data: 'AAAA', format: rng.pick(['wav', 'mp3', 'ogg', '']) } };
    case 8:
      return { type: 'audio_url', audio_url: { url: 'https://example.com/a.wav' } };
    case 9:
      return { type: 'video_url', video_url: { url: oddValue(rng) } };
    case 10:
      return { type: rng.pick(['image', 'file', 'IMAGE_URL', '', 'text ']), image_url: { url: 'https://example.com/x.png' } };
    case 11:
      return { type: 'text' };
    case 12:
      return { type: 'text', text: oddValue(rng) };
    default:
      return { type: 'image_url', image_url: { url: `https://example.com/${rng.int(1e6)}.png`, detail: oddValue(rng) } };
  }
}

function validBody(rng: SeededRandom, opts: FuzzOptions): { path: FuzzCase['path']; body: { [key: string]: Json } } {
  const model = rng.pick(opts.models);
  const stream = rng.chance(0.4);
  const base: { [key: string]: Json } = { model, max_tokens: 1 + rng.int(8), ...(stream ? { stream: true } : {}) };
  if (rng.chance(0.2)) return { path: '/v1/completions', body: { ...base, prompt: `complete ${rng.int(1e6)}` } };
  const multimodal = opts.multimodalModels?.includes(model) === true;
  const content: Json = multimodal
    ? [{ type: 'text', text: 'describe' }, ...Array.from({ length: 1 + rng.int(3) }, () => mediaPart(rng))]
    : rng.chance(0.5)
      ? `hello ${rng.int(1e6)}`
      : [{ type: 'text', text: `hello ${rng.int(1e6)}` }];
  const messages: Json[] = [{ role: 'user', content }];
  if (rng.chance(0.3)) messages.unshift({ role: 'system', content: 'be brief' });
  if (rng.chance(0.2)) messages.push({ role: 'assistant', content: 'ok' }, { role: 'user', content: 'again' });
  const body: { [key: string]: Json } = { ...base, messages };
  if (rng.chance(0.3)) body['temperature'] = rng.next();
  if (rng.chance(0.1)) body['stream_options'] = { include_usage: rng.chance(0.5) };
  return { path: '/v1/chat/completions', body };
}

/** Every container in the body with the key (or index) to reach each of its children. */
function slots(root: Container): { parent: Container; key: string | number; path: string }[] {
  const out: { parent: Container; key: string | number; path: string }[] = [];
  const walk = (node: Container, path: string, depth: number) => {
    if (depth > 6) return;
    const entries: [string | number, Json][] = Array.isArray(node) ? node.map((v, i) => [i, v]) : Object.entries(node);
    for (const [key, value] of entries) {
      const here = `${path}.${key}`;
      out.push({ parent: node, key, path: here });
      if (value !== null && typeof value === 'object') walk(value, here, depth + 1);
    }
  };
  walk(root, '$', 0);
  return out;
}

function setAt(parent: Container, key: string | number, value: Json): void {
  (parent as Record<string | number, Json>)[key] = value;
}

function removeAt(parent: Container, key: string | number): void {
  if (Array.isArray(parent)) parent.splice(key as number, 1);
  else delete parent[key as string];
}

const EXTRA_FIELDS: readonly [string, () => Json][] = [
  ['n', () => 1000],
  ['kv_transfer_params', () => ({ do_remote_prefill: true, remote_host: '10.0.0.1' })],
  ['bootstrap_room', () => 2 ** 63],
  ['bootstrap_host', () => '169.254.169.254'],
  ['routed_dp_rank', () => 99],
  ['ec_transfer_params', () => ({ x: 1 })],
  ['lora_name', () => '../../etc/passwd'],
  ['logprobs', () => true],
  ['top_logprobs', () => 1000],
  ['tools', () => [{ type: 'function' }]],
  ['response_format', () => ({ type: 'json_schema' })],
  ['max_completion_tokens', () => -5],
  ['stop', () => Array.from({ length: 100 }, () => 'x')],
  ['seed', () => 2 ** 70],
];

/** One mutation of the parsed body; returns its description. */
function mutateTree(rng: SeededRandom, body: { [key: string]: Json }): string {
  const all = slots(body);
  switch (rng.int(9)) {
    case 0: {
      const s = rng.pick(all);
      const v = oddValue(rng);
      setAt(s.parent, s.key, v);
      return `${s.path} = ${JSON.stringify(v)?.slice(0, 40)}`;
    }
    case 1: {
      const s = rng.pick(all);
      removeAt(s.parent, s.key);
      return `delete ${s.path}`;
    }
    case 2: {
      const field = rng.pick(['model', 'messages', 'prompt', 'max_tokens', 'stream']);
      const v = oddValue(rng);
      body[field] = v;
      return `$.${field} = ${JSON.stringify(v)?.slice(0, 40)}`;
    }
    case 3: {
      const [name, value] = rng.pick(EXTRA_FIELDS);
      body[name] = value();
      return `add ${name}`;
    }
    case 4: {
      const messages = body['messages'];
      if (!Array.isArray(messages)) return 'no messages to grow';
      const n = rng.pick([65, 200, 1500]);
      // Fresh objects for every message: a later mutation that replaces a field of a shared one (with an 11 MiB
      // string, say) would repeat it in every message that shares it.
      const parts: (() => Json)[] = [
        () => ({ type: 'image_url', image_url: { url: 'https://example.com/1.png' } }),
        () => ({ type: 'image_url' }),
        () => ({ type: 'text', text: 'x' }),
        () => ({ type: 'audio_url', audio_url: { url: 7 } }),
      ];
      for (let i = 0; i < n; i++) messages.push({ role: rng.pick(['user', 'assistant']), content: [rng.pick(parts)()] });
      return `${n} media parts`;
    }
    case 5: {
      const messages = body['messages'];
      if (!Array.isArray(messages) || messages.length === 0) return 'no message to break';
      const m = messages[rng.int(messages.length)];
      if (m !== null && typeof m === 'object' && !Array.isArray(m)) {
        m['content'] = Array.from({ length: 1 + rng.int(4) }, () => mediaPart(rng));
        if (rng.chance(0.3)) m['role'] = oddValue(rng);
      }
      return 'bad media parts';
    }
    case 6: {
      body['model'] = rng.pick(['', 'no-such-model', 'x'.repeat(300), '../admin', 'fz\u0000agg', rng.pick(UNICODE)]);
      return `model ${JSON.stringify(body['model']).slice(0, 30)}`;
    }
    case 7: {
      const v = nested(rng.pick([64, 65, 1000, 20_000]), 'deep', rng.chance(0.5));
      const s = rng.pick(all);
      setAt(s.parent, s.key, v);
      return `${s.path} nested deeply`;
    }
    default: {
      body['messages'] = Array.from({ length: rng.pick([0, 1, 10_000]) }, () => ({ role: 'user', content: 'x' }));
      return `${body['messages'].length} messages`;
    }
  }
}

/** Mutations of the serialized text: invalid JSON, duplicate keys, encodings. */
function mutateText(rng: SeededRandom, text: string): { bytes: Buffer; what: string } {
  switch (rng.int(10)) {
    case 0: {
      const cut = rng.int(text.length);
      return { bytes: Buffer.from(text.slice(0, cut)), what: `truncated at ${cut}` };
    }
    case 1:
      return { bytes: Buffer.from(`\ufeff${text}`), what: 'BOM' };
    case 2:
      return { bytes: Buffer.from(text.replace(/}$/, ',}')), what: 'trailing comma' };
    case 3:
      return { bytes: Buffer.from(text.replace(/"/g, "'")), what: 'single quotes' };
    case 4:
      return { bytes: Buffer.from(text.replace(/^\{/, '{"model":"a","model":{"x":1},')), what: 'duplicate keys' };
    case 5: {
      const at = rng.int(text.length);
      const junk = Buffer.from(Array.from({ length: 1 + rng.int(8) }, () => rng.int(256)));
      return { bytes: Buffer.concat([Buffer.from(text.slice(0, at)), junk, Buffer.from(text.slice(at))]), what: `bytes at ${at}` };
    }
    case 6:
      return { bytes: Buffer.from(rng.pick(['', ' ', 'null', '[]', '"str"', '42', 'true', '{}', '[{}]', '{"a":'])), what: 'not an object' };
    case 7:
      return { bytes: Buffer.from(`${text}${text}`), what: 'two documents' };
    case 8:
      return { bytes: Buffer.from(text, 'utf16le'), what: 'UTF-16' };
    default:
      return { bytes: Buffer.from(`${'['.repeat(50_000)}${']'.repeat(50_000)}`), what: '50k brackets' };
  }
}

/** The `index`-th case of a fuzz run with `seed` (each case has its own stream, so a case replays alone). */
export function fuzzCase(seed: number, index: number, opts: FuzzOptions): FuzzCase {
  const rng = new SeededRandom((seed * 2654435761 + index * 40503) >>> 0);
  const { path, body } = validBody(rng, opts);
  const mutations: string[] = [];
  // One in eight bodies is left valid (a 200 is the answer there).
  const kind = rng.int(8);
  if (kind > 0) {
    const n = 1 + rng.int(3);
    for (let i = 0; i < n; i++) mutations.push(mutateTree(rng, body));
  }
  let bytes: Buffer = Buffer.from(expandNesting(JSON.stringify(body)));
  if (kind >= 6) {
    const m = mutateText(rng, bytes.toString());
    bytes = m.bytes;
    mutations.push(m.what);
  }
  const contentType = rng.chance(0.9)
    ? 'application/json'
    : rng.pick([undefined, 'text/plain', 'application/x-www-form-urlencoded', 'application/json; charset=latin1']);
  if (contentType !== 'application/json') mutations.push(`content-type ${contentType ?? 'none'}`);
  return { index, path, body: bytes, contentType, mutations };
}

/** What is wrong with the gateway's answer to a fuzz case (undefined: a 200, or an OpenAI-shaped 4xx). */
export function fuzzAnswerProblem(status: number, contentType: string | null, text: string): string | undefined {
  if (status === 200) {
    if (contentType?.startsWith('text/event-stream') === true) {
      if (text.includes('data: {"error"')) return 'a stream that ended with an error event';
      return text.endsWith('data: [DONE]\n\n') ? undefined : 'a stream without [DONE]';
    }
    try {
      JSON.parse(text);
      return undefined;
    } catch {
      return 'a 200 whose body is not JSON';
    }
  }
  if (status < 400 || status >= 500) return `status ${status}`;
  try {
    const err = (JSON.parse(text) as { error?: { message?: unknown; type?: unknown; code?: unknown; param?: unknown } }).error;
    const shaped =
      err !== undefined &&
      typeof err.message === 'string' &&
      typeof err.type === 'string' &&
      typeof err.code === 'string' &&
      (err.param === null || typeof err.param === 'string');
    return shaped ? undefined : `a ${status} that is not an OpenAI error`;
  } catch {
    return `a ${status} whose body is not JSON`;
  }
}

export interface FuzzReport {
  readonly seed: number;
  readonly sent: number;
  /** Answers by HTTP status (`transport` for none). */
  readonly byStatus: Readonly<Record<string, number>>;
  /** Cases whose answer was wrong, with what was wrong. */
  readonly problems: readonly {
    readonly index: number;
    readonly mutations: readonly string[];
    readonly problem: string;
    readonly excerpt: string;
  }[];
}

/** Sends `count` fuzz cases of `seed` to the gateway at `url`, `concurrency` at a time, and checks each answer. */
export async function runFuzz(
  url: string,
  seed: number,
  count: number,
  opts: FuzzOptions & { concurrency?: number; timeoutMs?: number },
): Promise<FuzzReport> {
  const byStatus: Record<string, number> = {};
  const problems: { index: number; mutations: readonly string[]; problem: string; excerpt: string }[] = [];
  let next = 0;
  const worker = async () => {
    while (next < count) {
      const c = fuzzCase(seed, next++, opts);
      let problem: string | undefined;
      try {
        const res = await fetch(`${url}${c.path}`, {
          method: 'POST',
          body: c.body,
          headers: c.contentType === undefined ? {} : { 'content-type': c.contentType },
          signal: AbortSignal.timeout(opts.timeoutMs ?? 30_000),
        });
        const text = await res.text();
        byStatus[res.status] = (byStatus[res.status] ?? 0) + 1;
        problem = fuzzAnswerProblem(res.status, res.headers.get('content-type'), text);
        if (problem !== undefined) problem += `: ${text.slice(0, 300)}`;
      } catch (err) {
        byStatus['transport'] = (byStatus['transport'] ?? 0) + 1;
        problem = `no answer: ${(err as Error).name} ${(err as Error).message}`;
      }
      if (problem !== undefined)
        problems.push({ index: c.index, mutations: c.mutations, problem, excerpt: c.body.subarray(0, 200).toString('latin1') });
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, opts.concurrency ?? 1) }, worker));
  return { seed, sent: count, byStatus, problems };
}
