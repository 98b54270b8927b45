import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Buckets, EndpointRecordSchema } from '@triad/bus';
import { startSimEngine, type SimEngineHandle } from '@triad/engine-sim';
import { startNatsServer, waitFor, type NatsServerHandle } from '@triad/testing';
import type { ObjectSource, SourceSink } from '../src/sources/source';
import { KvMirror, startTestWatcher, type TestWatcher } from './support/harness';
import { modelServer, pod } from './support/objects';

jest.setTimeout(30_000);

/** A source fed by the test (these tests are about scraping, not discovery). */
class ListSource implements ObjectSource {
  constructor(private readonly objects: readonly object[]) {}
  async start(sink: SourceSink): Promise<void> {
    for (const o of this.objects) sink.upsert(o);
  }
  async close(): Promise<void> {}
}

type StubMode = 'ok' | 'hang' | 'html' | 'http500';

/** A vLLM-like /metrics endpoint whose answers the test controls (timeouts, garbage, errors). */
async function startStub(host: string): Promise<{
  server: Server;
  port: number;
  set(mode: StubMode, running?: number): void;
  hits: () => number;
  maxConcurrent: () => number;
  /** When the first request of the current mode arrived (0: none yet). */
  firstHitOfMode: () => number;
}> {
  let mode: StubMode = 'ok';
  let running = 4;
  let hits = 0;
  let open = 0;
  let maxOpen = 0;
  let firstHitOfMode = 0;
  const server = createServer((req, res) => {
    if (req.url === '/v1/models') {
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"object":"list","data":[{"id":"stub-model"}]}');
      return;
    }
    hits += 1;
    if (firstHitOfMode === 0) firstHitOfMode = Date.now();
    open += 1;
    maxOpen = Math.max(maxOpen, open);
    let finished = false;
    const finish = () => {
      if (finished) return;
      finished = true;
      open -= 1;
    };
    res.on('close', finish);
    if (mode === 'hang') {
      // A request the scraper gave up on ends when its FIN is read ('close' follows in a later loop phase, after a
      // retry made right away may already have arrived: that would count two "open" without two in flight).
      req.socket.once('end', finish);
      return;
    }
    if (mode === 'http500') res.writeHead(500).end('boom');
    else if (mode === 'html') res.writeHead(200, { 'content-type': 'text/html' }).end('<html><body>502 Bad Gateway</body></html>');
    else
      res
        .writeHead(200, { 'content-type': 'text/plain' })
        .end(
          `# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{engine="0"} ${running}\nbroken line ` +
            `{\nvllm:num_requests_waiting{engine="0"} 1\n`,
        );
  });
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  return {
    server,
    port: (server.address() as AddressInfo).port,
    set: (m, r) => {
      mode = m;
      firstHitOfMode = 0;
      if (r !== undefined) running = r;
    },
    hits: () => hits,
    maxConcurrent: () => maxOpen,
    firstHitOfMode: () => firstHitOfMode,
  };
}

describe('scraping engine metrics', () => {
  let nats: NatsServerHandle;
  const sims: SimEngineHandle[] = [];
  let stub: Awaited<ReturnType<typeof startStub>>;
  let starting: Promise<TestWatcher> | undefined;
  let endpoints: KvMirror<typeof EndpointRecordSchema>;
  const record = (ms: string, p: string) => endpoints.get(`default.${ms}.${p}`);

  beforeAll(async () => {
    nats = await startNatsServer();
    // Two vLLM pods with two DP ranks each, on distinct loopback IPs and the same port, as pods in a cluster.
    const v0 = await startSimEngine({
      engine: 'vllm',
      role: 'both',
      host: '127.0.3.1',
      port: 0,
      dataParallel: 2,
      loraAdapters: ['lora-a'],
      latencyProfile: 'zero',
      latency: { decodeMsPerToken: 15 },
    });
    const v1 = await startSimEngine({
      engine: 'vllm',
      role: 'both',
      host: '127.0.3.2',
      port: v0.port,
      dataParallel: 2,
      latencyProfile: 'zero',
    });
    const sg = await startSimEngine({
      engine: 'sglang',
      role: 'both',
      host: '127.0.3.3',
      port: 0,
      dataParallel: 2,
      latencyProfile: 'zero',
      latency: { decodeMsPerToken: 15 },
    });
    sims.push(v0, v1, sg);
    stub = await startStub('127.0.3.4');
    const source = new ListSource([
      modelServer('vllm-agg', { mode: 'aggregated', port: v0.port, matchLabels: { app: 'vllm' } }),
      pod('v0', { app: 'vllm' }, { ip: '127.0.3.1' }),
      pod('v1', { app: 'vllm' }, { ip: '127.0.3.2' }),
      modelServer('sglang-agg', { engine: 'SGLang', mode: 'aggregated', port: sg.port, matchLabels: { app: 'sglang' } }),
      pod('s0', { app: 'sglang' }, { ip: '127.0.3.3' }),
      modelServer('stub', { mode: 'aggregated', port: stub.port, matchLabels: { app: 'stub' } }),
      pod('st0', { app: 'stub' }, { ip: '127.0.3.4' }),
    ]);
    starting = startTestWatcher({ nats: nats.url, source: 'kube', recordHeartbeatMs: 0 }, source);
    await starting;
    endpoints = await KvMirror.open(nats.url, Buckets.endpoints, EndpointRecordSchema);
  }, 60_000);

  afterAll(async () => {
    await endpoints?.close();
    await (await starting?.catch(() => undefined))?.close();
    await Promise.all(sims.map((s) => s.close()));
    await new Promise((r) => stub?.server.close(r));
    stub?.server.closeAllConnections();
    await nats?.close();
  });

  const chat = (url: string, maxTokens: number) =>
    fetch(`${url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'sim-model', messages: [{ role: 'user', content: 'hello' }], max_tokens: maxTokens, ignore_eos: true }),
    }).then((r) => r.text());

  it('sums running requests over DP ranks (vLLM engine="0","1") and lists LoRA adapters from /v1/models', async () => {
    // Each engine is scraped on its own: v1's first scrape may land after v0's.
    await waitFor(() => record('vllm-agg', 'v0')?.metrics.scrapedAt && record('vllm-agg', 'v1')?.metrics.scrapedAt, {
      what: 'first scrape of v0 and v1',
    });
    expect(record('vllm-agg', 'v0')?.models).toEqual(['sim-model', 'lora-a']);
    expect(record('vllm-agg', 'v1')?.models).toEqual(['sim-model']);
    // Three long requests go round-robin over two ranks (2 + 1): the last series alone would say 1.
    const done = Promise.all([chat(sims[0].url, 200), chat(sims[0].url, 200), chat(sims[0].url, 200)]);
    await waitFor(() => record('vllm-agg', 'v0')?.metrics.running === 3, { what: 'running = 3 across ranks' });
    await done;
    await waitFor(() => record('vllm-agg', 'v0')?.metrics.running === 0 && record('vllm-agg', 'v0')?.metrics.tpotMs !== undefined, {
      what: 'idle with latency means',
    });
    const m = record('vllm-agg', 'v0')!.metrics;
    expect(m.ttftMs).toBeGreaterThanOrEqual(0);
    expect(m.tpotMs).toBeGreaterThan(5);
    expect(m).toMatchObject({ stale: false, waiting: 0 });
    expect(m.lastError).toBeUndefined();
    // Idle scrapes keep the means but not their time: latencyAt stays where the last observation was.
    await waitFor(() => record('vllm-agg', 'v0')!.metrics.scrapedAt > m.scrapedAt, { what: 'a scrape after the requests' });
    const idle = record('vllm-agg', 'v0')!.metrics;
    expect(idle.latencyAt).toBeGreaterThan(0);
    await waitFor(() => record('vllm-agg', 'v0')!.metrics.scrapedAt > idle.scrapedAt, { what: 'an idle scrape' });
    expect(record('vllm-agg', 'v0')!.metrics).toMatchObject({ latencyAt: idle.latencyAt, tpotMs: idle.tpotMs });
    expect(idle.latencyAt).toBeLessThan(record('vllm-agg', 'v0')!.metrics.scrapedAt);
  });

  it('reads SGLang series (dp_rank) the same way', async () => {
    const done = Promise.all([chat(sims[2].url, 200), chat(sims[2].url, 200)]);
    await waitFor(() => record('sglang-agg', 's0')?.metrics.running === 2, { what: 'SGLang running = 2 across ranks' });
    await done;
    await waitFor(() => record('sglang-agg', 's0')?.metrics.tpotMs !== undefined, { what: 'SGLang TPOT mean' });
    expect(record('sglang-agg', 's0')).toMatchObject({ engine: 'SGLang', models: ['sim-model'], metrics: { stale: false } });
  });

  it('marks an endpoint stale with the error on timeout, garbage and HTTP errors, keeps its numbers and its record', async () => {
    await waitFor(() => record('stub', 'st0')?.metrics.running === 4, { what: 'stub scraped (malformed line skipped)' });
    expect(record('stub', 'st0')?.metrics.waiting).toBe(1);
    const good = record('stub', 'st0')!.metrics.scrapedAt;
    stub.set('hang');
    await waitFor(() => record('stub', 'st0')?.metrics.stale, { what: 'stale after a timeout' });
    expect(record('stub', 'st0')?.metrics).toMatchObject({ running: 4, waiting: 1, lastError: expect.stringContaining('within 400 ms') });
    // The time of the last good scrape: the one published, or a later one that changed nothing (so was not
    // rewritten), finished before the first hung request was sent.
    const kept = record('stub', 'st0')!.metrics.scrapedAt;
    expect(kept).toBeGreaterThanOrEqual(good);
    expect(kept).toBeLessThanOrEqual(stub.firstHitOfMode());
    stub.set('html');
    await waitFor(() => record('stub', 'st0')?.metrics.lastError?.includes('vllm:num_requests_running'), { what: 'garbage reported' });
    stub.set('http500');
    await waitFor(() => record('stub', 'st0')?.metrics.lastError?.includes('HTTP 500'), { what: 'HTTP 500 reported' });
    expect(record('stub', 'st0')).toMatchObject({ role: 'aggregated', ready: true });
    stub.set('ok', 7);
    await waitFor(() => record('stub', 'st0')?.metrics.running === 7 && !record('stub', 'st0')?.metrics.stale, { what: 'fresh again' });
    expect(record('stub', 'st0')?.metrics.lastError).toBeUndefined();
    const text = await (await fetch(`http://127.0.0.1:${(await starting!).opsPort}/metrics`)).text();
    expect(text).toMatch(/triad_podwatcher_scrape_errors_total\{what="metrics",reason="timeout"\} [1-9]/);
    expect(text).toMatch(/triad_podwatcher_scrape_errors_total\{what="metrics",reason="parse"\} [1-9]/);
    expect(text).toMatch(/triad_podwatcher_scrape_errors_total\{what="metrics",reason="http"\} [1-9]/);
  });

  it('never scrapes one engine twice at once, even when it hangs longer than the interval', async () => {
    stub.set('hang');
    const before = stub.hits();
    await waitFor(() => record('stub', 'st0')?.metrics.stale, { what: 'stale' });
    await waitFor(() => stub.hits() >= before + 3, { what: 'a few more attempts' });
    // Each attempt waits for the previous one's timeout (400 ms) before the next: at most one in flight.
    expect(stub.maxConcurrent()).toBe(1);
    stub.set('ok', 1);
    await waitFor(() => record('stub', 'st0')?.metrics.running === 1, { what: 'recovered' });
  });
});
