import { createServer, type RequestListener, type Server } from 'node:http';
import { createLogger } from '@triad/runtime';
import { waitFor } from '@triad/testing';
import { EngineHttp } from './engine-http';
import { Scraper } from './scraper';

const page = (running: number) => `# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running ${running}\n`;

/** A fleet of engines on one port (`0.0.0.0` answers on every 127.x address): the port and how to close it. */
async function fleetOn(host: string, handler: RequestListener): Promise<{ port: number; close: () => Promise<void> }> {
  const server = createServer(handler);
  await new Promise<void>((r) => server.listen(0, host, r));
  return {
    port: (server.address() as { port: number }).port,
    close: async () => {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    },
  };
}

describe('scraper reports', () => {
  let server: Server;
  let base = '';
  let running = 1;
  let scrapes = 0;
  const http = new EngineHttp({ timeoutMs: 2000 });
  const logger = createLogger({ service: 'test', level: 'silent' });
  const scrapers: Scraper[] = [];

  beforeAll(async () => {
    server = createServer((req, res) => {
      if (req.url === '/metrics') {
        scrapes += 1;
        res.end(page(running));
      } else res.end('{"data":[{"id":"m"}]}');
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    base = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  });
  afterAll(async () => {
    await Promise.all(scrapers.map((s) => s.close()));
    await http.close();
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  });

  function start(reportEveryMs: number | undefined, reports: number[]): Scraper {
    const scraper: Scraper = new Scraper({
      intervalMs: 40,
      modelsIntervalMs: 60_000,
      concurrency: 4,
      http,
      logger,
      ...(reportEveryMs !== undefined ? { reportEveryMs } : {}),
      onUpdate: (id) => reports.push(scraper.view(id)?.metrics.running ?? -1),
    });
    scrapers.push(scraper);
    scraper.acquire('pod', base, 'vLLM');
    scraper.start();
    return scraper;
  }

  /** A scraper of a share of the engines (`owned`), scraping every 40 ms. */
  function shareScraper(owned: (id: string) => boolean, onUpdate: (id: string) => void = () => undefined, engineHttp = http): Scraper {
    return new Scraper({ intervalMs: 40, modelsIntervalMs: 60_000, concurrency: 4, http: engineHttp, logger, onUpdate, owned });
  }

  it('reports an engine whose numbers do not move once per reportEveryMs, and a change at once', async () => {
    running = 1;
    const reports: number[] = [];
    const scraper = start(60_000, reports);
    await waitFor(() => reports.length === 1, { what: 'the first report' });
    const firstAt = scraper.view('pod')?.metrics.scrapedAt;
    const seen = scrapes;
    await waitFor(() => scrapes >= seen + 4, { what: 'four more scrapes' });
    expect(reports).toEqual([1]);
    // The view keeps the reported scrape time until the next report.
    expect(scraper.view('pod')?.metrics.scrapedAt).toBe(firstAt);
    running = 3;
    await waitFor(() => reports.length === 2, { what: 'the change reported' });
    expect(reports).toEqual([1, 3]);
    await scraper.close();
  });

  it('reports only changes without reportEveryMs (the first scrape included, zeros or not), and says how fresh its engines are', async () => {
    running = 0;
    const reports: number[] = [];
    const scraper = start(undefined, reports);
    await waitFor(() => reports.length === 1, { what: 'the first scrape reported (numbers of a never-scraped view)' });
    const reportedAt = scraper.view('pod')!.metrics.scrapedAt;
    const seen = scrapes;
    await waitFor(() => scrapes >= seen + 4, { what: 'four more scrapes' });
    expect(reports).toEqual([0]);
    // Not reported, yet confirmed: the freshness readers age the record by.
    await waitFor(() => (scraper.confirmedSince() ?? 0) > reportedAt, { what: 'a later confirmation' });
    expect(scraper.view('pod')!.metrics.scrapedAt).toBe(reportedAt);
    expect(scraper.confirmedSince()).toBeLessThanOrEqual(Date.now());
    running = 5;
    await waitFor(() => reports.length === 2, { what: 'the change reported' });
    expect(reports).toEqual([0, 5]);
    await scraper.close();
  });

  it('reports every scrape with reportEveryMs 0', async () => {
    running = 2;
    const reports: number[] = [];
    const scraper = start(0, reports);
    await waitFor(() => reports.length >= 4, { what: 'four reports of unchanged numbers' });
    expect(new Set(reports)).toEqual(new Set([2]));
    const times = new Set<number>();
    await waitFor(
      () => {
        times.add(scraper.view('pod')?.metrics.scrapedAt ?? 0);
        return times.size >= 2;
      },
      { what: 'a newer scrape time', intervalMs: 10 },
    );
    await scraper.close();
  });

  it('asks whether a target is its own when it is added, on rescope() and on reown(id), not at every tick', async () => {
    const hosts: string[] = [];
    const { port, close: closeFleet } = await fleetOn('0.0.0.0', (req, res) => {
      if (req.url === '/metrics') hosts.push(req.headers.host ?? '');
      res.end(req.url === '/metrics' ? page(1) : '{"data":[]}');
    });
    const mine = new Set(['a']);
    let asked = 0;
    const scraper = shareScraper((id) => {
      asked += 1;
      return mine.has(id);
    });
    const scrapesOf = (ip: string) => hosts.filter((h) => h === `${ip}:${port}`).length;
    try {
      scraper.acquire('a', `http://127.0.0.1:${port}`, 'vLLM');
      scraper.acquire('b', `http://127.0.0.2:${port}`, 'vLLM');
      scraper.start();
      mine.add('b');
      await waitFor(() => scrapesOf('127.0.0.1') >= 5, { what: 'five scrapes of the owned target' });
      // b became this replica's in the ring, but nothing said so: ticks do not ask again.
      expect(asked).toBe(2);
      expect(scrapesOf('127.0.0.2')).toBe(0);
      scraper.reown('b');
      await waitFor(() => scrapesOf('127.0.0.2') >= 2, { what: 'the target scraped once it was re-asked' });
      mine.delete('a');
      scraper.rescope();
      const seen = scrapesOf('127.0.0.1');
      await waitFor(() => scrapesOf('127.0.0.2') >= 6, { what: 'more scrapes of b' });
      expect(scrapesOf('127.0.0.1')).toBeLessThanOrEqual(seen + 1);
      expect(scraper.ownedSize).toBe(1);
    } finally {
      await scraper.close();
      await closeFleet();
    }
  });

  it('confirms its engines as of the oldest last good scrape: failing ones aside, none until a new one is scraped', async () => {
    let failB = false;
    let holdC = false;
    const { port, close: closeFleet } = await fleetOn('0.0.0.0', (req, res) => {
      const host = req.headers.host ?? '';
      if (host.startsWith('127.0.0.2') && failB) res.writeHead(500).end('down');
      else if (host.startsWith('127.0.0.3') && holdC)
        return; // never answers: its scrape times out
      else res.end(req.url === '/metrics' ? page(1) : '{"data":[]}');
    });
    const mine = new Set(['a', 'b']);
    const slowHttp = new EngineHttp({ timeoutMs: 300 });
    const scraper = shareScraper(
      (id) => mine.has(id),
      () => undefined,
      slowHttp,
    );
    try {
      const before = Date.now();
      expect(scraper.confirmedSince()).toBeGreaterThanOrEqual(before);
      scraper.acquire('a', `http://127.0.0.1:${port}`, 'vLLM');
      scraper.acquire('b', `http://127.0.0.2:${port}`, 'vLLM');
      scraper.acquire('c', `http://127.0.0.3:${port}`, 'vLLM');
      // Owned, not scraped yet: nothing is vouched for.
      expect(scraper.confirmedSince()).toBeUndefined();
      scraper.start();
      await waitFor(() => scraper.confirmedSince() !== undefined, { what: 'both owned engines scraped' });
      const first = scraper.confirmedSince()!;
      await waitFor(() => scraper.confirmedSince()! > first, { what: 'the confirmation moving on' });
      // b fails: marked stale, so it no longer holds the others' confirmation back.
      failB = true;
      await waitFor(() => scraper.view('b')?.metrics.stale === true, { what: 'b stale' });
      const staleSince = scraper.view('b')!.metrics.scrapedAt;
      await waitFor(() => scraper.confirmedSince()! > staleSince + 100, { what: 'a confirmed past b failing' });
      // c, another replica's until now, becomes this one's and hangs: undefined until its first good scrape.
      holdC = true;
      mine.add('c');
      scraper.reown('c');
      expect(scraper.confirmedSince()).toBeUndefined();
      await waitFor(() => scraper.confirmedSince() !== undefined, { what: "c's first try over (timed out: stale)", timeoutMs: 5000 });
      expect(scraper.view('c')?.metrics.stale).toBe(true);
      holdC = false;
      await waitFor(() => scraper.view('c')?.metrics.stale === false, { what: 'c answering', timeoutMs: 5000 });
      // Handed away and back: its old confirmation no longer counts.
      mine.delete('c');
      scraper.rescope();
      mine.add('c');
      holdC = true;
      scraper.rescope();
      expect(scraper.confirmedSince()).toBeUndefined();
    } finally {
      holdC = false;
      await scraper.close();
      await slowHttp.close();
      await closeFleet();
    }
  });

  it('reports the first scrape of a target handed back, even with the numbers it had when it left', async () => {
    const { port, close: closeFleet } = await fleetOn('127.0.0.1', (req, res) => res.end(req.url === '/metrics' ? page(3) : '{"data":[]}'));
    const mine = new Set(['a']);
    const reports: string[] = [];
    const scraper = shareScraper(
      (id) => mine.has(id),
      (id) => reports.push(id),
    );
    try {
      scraper.acquire('a', `http://127.0.0.1:${port}`, 'vLLM');
      scraper.start();
      await waitFor(() => scraper.confirmedSince() !== undefined && reports.length > 0, { what: 'the first scrape reported' });
      const before = reports.length;
      // Unchanged engine, no report heartbeat: further scrapes are not reported.
      const confirmed = scraper.confirmedSince()!;
      await waitFor(() => scraper.confirmedSince()! > confirmed, { what: 'another scrape' });
      expect(reports.length).toBe(before);
      // Handed to another replica and back: the engine still shows the numbers this replica last saw.
      mine.delete('a');
      scraper.rescope();
      mine.add('a');
      scraper.rescope();
      await waitFor(() => reports.length > before, { what: 'the first scrape since it came back reported' });
      expect(scraper.view('a')?.metrics.running).toBe(3);
    } finally {
      await scraper.close();
      await closeFleet();
    }
  });

  it('does not scrape a queued target that went to another replica meanwhile', async () => {
    const hosts: string[] = [];
    let answerFirst: () => void = () => undefined;
    const { port, close: closeHeld } = await fleetOn('0.0.0.0', (req, res) => {
      hosts.push(req.headers.host ?? '');
      if (hosts.length === 1) answerFirst = () => res.end(page(1));
      else res.end(req.url === '/metrics' ? page(1) : '{"data":[]}');
    });
    const movedAway = new Set<string>();
    const scraper = new Scraper({
      intervalMs: 60_000,
      modelsIntervalMs: 60_000,
      concurrency: 1,
      http,
      logger,
      onUpdate: () => undefined,
      owned: (id) => !movedAway.has(id),
    });
    try {
      // Acquired targets are scraped at once: with one worker, the second waits in the queue behind the first.
      scraper.acquire('a', `http://127.0.0.1:${port}`, 'vLLM');
      scraper.acquire('b', `http://127.0.0.2:${port}`, 'vLLM');
      await waitFor(() => hosts.length === 1, { what: 'the first scrape under way' });
      movedAway.add('b');
      scraper.rescope();
      answerFirst();
      await scraper.idle();
      // Its metrics and models reads; nothing of the target that moved.
      expect(hosts.length).toBeGreaterThan(0);
      expect(hosts.filter((h) => h !== `127.0.0.1:${port}`)).toEqual([]);
      expect(scraper.ownedSize).toBe(1);
    } finally {
      await scraper.close();
      await closeHeld();
    }
  });
});

describe('scraper model lists', () => {
  let server: Server;
  let base = '';
  let failing = false;
  let models = ['base'];
  let modelReads = 0;
  const http = new EngineHttp({ timeoutMs: 2000 });
  const logger = createLogger({ service: 'test', level: 'silent' });
  let scraper: Scraper | undefined;

  beforeAll(async () => {
    server = createServer((req, res) => {
      if (req.url === '/metrics') {
        res.statusCode = failing ? 503 : 200;
        res.end(page(1));
        return;
      }
      modelReads += 1;
      res.end(JSON.stringify({ object: 'list', data: models.map((id) => ({ id, object: 'model' })) }));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    base = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  });
  afterAll(async () => {
    await scraper?.close();
    await http.close();
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  });

  it('reads a new engine at once, then only every modelsIntervalMs, and again once a failing engine answers', async () => {
    const s = new Scraper({ intervalMs: 40, modelsIntervalMs: 60_000, concurrency: 2, http, logger, onUpdate: () => undefined });
    scraper = s;
    s.acquire('pod', base, 'vLLM');
    s.start();
    await waitFor(() => s.view('pod')?.models.length === 1, { what: 'the first model list' });
    expect(s.view('pod')?.models).toEqual(['base']);
    expect(modelReads).toBe(1);
    // An adapter loaded meanwhile waits for the interval: metrics scrapes do not read the list.
    models = ['base', 'sql-lora'];
    const before = s.view('pod')!.metrics.scrapedAt;
    await waitFor(() => (s.confirmedSince() ?? 0) > before + 200, { what: 'five more scrapes' });
    expect(modelReads).toBe(1);
    // The engine fails (a restart), then answers again: the list is read with the scrape after its recovery.
    failing = true;
    await waitFor(() => s.view('pod')?.metrics.stale === true, { what: 'the engine marked stale' });
    expect(modelReads).toBe(1);
    failing = false;
    await waitFor(() => s.view('pod')?.models.length === 2, { what: 'the list read again after the recovery' });
    expect(s.view('pod')?.models).toEqual(['base', 'sql-lora']);
    expect(s.view('pod')?.metrics.stale).toBe(false);
    expect(modelReads).toBe(2);
  });
});
