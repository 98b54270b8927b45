import { copyFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { EndpointRecord } from '@triad/bus';
import { startSimEngine, type SimEngineHandle } from '@triad/engine-sim';
import { VllmBlockHasher, loadTokenizer, sglangBlockKeys } from '@triad/kv-events';
import type { KvHashOptions } from '@triad/scheduling';
import { KvBlockHashing, type KvKeyRequest, type TokenizeOutcome, type TokenizeSource } from './kv-block-hashes';
import { TokenizerEndpoints } from './tokenizer-endpoints';

const shipped = resolve(__dirname, '../../../../infra/tokenizers/bert-base-uncased');
const warnings: string[] = [];
const logger = { warn: (_o: object, msg?: string) => void warnings.push(msg ?? '') };
const base: KvHashOptions = {
  blockSize: 4,
  maxBlocksToMatch: 128,
  hashAlgo: 'sha256_cbor',
  hashSeed: '0',
  tokenizers: [{ model: 'm', path: shipped }],
  engineTokenization: { timeoutMs: 5_000, maxInFlight: 64, cacheEntries: 16 },
  engineByDefault: false,
};
const prompt = 'The quick brown fox jumps over the lazy dog while the router counts its tokens carefully.';
const req = (body: Record<string, unknown>, over: Partial<KvKeyRequest> = {}): KvKeyRequest => ({
  engine: 'vLLM',
  server: 'ns/srv',
  model: 'm',
  body,
  lora: undefined,
  ...over,
});

class Observed {
  readonly seen: [TokenizeSource, TokenizeOutcome][] = [];
  tokenized(source: TokenizeSource, outcome: TokenizeOutcome): void {
    this.seen.push([source, outcome]);
  }
}

function endpointAt(ip: string, port: number): TokenizerEndpoints {
  const endpoints = new TokenizerEndpoints();
  const record = { namespace: 'ns', modelServer: 'srv', pod: 'p0', role: 'aggregated', ip, port, ready: true } as unknown as EndpointRecord;
  endpoints.apply({ key: 'ns.srv.p0', op: 'PUT', value: record, revision: 1 });
  return endpoints;
}

describe('gateway KV block keys', () => {
  let dir: string;
  let sim: SimEngineHandle;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'triad-tok-'));
    copyFileSync(join(shipped, 'tokenizer.json'), join(dir, 'tokenizer.json'));
    writeFileSync(
      join(dir, 'tokenizer_config.json'),
      JSON.stringify({
        chat_template:
          '{% for m in messages %}<{{ m.role }}>{{ m.content }}\n{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}',
      }),
    );
    // A simulated vLLM with the same tokenizer: its /tokenize answers what the gateway asks the engine.
    sim = await startSimEngine({
      latencyProfile: 'zero',
      model: 'm',
      engine: 'vllm',
      role: 'both',
      host: '127.0.0.1',
      kvEvents: { endpoint: 'tcp://127.0.0.1:*', tokenizer: dir, blockSize: 4, hashAlgo: 'sha256_cbor' },
    });
  });
  afterAll(async () => {
    await sim?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('tokenizes a completion prompt with the local tokenizer and hashes it as vLLM and SGLang do', async () => {
    const hashing = new KvBlockHashing(logger);
    hashing.configure(base);
    const tokens = loadTokenizer(shipped).encode(prompt, true);
    const expected = new VllmBlockHasher({ algo: 'sha256_cbor', seed: '0', blockSize: 4 }).keys(tokens);
    expect(expected.length).toBeGreaterThan(2);
    expect(await hashing.keys(req({ prompt }))).toEqual(expected);
    expect(await hashing.keys(req({ prompt }, { engine: 'SGLang' }))).toEqual(sglangBlockKeys(tokens, 4));
    // LoRA requests hash with the adapter name as an extra key: different keys from block 0 on.
    expect((await hashing.keys(req({ prompt }, { lora: 'sql-lora' })))?.[0]).not.toBe(expected[0]);
  });

  it("renders chat messages with the model's chat template", async () => {
    const hashing = new KvBlockHashing(logger);
    hashing.configure({ ...base, tokenizers: [{ model: '*', path: dir }] });
    const messages = [{ role: 'user', content: prompt }];
    const t = loadTokenizer(dir);
    const tokens = t.encode(t.renderChat?.({ messages }).text ?? '', false);
    expect(await hashing.keys(req({ messages }, { model: 'any' }))).toEqual(
      new VllmBlockHasher({ algo: 'sha256_cbor', seed: '0', blockSize: 4 }).keys(tokens),
    );
  });

  it("asks the engine's /tokenize, caches the answer by what the engine renders, and agrees with the local tokenizer", async () => {
    const observed = new Observed();
    const local = new KvBlockHashing(logger);
    local.configure({ ...base, tokenizers: [{ model: 'm', path: dir }] });
    const hashing = new KvBlockHashing(logger, endpointAt('127.0.0.1', sim.port), observed);
    hashing.configure({ ...base, tokenizers: [{ modelServer: 'ns/srv', path: dir, source: 'engine' }] });
    const messages = [{ role: 'user', content: prompt }];
    const expected = await local.keys(req({ messages }));
    expect(await hashing.keys(req({ messages, temperature: 0.1 }))).toEqual(expected);
    // Same rendering (sampling fields differ): answered from the cache, no second call.
    expect(await hashing.keys(req({ messages, temperature: 0.9 }))).toEqual(expected);
    expect(observed.seen).toEqual([
      ['engine', 'ok'],
      ['cache', 'ok'],
    ]);
    expect(sim.requests().filter((r) => r.path === '/tokenize')).toHaveLength(1);
  });

  it("uses vLLM's render endpoint when configured", async () => {
    const hashing = new KvBlockHashing(logger, endpointAt('127.0.0.1', sim.port));
    hashing.configure({ ...base, tokenizers: [{ model: '*', source: 'engine-only', vllmEndpoint: 'render' }], engineByDefault: false });
    const expected = new VllmBlockHasher({ algo: 'sha256_cbor', seed: '0', blockSize: 4 }).keys(loadTokenizer(dir).encode(prompt, true));
    expect(await hashing.keys(req({ prompt }))).toEqual(expected);
    expect(sim.requests().some((r) => r.path === '/v1/completions/render')).toBe(true);
  });

  it('falls back to the local tokenizer when the engine does not answer, and skips prompts shorter than a block', async () => {
    const observed = new Observed();
    // Nothing listens on port 1 of 127.0.0.2: the call fails at once.
    const hashing = new KvBlockHashing(logger, endpointAt('127.0.0.2', 1), observed);
    hashing.configure({ ...base, tokenizers: [{ model: 'm', path: shipped, source: 'engine' }] });
    const expected = new VllmBlockHasher({ algo: 'sha256_cbor', seed: '0', blockSize: 4 }).keys(
      loadTokenizer(shipped).encode(prompt, true),
    );
    expect(await hashing.keys(req({ prompt }))).toEqual(expected);
    expect(await hashing.keys(req({ prompt: 'hi' }))).toBeUndefined();
    expect(observed.seen).toEqual([
      ['engine', 'fallback'],
      ['local', 'short'],
    ]);
    // engine-only: no fallback, no keys.
    hashing.configure({ ...base, tokenizers: [{ model: 'm', source: 'engine-only' }] });
    expect(await hashing.keys(req({ prompt }))).toBeUndefined();
  });

  it('caps engine calls in flight per ModelServer: past the cap the local tokenizer answers at once', async () => {
    const observed = new Observed();
    const hashing = new KvBlockHashing(logger, endpointAt('127.0.0.1', sim.port), observed);
    hashing.configure({
      ...base,
      tokenizers: [{ model: 'm', path: shipped, source: 'engine' }],
      engineTokenization: { timeoutMs: 5_000, maxInFlight: 1, cacheEntries: 0 },
    });
    const [a, b] = await Promise.all([hashing.keys(req({ prompt })), hashing.keys(req({ prompt: `${prompt} again` }))]);
    expect(a).toBeDefined();
    expect(b).toBeDefined();
    expect(observed.seen.map((s) => s.join(':')).sort()).toEqual(['engine:busy', 'engine:ok'].sort());
  });

  it("Kthena's kvcache-aware tokenizes every model with its engine; nothing is computed without a config", async () => {
    const hashing = new KvBlockHashing(logger, endpointAt('127.0.0.1', sim.port));
    expect(await hashing.keys(req({ prompt }))).toBeUndefined();
    hashing.configure({ ...base, tokenizers: [], engineByDefault: true, vllmTokenizerPort: sim.port });
    expect(await hashing.keys(req({ prompt }))).toHaveLength(
      new VllmBlockHasher({ algo: 'sha256_cbor', seed: '0', blockSize: 4 }).keys(loadTokenizer(dir).encode(prompt, true)).length,
    );
    hashing.configure({ ...base, tokenizers: [] });
    expect(await hashing.keys(req({ prompt }))).toBeUndefined();
  });

  it('computes nothing it cannot reproduce: media without a uuid, a missing tokenizer file', async () => {
    const hashing = new KvBlockHashing(logger);
    hashing.configure({ ...base, tokenizers: [{ model: 'm', path: dir }] });
    const image = { type: 'image_url', image_url: { url: 'http://example.invalid/x.png' } };
    expect(await hashing.keys(req({ messages: [{ role: 'user', content: [image, { type: 'text', text: prompt }] }] }))).toBeUndefined();
    hashing.configure({ ...base, tokenizers: [{ model: 'm', path: '/nonexistent/tokenizer.json' }] });
    expect(await hashing.keys(req({ prompt }))).toBeUndefined();
    expect(warnings.some((w) => w.includes('tokenizer unavailable'))).toBe(true);
  });
});
