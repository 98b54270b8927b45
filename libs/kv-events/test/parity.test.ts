import { join } from 'node:path';
import { VllmBlockHasher, loadTokenizer, tokenizePrompt, type ModelTokenizer, type VllmHashAlgo } from '../src';
import fixtures from './parity/parity-fixtures.json';
import spec from './parity/cases.json';
import { TOKENIZER_FILES } from './parity/tokenizer-files';

/**
 * Triad's local tokenization and hashing against the references in parity-fixtures.json (written by
 * make_parity_fixtures.py: Python jinja2 as transformers calls it, Hugging Face's Rust tokenizers, vLLM's hash chain
 * in Python). Rendered text, token ids, multimodal placements and block hashes must be equal byte for byte.
 */
interface Case {
  name: string;
  model: string;
  tokenizer?: 'qwen' | 'llama3';
  messages?: unknown[];
  prompt?: string;
  tools?: unknown[];
  documents?: unknown[];
  add_generation_prompt?: boolean;
  continue_final_message?: boolean;
  chat_template_kwargs?: Record<string, unknown>;
  hashing?: { blockSize: number; algo: VllmHashAlgo; seed: string; lora?: string; cacheSalt?: string };
}
interface Fixture {
  name: string;
  text: string;
  ids?: number[];
  mm?: { identifier: string; offset: number; length: number }[];
  blocks?: string[];
}

const root = join(__dirname, '..', '..', '..');
// Command-A's documents template is checked as rendered text; its tokenizer is not shipped here.
const TEXT_ONLY = join(root, 'infra/tokenizers/bert-base-uncased/tokenizer.json');

const loaded = new Map<string, ModelTokenizer>();
function tokenizerFor(c: Case): ModelTokenizer {
  const key = `${c.tokenizer ?? '-'}:${c.model}`;
  let t = loaded.get(key);
  if (!t) {
    t = loadTokenizer(c.tokenizer ? TOKENIZER_FILES[c.tokenizer] : TEXT_ONLY, { configDir: join(__dirname, 'parity/models', c.model) });
    loaded.set(key, t);
  }
  return t;
}

function bodyOf(c: Case): Record<string, unknown> {
  const { name: _n, model: _m, tokenizer: _t, hashing: _h, ...rest } = c as Case & Record<string, unknown>;
  for (const k of ['imagePadId', 'hybridGroups']) delete rest[k];
  return rest;
}

const cases = (spec as { cases: Case[] }).cases;
const byName = new Map((fixtures as { fixtures: Fixture[] }).fixtures.map((f) => [f.name, f]));

describe('local tokenization equals the reference byte for byte', () => {
  it.each(cases.map((c) => [c.name, c] as const))('%s', (_name, c) => {
    const expected = byName.get(c.name) as Fixture;
    const t = tokenizerFor(c);
    const body = bodyOf(c);
    if (c.messages) expect(t.renderChat?.(body).text).toBe(expected.text);
    if (!expected.ids) return;
    const prompt = tokenizePrompt(t, body);
    expect(prompt.ids).toEqual(expected.ids);
    expect(prompt.mm).toEqual(expected.mm ?? []);
    const h = c.hashing;
    if (!h) return;
    const hasher = new VllmBlockHasher({ algo: h.algo, seed: h.seed, blockSize: h.blockSize });
    const extra = { ...(h.lora ? { loraName: h.lora } : {}), ...(h.cacheSalt ? { cacheSalt: h.cacheSalt } : {}), mm: prompt.mm };
    expect(hasher.digests(prompt.ids, extra).map((d) => Buffer.from(d).toString('hex'))).toEqual(expected.blocks);
  });
});

describe('images without a uuid', () => {
  const vl = cases.find((c) => JSON.stringify(c.messages ?? []).includes('"uuid"')) as Case;
  const withoutUuids = (): Record<string, unknown> => {
    const body = bodyOf(vl);
    body['messages'] = JSON.parse(JSON.stringify(body['messages']), (k, v: unknown) => (k === 'uuid' ? undefined : v)) as unknown;
    return body;
  };

  it('get no keys from the gateway (vLLM names them by their pixels)', () => {
    expect(() => tokenizePrompt(tokenizerFor(vl), withoutUuids())).toThrow(/without a uuid/);
  });

  it('are placed as with uuids and named by the engine’s hash when an engine tokenizes', () => {
    const expected = byName.get(vl.name) as Fixture;
    const prompt = tokenizePrompt(tokenizerFor(vl), withoutUuids(), { imageHash: (part) => `engine:${part.url.length}` });
    expect(prompt.ids).toEqual(expected.ids);
    expect(prompt.mm.map((m) => ({ offset: m.offset, length: m.length }))).toEqual(
      (expected.mm ?? []).map((m) => ({ offset: m.offset, length: m.length })),
    );
    expect(prompt.mm.every((m) => m.identifier.startsWith('engine:'))).toBe(true);
  });
});
