import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { join, resolve } from 'node:path';
import { createInterface, type Interface } from 'node:readline';
import { startNatsServer, type NatsServerHandle } from '@triad/testing';

const ROOT = resolve(__dirname, '../../..');
const HARNESS = join(__dirname, 'replica-harness.ts');
const HOUR = 3_600_000;

interface Replica {
  readonly child: ChildProcessWithoutNullStreams;
  readonly lines: Interface;
  next(): Promise<string>;
}

interface ReplicaResult {
  readonly storeErrors: readonly string[];
  readonly admitted: number;
  readonly rejected: number;
  readonly local: number;
  readonly store: number;
}

function startReplica(options: Record<string, unknown>): Replica {
  const child = spawn(process.execPath, ['--require', 'tsx/cjs', HARNESS, JSON.stringify(options)], {
    cwd: ROOT,
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-4000)));
  const lines = createInterface({ input: child.stdout });
  const queued: string[] = [];
  const waiting: ((line: string) => void)[] = [];
  lines.on('line', (line) => {
    const w = waiting.shift();
    if (w) w(line);
    else queued.push(line);
  });
  const next = (): Promise<string> => {
    const line = queued.shift();
    if (line !== undefined) return Promise.resolve(line);
    return new Promise((res, rej) => {
      waiting.push(res);
      child.once('exit', (code) => rej(new Error(`replica exited with ${code}: ${stderr}`)));
    });
  };
  return { child, lines, next };
}

function exited(r: Replica): Promise<number | null> {
  if (r.child.exitCode !== null) return Promise.resolve(r.child.exitCode);
  return new Promise((res) => r.child.once('exit', (code) => res(code)));
}

describe('rate limits across two gateway processes sharing one nats-server', () => {
  let server: NatsServerHandle;
  const replicas: Replica[] = [];
  beforeAll(async () => {
    server = await startNatsServer();
  });
  afterAll(async () => {
    for (const r of replicas) if (r.child.exitCode === null) r.child.kill('SIGKILL');
    await server?.close();
  });

  it('admits exactly M of N requests within the unit (leases included)', async () => {
    const started = Date.now();
    const shared = {
      natsUrl: server.url,
      bucket: 'triad_test_cross',
      model: 'llama-3-8b',
      inputTokensPerUnit: 200,
      costPerRequest: 10,
      requests: 40,
      wave: 4,
      started,
      base: Math.floor(started / HOUR) * HOUR + HOUR / 2,
    };
    const pair = [startReplica({ ...shared, replicaId: 'gw-a' }), startReplica({ ...shared, replicaId: 'gw-b' })];
    replicas.push(...pair);
    expect(await Promise.all(pair.map((r) => r.next()))).toEqual(['ready', 'ready']);
    for (const r of pair) r.child.stdin.write('go\n');
    const results = (await Promise.all(pair.map((r) => r.next()))).map((l) => JSON.parse(l) as ReplicaResult);
    // First, so that a store failure (refused: failMode closed) is named rather than showing as a count one short.
    expect(results.map((r) => r.storeErrors)).toEqual([[], []]);
    for (const r of results) {
      expect(r.admitted + r.rejected).toBe(40);
      expect(r.local + r.store).toBe(r.admitted);
    }
    expect(results[0].admitted + results[1].admitted).toBe(20);
    // Leases did their job: part of the budget was spent locally, without a store round-trip.
    expect(results[0].local + results[1].local).toBeGreaterThan(0);
    for (const r of pair) r.child.stdin.write('exit\n');
    expect(await Promise.all(pair.map(exited))).toEqual([0, 0]);
  }, 60_000);
});
