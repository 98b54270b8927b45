import { mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { startSimEngine, type SimEngineHandle } from '@triad/engine-sim';
import { startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from '@triad/telemetry/receiver';
import { freePort, startNatsServer, waitFor, type NatsServerHandle } from '@triad/testing';
import { spawnTriad, waitReady, type TriadChild } from '@triad/testing';
import { modelServer, pod } from './support/objects';

jest.setTimeout(60_000);

/** A YAML source file, replaced the way editors and ConfigMap updates do (write elsewhere, rename over). */
function sourceFile(prefix: string): { path: string; write(docs: readonly object[]): void; remove(): void } {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  const path = join(dir, 'cluster.yaml');
  return {
    path,
    write: (docs) => {
      writeFileSync(`${path}.tmp`, docs.map((d) => stringify(d)).join('---\n'));
      renameSync(`${path}.tmp`, path);
    },
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}

/** `triad pod-watcher --source file:PATH` exporting to `receiver`, ready. */
async function startWatcher(natsUrl: string, file: string, receiver: OtlpReceiver): Promise<TriadChild> {
  const opsPort = await freePort();
  const child = spawnTriad(
    [
      'pod-watcher',
      '--nats',
      natsUrl,
      '--source',
      `file:${file}`,
      '--metrics-port',
      String(opsPort),
      '--scrape-interval',
      '100',
      '--scrape-timeout',
      '2000',
      '--registry-interval',
      '150',
      '--identity',
      'traced-watcher',
    ],
    { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_BSP_SCHEDULE_DELAY: '50', TRIAD_LOG_LEVEL: 'warn' },
  );
  await waitReady(child, opsPort, 'triad pod-watcher ready');
  return child;
}

const attr = (s: ReceivedSpan, key: string) => s.attributes[key];

describe('triad pod-watcher traces its reconcile passes (child process, file source, OTLP receiver)', () => {
  let nats: NatsServerHandle;
  let receiver: OtlpReceiver;
  let watcher: TriadChild | undefined;
  const file = sourceFile('triad-pw-trace-');
  const labels = (role: string) => ({ app: 'qwen', group: 'g1', role });
  const ip = (n: number) => `127.0.41.${n}`;
  /** Waits for the reconcile span with this trigger (the n-th, counting from 1). */
  const reconcile = async (trigger: string, n = 1) =>
    (
      await receiver.waitForSpans((s) => s.name === 'reconcile' && attr(s, 'triad.reconcile.trigger') === trigger, {
        count: n,
        what: `reconcile span #${n} for ${trigger}`,
        timeoutMs: 20_000,
      })
    )[n - 1];

  beforeAll(async () => {
    [nats, receiver] = await Promise.all([startNatsServer(), startOtlpReceiver()]);
    file.write([modelServer('qwen'), pod('a', labels('prefill'), { ip: ip(1) }), pod('b', labels('decode'), { ip: ip(2) })]);
    watcher = await startWatcher(nats.url, file.path, receiver);
  }, 90_000);

  afterAll(async () => {
    await watcher?.stop();
    await Promise.all([receiver?.close(), nats?.close()]);
    file.remove();
  });

  it('the initial pass is a root span of triad-pod-watcher with what it wrote', async () => {
    const span = await reconcile('initial');
    expect(span.parentSpanId).toBeUndefined();
    expect(span.serviceName).toBe('triad-pod-watcher');
    expect(span.kind).toBe('INTERNAL');
    expect(span.attributes).toEqual(
      expect.objectContaining({
        'triad.reconcile.source': 'file',
        'triad.reconcile.endpoints': 2,
        'triad.reconcile.endpoints_written': 2,
        'triad.reconcile.endpoints_deleted': 0,
        'triad.reconcile.invalid_specs': 0,
        'triad.namespace': 'default',
      }),
    );
  });

  it('an edit of the file is a pass of its own: a relabel and a new pod written, a removed pod deleted', async () => {
    file.write([modelServer('qwen'), pod('a', labels('decode'), { ip: ip(1) }), pod('c', labels('prefill'), { ip: ip(3) })]);
    const span = await reconcile('Pod');
    expect(span.attributes).toEqual(
      expect.objectContaining({
        'triad.reconcile.source': 'file',
        'triad.reconcile.endpoints': 2,
        'triad.reconcile.endpoints_written': 2,
        'triad.reconcile.endpoints_deleted': 1,
      }),
    );
    const initial = await reconcile('initial');
    expect(span.traceId).not.toBe(initial.traceId);
  });

  it('an edit that makes the ModelServer invalid is a pass that writes nothing and counts the rejected spec', async () => {
    const bad = modelServer('qwen');
    bad.spec.workloadPort = { port: 70000 };
    file.write([bad, pod('a', labels('decode'), { ip: ip(1) }), pod('c', labels('prefill'), { ip: ip(3) })]);
    const span = await reconcile('ModelServer');
    expect(span.attributes).toEqual(
      expect.objectContaining({
        'triad.reconcile.invalid_specs': 1,
        'triad.reconcile.endpoints_written': 0,
        'triad.reconcile.endpoints_deleted': 0,
        'triad.reconcile.endpoints': 2,
      }),
    );
  });

  it('a provider credential is traced as a pass, and its value is in no span and no log line', async () => {
    const token = 'sk-traced-secret-42';
    file.write([
      modelServer('qwen'),
      pod('a', labels('decode'), { ip: ip(1) }),
      pod('c', labels('prefill'), { ip: ip(3) }),
      {
        apiVersion: 'v1',
        kind: 'Secret',
        metadata: { name: 'key', labels: { 'networking.serving.volcano.sh/external-model-provider-credential': 'true' } },
        stringData: { apiKey: token },
      },
      {
        apiVersion: 'networking.serving.volcano.sh/v1alpha1',
        kind: 'ExternalModelProvider',
        metadata: { name: 'openai' },
        spec: { baseURL: 'https://api.openai.com', auth: { secretRef: { name: 'key', key: 'apiKey' } } },
      },
    ]);
    // The pass that took the provider and its Secret (the ModelServer turns valid in the same edit, when it ran after the test above).
    await receiver.waitForSpans(
      (s) => s.name === 'reconcile' && /ExternalModelProvider.*Secret/.test(String(attr(s, 'triad.reconcile.trigger'))),
      { what: 'the provider pass', timeoutMs: 20_000 },
    );
    expect(JSON.stringify(receiver.spans())).not.toContain(token);
    expect(watcher?.output()).not.toContain(token);
  });
});

describe('triad pod-watcher traces SGLang EPD encoder-registry changes (child process, engine sims)', () => {
  let nats: NatsServerHandle;
  let receiver: OtlpReceiver;
  let watcher: TriadChild | undefined;
  const file = sourceFile('triad-pw-trace-epd-');
  const sims: SimEngineHandle[] = [];
  let ports: { encodePort: number; prefillPort: number; decodePort: number };
  const host = (n: number) => `127.0.42.${n}`;
  const encoderUrl = (n: number) => `http://${host(n)}:${ports.encodePort}`;
  /** The prefill's encoder registry listener (a free port, found by the watcher through /server_info). */
  const prefillUrl = () => `http://${host(101)}:${registryPort}`;
  let registryPort: number;
  const objects = (encoders: number[]) => [
    modelServer('vl', { engine: 'SGLang', mode: 'epd', ports }),
    pod('p1', { app: 'vl', group: 'g1', role: 'prefill' }, { ip: host(101) }),
    pod('d1', { app: 'vl', group: 'g1', role: 'decode' }, { ip: host(201) }),
    ...encoders.map((n) => pod(`e${n}`, { app: 'vl', group: 'g1', role: 'encode' }, { ip: host(n) })),
  ];
  const list = async (): Promise<string[]> => {
    const body = (await (await fetch(`${prefillUrl()}/list_encoder_urls`)).json()) as { encoder_urls: string[] };
    return [...body.encoder_urls].sort();
  };
  /** The encoder-registry spans of the prefill, in the order they arrived. */
  const registrySpans = () =>
    receiver.spans().filter((s) => s.name === 'encoder-registry' && attr(s, 'triad.encoder_registry.prefill') === prefillUrl());
  const registrySpan = async (n: number) =>
    (
      await receiver.waitForSpans((s) => s.name === 'encoder-registry' && attr(s, 'triad.encoder_registry.prefill') === prefillUrl(), {
        count: n,
        what: `encoder-registry span #${n}`,
        timeoutMs: 20_000,
      })
    )[n - 1];

  beforeAll(async () => {
    [nats, receiver] = await Promise.all([startNatsServer(), startOtlpReceiver()]);
    ports = { encodePort: await freePort(), prefillPort: await freePort(), decodePort: await freePort() };
    registryPort = await freePort();
    const sim = async (role: 'encode' | 'prefill' | 'decode', n: number, port: number) => {
      const languageOnly = role === 'prefill' ? { languageOnly: true, encoderBootstrapPort: registryPort } : {};
      sims.push(await startSimEngine({ engine: 'sglang', role, ...languageOnly, host: host(n), port, latencyProfile: 'zero' }));
    };
    await sim('prefill', 101, ports.prefillPort);
    await sim('decode', 201, ports.decodePort);
    await sim('encode', 1, ports.encodePort);
    await sim('encode', 2, ports.encodePort);
    file.write(objects([1]));
    watcher = await startWatcher(nats.url, file.path, receiver);
  }, 90_000);

  afterAll(async () => {
    await watcher?.stop();
    await Promise.all([...sims.map((s) => s.close()), receiver?.close(), nats?.close()]);
    file.remove();
  });

  it('registering the first encoder is an encoder-registry root span: the prefill, what was added, what is wanted', async () => {
    await waitFor(async () => (await list()).join() === encoderUrl(1), { what: 'p1 registry = e1' });
    const span = await registrySpan(1);
    expect(span.parentSpanId).toBeUndefined();
    expect(span.serviceName).toBe('triad-pod-watcher');
    expect(span.status.code).toBe('UNSET');
    expect(span.attributes).toEqual(
      expect.objectContaining({
        'triad.encoder_registry.change': 'add',
        'triad.encoder_registry.registered': [encoderUrl(1)],
        'triad.encoder_registry.encoders': 1,
      }),
    );
    expect(span.attributes['triad.encoder_registry.unregistered']).toBeUndefined();
  });

  it('a new encode pod in the file, then one gone: an add span and a remove span; passes that change nothing add none', async () => {
    file.write(objects([1, 2]));
    await waitFor(async () => (await list()).join() === [encoderUrl(1), encoderUrl(2)].join(), { what: 'e2 registered' });
    expect((await registrySpan(2)).attributes).toEqual(
      expect.objectContaining({
        'triad.encoder_registry.change': 'add',
        'triad.encoder_registry.registered': [encoderUrl(2)],
        'triad.encoder_registry.encoders': 2,
      }),
    );
    file.write(objects([2]));
    await waitFor(async () => (await list()).join() === encoderUrl(2), { what: 'e1 unregistered' });
    expect((await registrySpan(3)).attributes).toEqual(
      expect.objectContaining({
        'triad.encoder_registry.change': 'remove',
        'triad.encoder_registry.unregistered': [encoderUrl(1)],
        'triad.encoder_registry.encoders': 1,
      }),
    );
    // The registry is passed over every 150 ms; once a later pass has been traced for another reason, none of the
    // unchanged passes in between produced a span. A prefill that goes away is traced once (its error), and when it
    // is back with an empty registry, the registration is traced.
    const prefill = sims.shift()!;
    await prefill.close();
    const failed = await registrySpan(4);
    expect(failed.status.code).toBe('ERROR');
    const restarted = { languageOnly: true, encoderBootstrapPort: registryPort, host: host(101), port: ports.prefillPort };
    sims.push(await startSimEngine({ engine: 'sglang', role: 'prefill', ...restarted, latencyProfile: 'zero' }));
    const isAdd = (s: ReceivedSpan) => attr(s, 'triad.encoder_registry.change') === 'add';
    const mine = (s: ReceivedSpan) => s.name === 'encoder-registry' && attr(s, 'triad.encoder_registry.prefill') === prefillUrl();
    const mineAndAdd = (s: ReceivedSpan) => mine(s) && isAdd(s);
    const adds = await receiver.waitForSpans(mineAndAdd, { count: 3, what: 'the registration after the restart', timeoutMs: 20_000 });
    expect(adds[2]?.attributes).toEqual(expect.objectContaining({ 'triad.encoder_registry.registered': [encoderUrl(2)] }));
    await waitFor(async () => (await list()).join() === encoderUrl(2), { what: 'registry rebuilt' });
    // Between the remove and the new registration, only failures were traced (each distinct error once).
    expect(
      registrySpans()
        .slice(3)
        .every((s) => isAdd(s) || s.status.code === 'ERROR'),
    ).toBe(true);
  });
});
