import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { outlierKey, type OutlierRecord, type Stage } from '@triad/bus';
import { DEFAULT_OUTLIER_POLICY, type OutlierPolicy } from '@triad/crd';
import { createLogger } from '@triad/runtime';
import { OutlierTable } from '@triad/scheduling';
import { endpointRecord, keyOf } from '@triad/scheduling/testing';
import { waitFor } from '@triad/testing';
import { OutlierProber, type ProbeTargets } from './outlier-prober';

const logger = createLogger({ service: 'test', level: 'silent' });

function record(pod: string, over: Partial<OutlierRecord> = {}): OutlierRecord {
  const now = Date.now();
  return {
    schemaVersion: 1,
    endpoint: keyOf(pod),
    stage: 'aggregated',
    state: 'ejected',
    ejectedAt: now,
    ejectedUntil: now + 60_000,
    ejections: 1,
    reason: '5xx',
    failures: 5,
    by: 'gw-1',
    ...over,
  };
}

const put = (table: OutlierTable, r: OutlierRecord): void => table.apply({ op: 'PUT', key: outlierKey(r.endpoint, r.stage), value: r });

describe('OutlierProber: follows only the ejected endpoints, probes them when due, and ends an ejection on a 2xx', () => {
  let server: Server;
  let port: number;
  const probed: string[] = [];
  const probers: OutlierProber[] = [];

  beforeAll(async () => {
    server = createServer((req, res) => {
      probed.push(req.url ?? '');
      res.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
  });

  afterEach(() => {
    for (const p of probers.splice(0)) p.stop();
  });

  afterAll(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  /** Pods `probe-*` have a probe to the test server; the others' ModelServer has none. */
  function proberOf(table: OutlierTable, intervalMs: number, now?: () => number) {
    const restored: { server: string; endpoint: string; stage: Stage }[] = [];
    const withProbe: OutlierPolicy = { ...DEFAULT_OUTLIER_POLICY, probe: { path: '/health', intervalMs, timeoutMs: 5_000 } };
    const targets: ProbeTargets = {
      endpoint: (key) => {
        const pod = key.split('.')[2] ?? '';
        return endpointRecord({ pod, modelServer: pod.startsWith('probe-') ? 'probed' : 'ms', ip: '127.0.0.1', port });
      },
      policy: (_namespace, modelServer) => (modelServer === 'probed' ? withProbe : DEFAULT_OUTLIER_POLICY),
    };
    const sink = { probeSucceeded: (srv: string, endpoint: string, stage: Stage) => restored.push({ server: srv, endpoint, stage }) };
    const prober = new OutlierProber(table, targets, sink, logger, now);
    probers.push(prober);
    return { prober, restored };
  }

  it('among many healthy records follows the one ejected endpoint, probes it after an interval and reports the 2xx', async () => {
    const table = new OutlierTable();
    for (let i = 0; i < 500; i++) put(table, record(`healthy-${i}`, { state: 'healthy', ejectedUntil: 0, healthySince: Date.now() }));
    const { prober, restored } = proberOf(table, 20);
    prober.start();
    expect(prober.following).toBe(0);
    expect(prober.nextAt).toBeUndefined(); // nothing ejected: no timer
    put(table, record('probe-a'));
    expect(prober.following).toBe(1);
    await waitFor(() => restored.length > 0, { what: 'the probe of probe-a answered' });
    expect(restored[0]).toEqual({ server: 'default/probed', endpoint: keyOf('probe-a'), stage: 'aggregated' });
    expect(probed).toContain('/health');
    // The shared record turns healthy (the detector's write, here applied by hand): the prober lets it go.
    put(table, record('probe-a', { state: 'healthy', ejectedUntil: 0, healthySince: Date.now() }));
    expect(prober.following).toBe(0);
    expect(prober.nextAt).toBeUndefined();
  });

  it('probes nothing before the first interval, nothing without a probe policy, and drops an ejection that ran out', () => {
    let now = 1_000_000;
    const table = new OutlierTable();
    const { prober } = proberOf(table, 5_000, () => now);
    put(table, record('probe-b', { ejectedAt: now, ejectedUntil: now + 12_000 }));
    put(table, record('plain', { ejectedAt: now, ejectedUntil: now + 12_000 }));
    prober.start(); // records already in the table are followed from the start
    expect(prober.following).toBe(2);
    expect(prober.nextAt).toBe(now + 1_000); // the recheck of `plain` comes before probe-b's first probe
    now = 1_004_999;
    prober.tick(); // `plain` rechecked (still no probe); probe-b not due yet
    expect(prober.probing).toBe(0);
    expect(prober.nextAt).toBe(1_005_000);
    now = 1_005_000;
    prober.tick();
    expect(prober.probing).toBe(1); // probe-b only: `plain` has no probe
    expect(prober.nextAt).toBe(1_005_999); // `plain`'s next recheck; probe-b's next probe at 1_010_000
    now += 12_000; // both ejections ran out: real traffic probes them from here
    prober.tick();
    expect(prober.following).toBe(0);
    expect(prober.nextAt).toBeUndefined();
  });

  it('a new ejection of the same endpoint starts its schedule over; a deleted record is let go', () => {
    let now = 2_000_000;
    const table = new OutlierTable();
    const { prober } = proberOf(table, 5_000, () => now);
    prober.start();
    put(table, record('probe-c', { ejectedAt: now, ejectedUntil: now + 10_000 }));
    expect(prober.nextAt).toBe(now + 5_000);
    now += 3_000;
    put(table, record('probe-c', { ejectedAt: now, ejectedUntil: now + 20_000, ejections: 2 }));
    expect(prober.nextAt).toBe(now + 5_000);
    table.apply({ op: 'DEL', key: outlierKey(keyOf('probe-c'), 'aggregated') });
    expect(prober.following).toBe(0);
    expect(prober.nextAt).toBeUndefined();
  });
});
