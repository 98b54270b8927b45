import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Exchange } from './exchange';
import { DispatchProbe, RecordingTap } from './tap';

/** A plain HTTP server standing in for an engine: echoes what it got, streams when asked. */
async function startEcho(host: string): Promise<Server> {
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.url === '/stream') {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.write('data: 1\n\n');
        setImmediate(() => res.end('data: [DONE]\n\n'));
        return;
      }
      res.writeHead(req.url === '/fail' ? 500 : 200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ path: req.url, rank: req.headers['x-data-parallel-rank'] ?? null, body: Buffer.concat(chunks).toString() }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  return server;
}

describe('RecordingTap', () => {
  let engine: Server;
  let tap: RecordingTap;
  const seen: Exchange[] = [];

  beforeAll(async () => {
    engine = await startEcho('127.0.88.1');
    const port = (engine.address() as AddressInfo).port;
    tap = await RecordingTap.start({
      stage: 'P',
      host: '127.0.88.2',
      target: { host: '127.0.88.1', apiPort: port },
      onExchange: (x) => seen.push(x),
    });
  });
  afterAll(async () => {
    await tap.close();
    await new Promise<void>((resolve) => engine.close(() => resolve()));
  });

  it("listens on its own address with the engine's port and forwards bodies and headers unchanged", async () => {
    expect(tap.url).toBe(`http://127.0.88.2:${(engine.address() as AddressInfo).port}`);
    const body = '{"model":"m","bootstrap_room":9223372036854775807}';
    const res = await fetch(`${tap.url}/v1/completions?x=1`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'X-data-parallel-rank': '1' },
      body,
    });
    expect(await res.json()).toEqual({ path: '/v1/completions?x=1', rank: '1', body });
    const x = seen.at(-1)!;
    expect(x).toMatchObject({ stage: 'P', port: 'api', method: 'POST', path: '/v1/completions', status: 200, body });
    expect(x.headers['x-data-parallel-rank']).toBe('1');
    expect(JSON.parse(x.responseBody)).toMatchObject({ rank: '1' });
    expect(x.endedAt).toBeGreaterThanOrEqual(x.startedAt);
    expect(tap.inFlight).toBe(0);
    // The bench waits for a quiet window after the last exchange, not just for none in flight.
    expect(tap.lastActivityAt).toBeGreaterThanOrEqual(x.endedAt);
  });

  it('relays an engine error and a stream as they come, recording both', async () => {
    const failed = await fetch(`${tap.url}/fail`, { method: 'POST', body: '{}' });
    expect(failed.status).toBe(500);
    await failed.text();
    const streamed = await fetch(`${tap.url}/stream`, { method: 'POST', body: '{}' });
    expect(await streamed.text()).toBe('data: 1\n\ndata: [DONE]\n\n');
    expect(seen.slice(-2).map((x) => [x.path, x.status])).toEqual([
      ['/fail', 500],
      ['/stream', 200],
    ]);
    expect(seen.at(-1)!.responseBody).toBe('data: 1\n\ndata: [DONE]\n\n');
  });
});

describe('DispatchProbe', () => {
  it('lets an answer go as soon as the other role is called, and at once when it already was', async () => {
    const probe = new DispatchProbe(60_000);
    probe.called('prefill');
    let released = false;
    const held = probe.answerMayGo('prefill').then(() => (released = true));
    await new Promise((r) => setImmediate(r));
    expect(released).toBe(false);
    probe.called('decode');
    await held;
    expect(released).toBe(true);
    await probe.answerMayGo('decode');
  });

  it('lets a held answer go when the hold runs out (a sequential router never calls the decode first)', async () => {
    const probe = new DispatchProbe(20);
    probe.called('prefill');
    await probe.answerMayGo('prefill');
    // A new request starts with nothing called.
    probe.reset();
    const afterReset = probe.answerMayGo('decode');
    probe.called('prefill');
    await afterReset;
  });
});
