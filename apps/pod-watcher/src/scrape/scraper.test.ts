import { createServer, type Server } from 'node:http';
import { createLogger } from '@triad/runtime';
import { waitFor } from '@triad/testing';
import { EngineHttp } from './engine-http';
import { Scraper } from './scraper';

const page = (running: number) => `# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running ${running}\n`;

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

  function start(reportEveryMs: number, reports: number[]): Scraper {
    const scraper: Scraper = new Scraper({
      intervalMs: 40,
      modelsIntervalMs: 60_000,
      concurrency: 4,
      http,
      logger,
      reportEveryMs,
      onUpdate: (id) => reports.push(scraper.view(id)?.metrics.running ?? -1),
    });
    scrapers.push(scraper);
    scraper.acquire('pod', base, 'vLLM');
    scraper.start();
    return scraper;
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

  it('reports every scrape without reportEveryMs', async () => {
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
});
