import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Attempt, EndpointRef } from '@triad/bus';
import type { EcConnectorType } from '@triad/crd';
import type { SimEngineHandle } from '@triad/engine-sim';
import { waitFor } from '@triad/testing';
import { inferenceRequests, startHarness, type Harness } from './support/harness';

// Every vLLM EC connector × topology × media case through the real gateway against engine-sims that behave as vLLM
// does: the request succeeds and no consumer encodes an item itself (the encoders' work was used).

const MODEL = 'Qwen/Qwen2.5-VL-3B-Instruct';
type Body = Record<string, unknown>;
type Topology = 'E→P→D' | 'E→PD';
const CONNECTORS: readonly EcConnectorType[] = ['shared-storage', 'nixl', 'mooncake'];
const TOPOLOGIES: readonly Topology[] = ['E→P→D', 'E→PD'];
const PUSH_WAIT_MS = 1500;

const image = (n: number) => ({ type: 'image_url', image_url: { url: `https://example.com/${n}.png` } });
const CASES: Readonly<Record<string, { parts: Body[]; requests: number; items: number }>> = {
  '1 image': { parts: [image(1)], requests: 1, items: 1 },
  '3 images on 2 encoders': { parts: [image(2), image(3), image(4)], requests: 2, items: 3 },
  audio: { parts: [{ type: 'audio_url', audio_url: { url: 'https://example.com/a.wav' } }], requests: 1, items: 1 },
  video: { parts: [{ type: 'video_url', video_url: { url: 'https://example.com/v.mp4' } }], requests: 1, items: 1 },
  'text only': { parts: [], requests: 0, items: 0 },
};

function chat(model: string, parts: Body[], extra: Body = {}): Body {
  return {
    model,
    max_tokens: 4,
    ...extra,
    messages: [{ role: 'user', content: [{ type: 'text', text: 'describe' }, ...parts] }],
  };
}

/** One ModelServer's sims: two encoders, the consumer (P, or the PD server) and in E→P→D the decode. */
interface Deployment {
  readonly route: string;
  readonly encoders: [SimEngineHandle, SimEngineHandle];
  readonly consumer: SimEngineHandle;
  readonly decode: SimEngineHandle | undefined;
  readonly refs: { e: [EndpointRef, EndpointRef]; attempt: Attempt };
}

let hostCounter = 0;
const nextHost = () => `127.0.12.${++hostCounter}`;

async function deploy(h: Harness, ecDir: string, connector: EcConnectorType, topology: Topology, dpSize: number): Promise<Deployment> {
  const name = `${connector}-${topology === 'E→PD' ? 'epd2' : 'epd3'}`;
  const shared = connector === 'shared-storage' ? { sharedEcDir: ecDir } : {};
  const vllm = { engine: 'vllm', model: MODEL, ecConnector: connector, enableMmEmbeds: true } as const;
  const encoders = [
    await h.startSim({ ...vllm, role: 'encode', host: nextHost(), ...shared }),
    await h.startSim({ ...vllm, role: 'encode', host: nextHost(), ...shared }),
  ] as [SimEngineHandle, SimEngineHandle];
  const consumer = await h.startSim({
    ...vllm,
    role: topology === 'E→PD' ? 'both' : 'prefill',
    host: nextHost(),
    ...shared,
    ecControlPort: 0,
    ecPushWaitTimeoutMs: PUSH_WAIT_MS,
    ...(dpSize > 1 ? { dataParallel: dpSize } : {}),
  });
  const decode = topology === 'E→P→D' ? await h.startSim({ ...vllm, role: 'decode', host: nextHost() }) : undefined;
  const pdGroup =
    topology === 'E→PD'
      ? { groupKey: 'g', encodeLabels: { r: 'e' }, decodeLabels: { r: 'd' } }
      : { groupKey: 'g', encodeLabels: { r: 'e' }, prefillLabels: { r: 'p' }, decodeLabels: { r: 'd' } };
  await h.putServer(name, {
    model: MODEL,
    inferenceEngine: 'vLLM',
    pipelineMode: 'epd',
    kvConnector: { type: 'nixl' },
    ecConnector: { type: connector, enableMmEmbeds: true, maxEncoderBatch: 16, reencodeAttempts: 1 },
    workloadPort: { port: 8000, protocol: 'http' },
    workloadSelector: { matchLabels: { app: name }, pdGroup },
  });
  await h.putRoute(name, { modelName: name, rules: [{ targetModels: [{ modelServerName: name, weight: 100 }] }] });
  const ec =
    connector === 'mooncake' ? { ecControlAddresses: [...(consumer.ecControlAddresses ?? [])], dpSize } : dpSize > 1 ? { dpSize } : {};
  const e: [EndpointRef, EndpointRef] = [
    await h.putEndpoint(name, 'e0', 'encode', encoders[0], { group: 'g1' }),
    await h.putEndpoint(name, 'e1', 'encode', encoders[1], { group: 'g1' }),
  ];
  const consumerRef = {
    ...(await h.putEndpoint(name, topology === 'E→PD' ? 'pd' : 'p', topology === 'E→PD' ? 'decode' : 'prefill', consumer, {
      group: 'g1',
      ...ec,
    })),
    ...ec,
  };
  const attempt: Attempt =
    decode === undefined
      ? { endpoint: consumerRef }
      : { endpoint: await h.putEndpoint(name, 'd', 'decode', decode, { group: 'g1' }), prefill: consumerRef };
  await h.waitForModel(name);
  return { route: name, encoders, consumer, decode, refs: { e, attempt } };
}

async function post(h: Harness, body: Body): Promise<Response> {
  return fetch(`${h.gateway.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
}

const sum = (sims: readonly (SimEngineHandle | undefined)[], counter: string): number =>
  sims.reduce((n, s) => n + (s?.counters()[counter] ?? 0), 0);

describe('gateway, vLLM EPD: every EC connector × topology × media case against engine-sims', () => {
  let h: Harness;
  let ecDir: string;
  const deployments = new Map<string, Deployment>();
  let rank = 0;

  beforeAll(async () => {
    ecDir = mkdtempSync(join(tmpdir(), 'triad-ec-matrix-'));
    h = await startHarness();
    for (const connector of CONNECTORS) {
      for (const topology of TOPOLOGIES) {
        // The Mooncake PD server runs two DP ranks: the rank the decision names must reach it, and its control address.
        const dp = connector === 'mooncake' && topology === 'E→PD' ? 2 : 1;
        deployments.set(`${connector} ${topology}`, await deploy(h, ecDir, connector, topology, dp));
      }
    }
    h.decide = (r) => {
      const d = [...deployments.values()].find((x) => x.route === r.modelServer) as Deployment;
      const consumer = d.refs.attempt.prefill ?? d.refs.attempt.endpoint;
      const attempt = (consumer.dpSize ?? 1) > 1 ? { ...d.refs.attempt, consumerDpRank: rank++ % (consumer.dpSize ?? 1) } : d.refs.attempt;
      return {
        id: r.id,
        ok: true,
        mode: 'epd',
        attempts: [attempt],
        // Items alternate between the two encoders: 3 images make one request of 2 on e0 and one of 1 on e1.
        encoders: r.mediaItems.map((m) => ({
          item: m.index,
          endpoint: d.refs.e[m.index % 2],
          alternates: [],
          affinity: false,
        })),
      };
    };
  });
  afterAll(async () => {
    await h?.close();
    rmSync(ecDir, { recursive: true, force: true });
  });

  const matrix = CONNECTORS.flatMap((c) => TOPOLOGIES.flatMap((t) => Object.keys(CASES).map((k) => [c, t, k] as const)));

  it.each(matrix)('%s %s, %s: succeeds with 0 local re-encodes', async (connector, topology, caseName) => {
    const d = deployments.get(`${connector} ${topology}`) as Deployment;
    const c = CASES[caseName];
    const sims = [...d.encoders, d.consumer, d.decode];
    const before = { requests: sum(sims, 'encoderRequests'), items: sum(sims, 'encoderItems'), local: sum(sims, 'localEncodes') };
    const res = await post(h, chat(d.route, c.parts));
    expect(res.status).toBe(200);
    const answer = (await res.json()) as { choices: { message: { content: string } }[] };
    expect(answer.choices[0]?.message.content.length).toBeGreaterThan(0);
    expect(sum(sims, 'encoderRequests') - before.requests).toBe(c.requests);
    expect(sum(sims, 'encoderItems') - before.items).toBe(c.items);
    expect(sum(sims, 'localEncodes') - before.local).toBe(0);
    expect(sum(sims, 'ecRequestsFailed')).toBe(0);
  });

  it('sends X-data-parallel-rank only to a DP>1 consumer, with the rank the decision named (and its control address to E)', async () => {
    const mc = deployments.get('mooncake E→PD') as Deployment;
    for (const s of h.sims) s.clearRequests();
    for (let i = 0; i < 2; i++) expect((await post(h, chat(mc.route, [image(10 + i)]))).status).toBe(200);
    const ranks = inferenceRequests(mc.consumer).map((r) => r.headers['x-data-parallel-rank']);
    expect(ranks.sort()).toEqual(['0', '1']);
    const zmqs = [...mc.encoders]
      .flatMap((e) => inferenceRequests(e))
      .map((r) => (r.body as { ec_transfer_params: { consumer_zmq: string } }).ec_transfer_params.consumer_zmq);
    expect(zmqs.sort()).toEqual([...(mc.consumer.ecControlAddresses ?? [])].sort());
    for (const other of ['mooncake E→P→D', 'nixl E→PD', 'shared-storage E→P→D']) {
      const d = deployments.get(other) as Deployment;
      expect((await post(h, chat(d.route, [image(20)]))).status).toBe(200);
      for (const s of [d.consumer, d.decode]) {
        for (const r of s === undefined ? [] : inferenceRequests(s)) expect(r.headers['x-data-parallel-rank']).toBeUndefined();
      }
    }
  });

  it.each([false, true])(
    'Mooncake: a push that never arrives fails the consumer after its wait, and a re-encode recovers (stream %s)',
    async (stream) => {
      const d = deployments.get('mooncake E→P→D') as Deployment;
      d.encoders[0].setFault({ mode: 'lose-ec-push', count: 1 });
      const before = {
        timeouts: sum([d.consumer], 'pushWaitTimeouts'),
        lost: sum(d.encoders, 'pushFailures'),
        requests: sum(d.encoders, 'encoderRequests'),
      };
      const res = await post(h, chat(d.route, [image(30 + Number(stream))], stream ? { stream: true } : {}));
      expect(res.status).toBe(200);
      const text = await res.text();
      expect(text).not.toContain('"error"');
      if (stream) expect(text.trimEnd().endsWith('data: [DONE]')).toBe(true);
      // The first push was lost: the prefill waited out its push timeout and failed; the gateway encoded again with
      // new transfer ids, and the second push arrived.
      expect(sum([d.consumer], 'pushWaitTimeouts') - before.timeouts).toBe(1);
      expect(sum(d.encoders, 'pushFailures') - before.lost).toBe(1);
      expect(sum(d.encoders, 'encoderRequests') - before.requests).toBe(2);
      // The count and the log line may land just after the answer.
      await waitFor(
        async () =>
          /triad_gateway_ec_handoff_failures_total\{reason="push_timeout"\} [1-9]/.test(
            await (await fetch(`http://127.0.0.1:${h.gateway.metricsPort}/metrics`)).text(),
          ),
        { what: 'push_timeout counted' },
      );
      await waitFor(
        () => h.logLines.some((l) => l['msg'] === 'EC hand-off failed' && l['reason'] === 'push_timeout' && l['stage'] === 'prefill'),
        { what: 'push_timeout logged' },
      );
    },
  );

  it('Mooncake: a consumer that publishes no control address is a 502 naming the stage and pod, counted and logged', async () => {
    const d = deployments.get('mooncake E→P→D') as Deployment;
    const { ecControlAddresses: _gone, ...bare } = d.refs.attempt.prefill as EndpointRef;
    const decide = h.decide;
    h.decide = (r) =>
      ({ ...(decide(r) as { ok: true } & Record<string, unknown>), attempts: [{ ...d.refs.attempt, prefill: bare }] }) as never;
    try {
      const res = await post(h, chat(d.route, [image(40)]));
      expect(res.status).toBe(502);
      const err = ((await res.json()) as { error: { message: string } }).error;
      expect(err.message).toMatch(/^prefill has no EC control address for DP rank 0/);
      // The request's end (metric, log line) is recorded just after its answer is written.
      await waitFor(
        async () =>
          /triad_gateway_ec_handoff_failures_total\{reason="missing_consumer_address"\} 1/.test(
            await (await fetch(`http://127.0.0.1:${h.gateway.metricsPort}/metrics`)).text(),
          ),
        { what: 'missing address counted' },
      );
      await waitFor(() => h.logLines.some((l) => l['msg'] === 'EC hand-off failed' && l['reason'] === 'missing_consumer_address'), {
        what: 'missing address logged',
      });
    } finally {
      h.decide = decide;
    }
  });
});
