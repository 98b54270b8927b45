import { SCHEMA_VERSION, Subjects, type DispatchBatch } from '@triad/bus';
import type { SimEngineHandle } from '@triad/engine-sim';
import { waitFor } from '@triad/testing';
import { accessLines, startHarness, type Harness } from './support/harness';

const MODEL = 'Qwen/Qwen2.5-0.5B-Instruct';
const encoder = new TextEncoder();

describe('gateway with --scheduling in-process', () => {
  let h: Harness;
  let d1: SimEngineHandle;
  let d2: SimEngineHandle;

  beforeAll(async () => {
    // The harness's stand-in scheduler keeps listening on triad.v1.schedule: in-process mode must not ask it.
    h = await startHarness({ config: { scheduling: 'in-process' } });
    d1 = await h.startSim({ engine: 'vllm', role: 'both', host: '127.0.10.1', model: MODEL });
    d2 = await h.startSim({ engine: 'vllm', role: 'both', host: '127.0.10.2', model: MODEL });
    await h.putServer('agg', {
      model: MODEL,
      inferenceEngine: 'vLLM',
      workloadSelector: { matchLabels: { app: 'agg' } },
      workloadPort: { port: 8000, protocol: 'http' },
    });
    await h.putRoute('chat', { modelName: 'chat', rules: [{ targetModels: [{ modelServerName: 'agg', weight: 100 }] }] });
    await h.putEndpoint('agg', 'd1', 'aggregated', d1);
    await h.putEndpoint('agg', 'd2', 'aggregated', d2);
    await h.waitForModel('chat');
  });
  afterAll(async () => {
    await h?.close();
  });

  const chat = (id: string) =>
    fetch(`${h.gateway.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-request-id': id },
      body: JSON.stringify({ model: 'chat', max_tokens: 2, messages: [{ role: 'user', content: 'hi' }] }),
    });
  const podOf = (id: string): unknown => {
    const line = accessLines(h).find((l) => l['request_id'] === id);
    return (line?.['endpoints'] as { aggregated?: string[]; decode?: string[] } | undefined)?.aggregated?.[0];
  };

  it('decides in the gateway (no scheduling message on NATS) and counts the legs other gateways have in flight', async () => {
    // Another gateway replica reports 50 requests in flight on d1: least-request must steer this gateway to d2.
    const peer: DispatchBatch = {
      v: SCHEMA_VERSION,
      gateway: 'peer-gateway',
      seq: 0,
      events: [],
      inflight: { 'default.agg.d1': 50 },
      snapshotIntervalMs: 60_000,
    };
    h.bus.nc.publish(Subjects.dispatch, encoder.encode(JSON.stringify(peer)));
    let n = 0;
    // The peer batch reaches the gateway asynchronously: wait until a request lands on d2, then hold it to it.
    await waitFor(
      async () => {
        const id = `probe-${n++}`;
        expect((await chat(id)).status).toBe(200);
        await waitFor(() => podOf(id) !== undefined, { what: `access line of ${id}` });
        return podOf(id) === 'd2';
      },
      { what: 'a request placed on d2' },
    );
    const ids = Array.from({ length: 10 }, (_, i) => `steered-${i}`);
    for (const id of ids) expect((await chat(id)).status).toBe(200);
    await waitFor(() => ids.every((id) => podOf(id) !== undefined), { what: 'access lines' });
    expect(ids.map(podOf)).toEqual(ids.map(() => 'd2'));
    const line = accessLines(h).find((l) => l['request_id'] === 'steered-0');
    expect(line).toMatchObject({ decided_locally: true, status_code: 200 });
    expect(h.batches).toEqual([]);
  });
});
