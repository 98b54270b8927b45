import { createServer, type Server } from 'node:net';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { startNatsServer, type NatsServerHandle } from '@triad/testing';
import { NATS_INSTALL_HELP, resolveNats } from './nats';
import { probeNats } from './nats-probe';
import { StartupError } from './startup-error';
import { Supervisor } from './supervisor';

const supervisors: Supervisor[] = [];
const servers: NatsServerHandle[] = [];
const dir = mkdtempSync(join(tmpdir(), 'triad-up-nats-'));
const supervisor = () => {
  const s = new Supervisor({ out: new PassThrough(), style: { nameWidth: 4, color: false, raw: false }, stopTimeoutMs: 2000 });
  supervisors.push(s);
  return s;
};

afterAll(async () => {
  await Promise.all(supervisors.map((s) => s.stopAll()));
  await Promise.all(servers.map((s) => s.close()));
  rmSync(dir, { recursive: true, force: true });
});

describe('resolveNats', () => {
  it('starts a private nats-server with JetStream when asked to', async () => {
    const { endpoint } = await resolveNats({ kind: 'spawn' }, supervisor(), join(dir, 'a'), process.env, 10_000);
    expect(endpoint.origin).toBe('started');
    const port = Number(new URL(endpoint.url).port);
    expect(await probeNats('127.0.0.1', port)).toMatchObject({ reachable: true, jetstream: true });
  });

  it('explains how to install nats-server when it is missing', async () => {
    const error = await resolveNats(
      { kind: 'spawn' },
      supervisor(),
      join(dir, 'b'),
      { ...process.env, NATS_SERVER_BIN: 'nats-server-that-does-not-exist' },
      10_000,
    ).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StartupError);
    expect((error as Error).message).toBe(NATS_INSTALL_HELP);
    expect(NATS_INSTALL_HELP).toContain('apt-get install nats-server');
  });

  it('auto: starts its own when the local server has no JetStream, or when nothing answers there, and says why', async () => {
    const plain = await startNatsServer({ jetstream: false });
    servers.push(plain);
    const local = { host: '127.0.0.1', port: plain.port };
    const resolved = await resolveNats({ kind: 'auto' }, supervisor(), join(dir, 'c'), process.env, 10_000, local);
    expect(resolved.endpoint.origin).toBe('started');
    expect(resolved.note).toBe(`the NATS server on 127.0.0.1:${plain.port} has no JetStream, so triad up started its own`);
    expect(resolved.release).toBeUndefined();
    const closed: Server = createServer();
    const port = await new Promise<number>((r) => closed.listen(0, '127.0.0.1', () => r((closed.address() as { port: number }).port)));
    await new Promise((r) => closed.close(r));
    const nothing = await resolveNats({ kind: 'auto' }, supervisor(), join(dir, 'd'), process.env, 10_000, { host: '127.0.0.1', port });
    expect(nothing.endpoint.origin).toBe('started');
    expect(nothing.note).toBeUndefined();
  });

  it('uses a given server with JetStream, and refuses one that is down or lacks JetStream', async () => {
    const js = await startNatsServer();
    const plain = await startNatsServer({ jetstream: false });
    servers.push(js, plain);
    expect((await resolveNats({ kind: 'url', url: js.url }, supervisor(), dir, process.env, 5000)).endpoint).toEqual({
      url: js.url,
      origin: 'given',
    });
    await expect(resolveNats({ kind: 'url', url: plain.url }, supervisor(), dir, process.env, 5000)).rejects.toThrow(
      /has JetStream disabled/,
    );
    const closed: Server = createServer();
    const port = await new Promise<number>((r) => closed.listen(0, '127.0.0.1', () => r((closed.address() as { port: number }).port)));
    await new Promise((r) => closed.close(r));
    await expect(resolveNats({ kind: 'url', url: `nats://127.0.0.1:${port}` }, supervisor(), dir, process.env, 5000)).rejects.toThrow(
      /no NATS server answers at/,
    );
  });
});
