import { startSimEngine, type SimEngineHandle } from '@triad/engine-sim';
import { captureLogger } from '@triad/runtime/testing';
import { freePort, waitFor } from '@triad/testing';
import type { EngineAuth } from '../engine-credentials/engine-auth';
import { WatcherMetrics } from '../ops/metrics';
import { EngineHttp } from './engine-http';
import { Scraper } from './scraper';

// API reads an engine refuses (401: it runs with --api-key, the watcher sends none or another key) wait before they
// go again, while /metrics is scraped every interval. Engine-sims over real sockets check the key; the scraper
// scrapes on its own timer, and its injected clock, moved by the tests, says when a refused read may go again.

const KEY = 'engine-key-refused-0123';
const MODELS_INTERVAL_MS = 40_000;
const SERVER_INFO_INTERVAL_MS = 60_000;

describe('scraper: API reads an engine refuses (engine-sims with --api-key)', () => {
  const http = new EngineHttp({ timeoutMs: 2000 });
  const sims: SimEngineHandle[] = [];
  const scrapers: Scraper[] = [];

  afterAll(async () => {
    await Promise.all(scrapers.map((s) => s.close()));
    await http.close();
    await Promise.all(sims.map((s) => s.close()));
  });

  /** A scraper of one engine on a clock the test moves, sending what `auth()` says. */
  function scraperOf(id: string, sim: SimEngineHandle, engine: 'vLLM' | 'SGLang', auth: () => EngineAuth) {
    const log = captureLogger('test', 'info');
    const metrics = new WatcherMetrics({ defaultMetrics: false });
    const clock = { now: 1_000_000 };
    const scraper = new Scraper({
      intervalMs: 40,
      modelsIntervalMs: MODELS_INTERVAL_MS,
      serverInfoIntervalMs: SERVER_INFO_INTERVAL_MS,
      concurrency: 2,
      http,
      logger: log.logger,
      metrics,
      onUpdate: () => undefined,
      engineAuth: auth,
      now: () => clock.now,
    });
    scrapers.push(scraper);
    scraper.acquire(id, sim.url, engine);
    scraper.start();
    const errors = async (what: string, reason: string) =>
      (await metrics.scrapeErrors.get()).values.find((v) => v.labels.what === what && v.labels.reason === reason)?.value ?? 0;
    return { scraper, log, clock, errors };
  }

  const reads = (sim: SimEngineHandle, path: string) => sim.requests().filter((r) => r.path === path);
  const logged = (lines: Record<string, unknown>[], path: string, msg: string) =>
    lines.filter((l) => l['path'] === path && String(l['msg']).startsWith(msg));

  /** Three more /metrics scrapes of `sim` go by (the scraper's timer), and none of them read `paths`. */
  async function scrapesWithout(sim: SimEngineHandle, ...paths: string[]): Promise<void> {
    const before = paths.map((p) => reads(sim, p).length);
    const scrapes = reads(sim, '/metrics').length;
    await waitFor(() => reads(sim, '/metrics').length >= scrapes + 3, { what: 'three more /metrics scrapes' });
    expect(paths.map((p) => reads(sim, p).length)).toEqual(before);
  }

  it('waits the models interval after a refused /v1/models, doubling per refusal up to 5 min; a changed key is tried at once', async () => {
    const sim = await startSimEngine({ engine: 'vllm', role: 'both', apiKey: KEY, loraAdapters: ['lora-a'] });
    sims.push(sim);
    let auth: EngineAuth = { header: 'Bearer old-key', from: 'key token of Secret llm/engine-key' };
    const { scraper, log, clock, errors } = scraperOf('v', sim, 'vLLM', () => auth);

    // The first scrape reads the list and is refused: counted as unauthorized, logged with the wait.
    await waitFor(async () => (await errors('models', 'unauthorized')) === 1, { what: 'the first refusal counted' });
    expect(reads(sim, '/v1/models')).toHaveLength(1);
    expect(await errors('models', 'http')).toBe(0);
    expect(logged(log.lines, '/v1/models', 'the engine refused')).toEqual([
      expect.objectContaining({ level: 'warn', status: 401, sent: auth.from, retryInMs: MODELS_INTERVAL_MS }),
    ]);

    // Each wait: no read a millisecond before it ends (the metrics scrapes go on), one read once it has.
    const waits = [MODELS_INTERVAL_MS, 2 * MODELS_INTERVAL_MS, 4 * MODELS_INTERVAL_MS, 300_000, 300_000];
    for (const [i, waitMs] of waits.entries()) {
      clock.now += waitMs - 1;
      await scrapesWithout(sim, '/v1/models');
      clock.now += 1;
      await waitFor(async () => (await errors('models', 'unauthorized')) === i + 2, { what: `refusal ${i + 2}` });
      expect(reads(sim, '/v1/models')).toHaveLength(i + 2);
    }
    expect(scraper.view('v')).toMatchObject({ models: [], metrics: { stale: false } });

    // The Secret is rotated (same source, another key) but the engine still expects another one: read with the
    // next scrape, refused, and the wait starts over at the models interval.
    auth = { header: 'Bearer rotated-but-wrong', from: auth.from };
    await waitFor(async () => (await errors('models', 'unauthorized')) === waits.length + 2, { what: 'the rotated key refused' });
    expect(reads(sim, '/v1/models').at(-1)?.headers['authorization']).toBe('Bearer rotated-but-wrong');
    clock.now += MODELS_INTERVAL_MS - 1;
    await scrapesWithout(sim, '/v1/models');

    // The right key: read with the next scrape (the wait not over), accepted, logged, the list published.
    auth = { header: `Bearer ${KEY}`, from: auth.from };
    const before = reads(sim, '/v1/models').length;
    await waitFor(() => scraper.view('v')?.models.includes('lora-a'), { what: 'the models read with the right key' });
    expect(reads(sim, '/v1/models')).toHaveLength(before + 1);
    expect(reads(sim, '/v1/models').at(-1)?.headers['authorization']).toBe(`Bearer ${KEY}`);
    await waitFor(() => logged(log.lines, '/v1/models', "the engine accepts the pod-watcher's read again").length === 1, {
      what: 'accepted again logged',
    });
    expect(await errors('models', 'unauthorized')).toBe(waits.length + 2);
    // Back to the models interval: the next read is a whole interval later, not at once.
    await scrapesWithout(sim, '/v1/models');
    // The key never appears in a log line.
    expect(JSON.stringify(log.lines)).not.toContain(KEY);
  });

  it('backs off /v1/models and /server_info each by its own interval; an engine answering again after failing is read at once', async () => {
    const host = '127.0.0.1';
    const port = await freePort();
    const sglang = (apiKey?: string) =>
      startSimEngine({ engine: 'sglang', role: 'prefill', host, port, bootstrapPort: 0, ...(apiKey ? { apiKey } : {}) });
    let sim = await sglang(KEY);
    sims.push(sim);
    const { scraper, log, clock, errors } = scraperOf('sg', sim, 'SGLang', () => ({ from: 'none: ModelServer llm/sg sets no engineAuth' }));

    await waitFor(async () => (await errors('models', 'unauthorized')) === 1 && (await errors('server_info', 'unauthorized')) === 1, {
      what: 'both reads refused',
    });
    expect(reads(sim, '/server_info')).toHaveLength(1);
    expect(reads(sim, '/get_server_info')).toHaveLength(0);

    clock.now += MODELS_INTERVAL_MS - 1;
    await scrapesWithout(sim, '/v1/models', '/server_info');
    clock.now += 1;
    await waitFor(async () => (await errors('models', 'unauthorized')) === 2, { what: 'the list read again' });
    await scrapesWithout(sim, '/server_info');
    clock.now += SERVER_INFO_INTERVAL_MS - MODELS_INTERVAL_MS;
    await waitFor(async () => (await errors('server_info', 'unauthorized')) === 2, { what: 'server info read again' });
    expect(reads(sim, '/v1/models')).toHaveLength(2);

    // The engine restarts without --api-key: its scrapes fail meanwhile, and once it answers both reads go at
    // once, though their waits are not over.
    await sim.close();
    await waitFor(() => scraper.view('sg')?.metrics.stale, { what: 'the engine marked stale' });
    sim = await sglang();
    sims.push(sim);
    await waitFor(() => scraper.view('sg')?.serverInfo !== undefined && scraper.view('sg')?.models.length === 1, {
      what: 'models and server info read after the restart',
    });
    expect(scraper.view('sg')).toMatchObject({ models: [sim.model], metrics: { stale: false } });
    for (const path of ['/v1/models', '/server_info'])
      await waitFor(() => logged(log.lines, path, "the engine accepts the pod-watcher's read again").length === 1, {
        what: `${path} accepted again logged`,
      });
    expect(await errors('server_info', 'http')).toBe(0);
  });
});
