import { copyFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { VllmBlockHasher, loadTokenizer, sglangBlockKeys } from '@triad/kv-events';
import { KvBlockHashing } from './kv-block-hashes';

const shipped = resolve(__dirname, '../../../../infra/tokenizers/bert-base-uncased');
const warnings: string[] = [];
const logger = { warn: (_o: object, msg?: string) => void warnings.push(msg ?? '') };
const options = {
  blockSize: 4,
  maxBlocksToMatch: 128,
  hashAlgo: 'sha256_cbor' as const,
  hashSeed: '0',
  tokenizers: [{ model: 'm', path: shipped }],
};
const prompt = 'The quick brown fox jumps over the lazy dog while the router counts its tokens carefully.';

describe('gateway KV block keys', () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'triad-tok-'));
    copyFileSync(join(shipped, 'tokenizer.json'), join(dir, 'tokenizer.json'));
    writeFileSync(
      join(dir, 'tokenizer_config.json'),
      JSON.stringify({
        chat_template:
          '{% for m in messages %}<{{ m.role }}>{{ m.content }}\n{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}',
      }),
    );
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('tokenizes a completion prompt with the shipped tokenizer and hashes it as vLLM does', () => {
    const hashing = new KvBlockHashing(logger);
    hashing.configure(options);
    const tokens = loadTokenizer(shipped).encode(prompt, true);
    expect(tokens[0]).toBe(101); // [CLS]: the tokenizer's special tokens are added, as vLLM's completions endpoint does
    const expected = new VllmBlockHasher({ algo: 'sha256_cbor', seed: '0', blockSize: 4 }).keys(tokens);
    expect(expected.length).toBeGreaterThan(2);
    expect(hashing.keys('vLLM', 'm', { prompt }, undefined)).toEqual(expected);
    expect(hashing.keys('SGLang', 'm', { prompt }, undefined)).toEqual(sglangBlockKeys(tokens, 4));
    // LoRA requests hash with the adapter name as an extra key: different keys from block 0 on.
    expect(hashing.keys('vLLM', 'm', { prompt }, 'sql-lora')?.[0]).not.toBe(expected[0]);
  });

  it("renders chat messages with the model's chat template", () => {
    const hashing = new KvBlockHashing(logger);
    hashing.configure({ ...options, tokenizers: [{ model: '*', path: dir }] });
    const messages = [{ role: 'user', content: prompt }];
    const t = loadTokenizer(dir);
    const tokens = t.encode(t.renderChat?.({ messages }).text ?? '', false);
    expect(hashing.keys('vLLM', 'any', { messages }, undefined)).toEqual(
      new VllmBlockHasher({ algo: 'sha256_cbor', seed: '0', blockSize: 4 }).keys(tokens),
    );
  });

  it('computes nothing it cannot reproduce: no config, no tokenizer, media parts, a missing file', () => {
    const hashing = new KvBlockHashing(logger);
    expect(hashing.keys('vLLM', 'm', { prompt }, undefined)).toBeUndefined();
    hashing.configure(options);
    expect(hashing.keys('vLLM', 'other', { prompt }, undefined)).toBeUndefined();
    expect(hashing.keys('vLLM', 'm', { messages: [{ role: 'user', content: 'hi' }] }, undefined)).toBeUndefined(); // no chat template
    hashing.configure({ ...options, tokenizers: [{ model: 'm', path: dir }] });
    expect(
      hashing.keys('vLLM', 'm', { messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'x' } }] }] }, undefined),
    ).toBeUndefined();
    hashing.configure({ ...options, tokenizers: [{ model: 'm', path: '/nonexistent/tokenizer.json' }] });
    expect(hashing.keys('vLLM', 'm', { prompt }, undefined)).toBeUndefined();
    expect(warnings.some((w) => w.includes('tokenizer unavailable'))).toBe(true);
  });
});
