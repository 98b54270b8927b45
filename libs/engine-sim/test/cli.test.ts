import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { EventStream, VllmBlockHasher, decodeKvEventBatch, loadTokenizer } from '@triad/kv-events';
import { waitFor } from '@triad/testing';
import { CHAT, get, post } from './helpers';

const TRIAD = join(__dirname, '..', '..', '..', 'apps', 'cli', 'bin', 'triad.js');

interface Ready {
  readonly url: string;
  readonly bootstrapPort?: number;
  readonly ecControlAddresses?: string[];
  readonly encoderBootstrapPort?: number;
  readonly kvEvents?: { endpoint: string; replayEndpoint?: string }[];
}

/** Runs `triad sim-engine ...` and resolves with the ready line it logs. */
async function startCli(args: readonly string[], children: ChildProcess[], env: NodeJS.ProcessEnv = process.env): Promise<Ready> {
  const child = spawn(process.execPath, [TRIAD, 'sim-engine', ...args], { stdio: ['ignore', 'pipe', 'pipe'], env });
  children.push(child);
  for await (const line of createInterface({ input: child.stdout })) {
    const msg = JSON.parse(line) as {
      msg?: string;
      url?: string;
      bootstrapPort?: number;
      encoderBootstrapPort?: number;
      ecControlAddresses?: string[];
      kvEvents?: { endpoint: string; replayEndpoint?: string }[];
    };
    if (msg.msg === 'sim-engine ready') {
      const { url, bootstrapPort, encoderBootstrapPort, ecControlAddresses, kvEvents } = msg;
      return {
        url: url!,
        ...(bootstrapPort ? { bootstrapPort } : {}),
        ...(encoderBootstrapPort ? { encoderBootstrapPort } : {}),
        ...(ecControlAddresses ? { ecControlAddresses } : {}),
        ...(kvEvents ? { kvEvents } : {}),
      };
    }
  }
  throw new Error('triad sim-engine exited before it was ready');
}

describe('triad sim-engine (CLI)', () => {
  const children: ChildProcess[] = [];

  afterAll(async () => {
    await Promise.all(
      children
        .filter((c) => c.exitCode === null && c.signalCode === null)
        .map(async (c) => {
          c.kill('SIGTERM');
          await once(c, 'exit');
        }),
    );
  });

  it('serves a vLLM engine with the flags applied, and exits 0 on SIGTERM', async () => {
    const { url } = await startCli(
      [
        '--engine',
        'vllm',
        '--role',
        'both',
        '--host',
        '127.0.0.15',
        '--port',
        '0',
        '--model',
        'cli-model',
        '--admin',
        '--fault',
        'error500:1',
        '--lora',
        'a1',
        'a2',
        '--dp-size',
        '2',
      ],
      children,
    );
    expect(url).toMatch(/^http:\/\/127\.0\.0\.15:\d+$/);
    expect((await post(`${url}/v1/chat/completions`, { model: 'cli-model', messages: CHAT })).status).toBe(500);
    expect((await post(`${url}/v1/chat/completions`, { model: 'cli-model', messages: CHAT, max_tokens: 2 })).json()).toMatchObject({
      model: 'cli-model',
      usage: { completion_tokens: 2 },
    });
    expect((await get(`${url}/v1/models`)).json<{ data: { id: string }[] }>().data.map((m) => m.id)).toEqual(['cli-model', 'a1', 'a2']);
    expect((await get(`${url}/metrics`)).text).toContain('vllm:num_requests_running{model_name="cli-model",engine="1"} 0.0');
    expect((await get(`${url}/admin/counters`)).json()).toMatchObject({ faultsInjected: 1 });
    const child = children[0];
    child.kill('SIGTERM');
    const [code] = (await once(child, 'exit')) as [number | null];
    expect(code).toBe(0);
  });

  it('serves a SGLang prefill with its bootstrap server', async () => {
    const { url, bootstrapPort } = await startCli(
      ['--engine', 'sglang', '--role', 'prefill', '--port', '0', '--bootstrap-port', '0'],
      children,
    );
    expect(bootstrapPort).toBeGreaterThan(0);
    expect((await get(`http://127.0.0.1:${bootstrapPort}/health`)).text).toBe('OK');
    expect((await post(`${url}/generate`, { text: 'hi' })).status).toBe(400);
  });

  it('serves a vLLM Mooncake EC consumer that accepts embeds parts and logs its control addresses', async () => {
    const { url, ecControlAddresses } = await startCli(
      [
        '--engine',
        'vllm',
        '--role',
        'both',
        '--host',
        '127.0.0.16',
        '--port',
        '0',
        '--ec-connector',
        'mooncake',
        '--ec-control-port',
        '0',
        '--dp-size',
        '2',
        '--enable-mm-embeds',
        '--ec-push-wait-timeout-ms',
        '50',
      ],
      children,
    );
    const address = expect.stringMatching(/^tcp:\/\/127\.0\.0\.16:\d+$/);
    expect(ecControlAddresses).toEqual([address, address]);
    // A metadata reference whose push never comes: the consumer waits (50 ms here) and fails the request.
    const ref = { type: 'image_embeds', image_embeds: { image_grid_thw: [1, 32, 32] }, uuid: 'cli-cat' };
    expect((await post(`${url}/v1/chat/completions`, { messages: [{ role: 'user', content: [ref] }], max_tokens: 1 })).status).toBe(500);
  });

  it('serves a SGLang language-only prefill with its encoder registry listener and options', async () => {
    const args = [
      '--engine',
      'sglang',
      '--role',
      'prefill',
      '--host',
      '127.0.0.30',
      '--port',
      '0',
      '--bootstrap-port',
      '0',
      '--language-only',
      '--encoder-bootstrap-port',
      '0',
      '--encoder-health-check-interval-ms',
      '0',
      '--no-vision-tower',
      '--dp-size',
      '2',
      '--load-balance-method',
      'round_robin',
    ];
    const { url, encoderBootstrapPort } = await startCli(args, children);
    expect(encoderBootstrapPort).toBeGreaterThan(0);
    expect((await get(`http://127.0.0.30:${encoderBootstrapPort}/list_encoder_urls`)).json()).toEqual({ encoder_urls: [] });
    const info = (await get(`${url}/server_info`)).json();
    expect(info).toMatchObject({ language_only: true, encoder_bootstrap_port: encoderBootstrapPort, dp_size: 2 });
    expect(info).toMatchObject({ load_balance_method: 'round_robin' });
    const image = { type: 'image_url', image_url: { url: 'https://example.com/a.png' } };
    const messages = [{ role: 'user', content: [image] }];
    const res = await post(`${url}/v1/chat/completions`, { messages, bootstrap_room: 1, max_tokens: 1 });
    expect(res.status).toBe(500);
  });

  it('publishes KV events with --kv-events-config, hashing with --tokenizer, --block-size, the hash algo and PYTHONHASHSEED', async () => {
    const tokenizer = join(__dirname, '..', '..', '..', 'infra', 'tokenizers', 'bert-base-uncased');
    const { url, kvEvents } = await startCli(
      [
        '--engine',
        'vllm',
        '--host',
        '127.0.0.17',
        '--port',
        '0',
        '--tokenizer',
        tokenizer,
        '--block-size',
        '4',
        '--prefix-caching-hash-algo',
        'xxhash',
        '--kv-capacity-tokens',
        '4096',
        '--kv-events-config',
        '{"enable_kv_cache_events": true, "publisher": "zmq", "endpoint": "tcp://*:0", "replay_endpoint": "tcp://*:0"}',
      ],
      children,
      { ...process.env, PYTHONHASHSEED: '42' },
    );
    expect(kvEvents?.[0]?.endpoint).toMatch(/^tcp:\/\/127\.0\.0\.17:\d+$/);
    expect(kvEvents?.[0]?.replayEndpoint).toMatch(/^tcp:\/\/127\.0\.0\.17:\d+$/);
    const stored: string[] = [];
    let connected = false;
    const stream = new EventStream(
      { endpoint: kvEvents?.[0]?.endpoint as string },
      {
        onMessage: (m) => stored.push(...decodeKvEventBatch(m.payload).events.flatMap((e) => (e.type === 'stored' ? e.hashes : []))),
        onMalformed: () => undefined,
        onConnection: (up) => (connected = up),
      },
    );
    try {
      await waitFor(() => connected, { what: 'the subscriber to connect' });
      const prompt = 'the router reads what the engine holds, block by block, and sends the prompt where its prefix is';
      expect((await post(`${url}/v1/completions`, { prompt, max_tokens: 1 })).status).toBe(200);
      const keys = new VllmBlockHasher({ algo: 'xxhash', seed: '42', blockSize: 4 }).keys(loadTokenizer(tokenizer).encode(prompt, true));
      await waitFor(() => stored.length === keys.length, { what: "the prompt's blocks" });
      expect(stored).toEqual(keys);
    } finally {
      stream.close();
    }
  });

  it("refuses --kv-events-config without --tokenizer, and a config that is not the engines' JSON", async () => {
    for (const [config, why] of [
      ['{"publisher":"zmq"}', 'needs --tokenizer'],
      ['{"publisher":"kafka"}', 'only zmq'],
      ['nope', 'not JSON'],
    ]) {
      const child = spawn(process.execPath, [TRIAD, 'sim-engine', '--engine', 'vllm', '--kv-events-config', config], {
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      children.push(child);
      let stderr = '';
      child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
      const [code] = (await once(child, 'exit')) as [number | null];
      expect(code).not.toBe(0);
      expect(stderr).toContain(why);
    }
  });

  it('rejects an unknown role with a usage error', async () => {
    const child = spawn(process.execPath, [TRIAD, 'sim-engine', '--engine', 'vllm', '--role', 'router'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    children.push(child);
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const [code] = (await once(child, 'exit')) as [number | null];
    expect(code).not.toBe(0);
    expect(stderr).toContain('router');
  });
});
