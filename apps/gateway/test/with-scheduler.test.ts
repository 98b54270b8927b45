import type { SimEngineHandle } from '@triad/engine-sim';
import { waitFor } from '@triad/testing';
import { accessLines, inferenceRequests, startHarness, type Harness } from './support/harness';
import { startSchedulerService, type SchedulerService } from './support/scheduler-service';
import { vllmEpdSpec } from './support/specs';

const MODEL = 'Qwen/Qwen2.5-VL-3B-Instruct';

describe('gateway with the real scheduler service (triad scheduler as a child process)', () => {
  let h: Harness;
  let scheduler: SchedulerService | undefined;
  let e: SimEngineHandle;
  let p: SimEngineHandle;
  let d: SimEngineHandle;

  beforeAll(async () => {
    // What is checked is that the service decides: a budget no loaded test machine overruns, so the gateway never
    // falls back to deciding locally (its 50 ms production default is covered by the fallback tests).
    h = await startHarness({ config: { scheduleBudgetMs: 5_000 } });
    await h.stopScheduler(); // the stand-in steps aside for the real one
    scheduler = await startSchedulerService(h.nats.url);
    e = await h.startSim({ engine: 'vllm', role: 'encode', host: '127.0.9.1', model: MODEL });
    p = await h.startSim({ engine: 'vllm', role: 'prefill', host: '127.0.9.2', model: MODEL });
    d = await h.startSim({ engine: 'vllm', role: 'decode', host: '127.0.9.3', model: MODEL });
    await h.putServer('vl', vllmEpdSpec(MODEL, 'vl'));
    await h.putRoute('vl', { modelName: 'vl', rules: [{ targetModels: [{ modelServerName: 'vl', weight: 100 }] }] });
    await h.putEndpoint('vl', 'e', 'encode', e, { group: 'g1' });
    await h.putEndpoint('vl', 'p', 'prefill', p, { group: 'g1' });
    await h.putEndpoint('vl', 'd', 'decode', d, { group: 'g1' });
    await scheduler.ready();
    await h.waitForModel('vl');
  }, 60_000);
  afterAll(async () => {
    await scheduler?.stop();
    await h?.close();
  });

  it('runs E→P→D on the endpoints the scheduler chose, decided by the service, not locally', async () => {
    const body = {
      model: 'vl',
      max_tokens: 4,
      messages: [
        {
          role: 'user',
          content: [
            { type: 'text', text: 'what is it?' },
            { type: 'image_url', image_url: { url: 'https://example.com/x.png' } },
          ],
        },
      ],
    };
    // The scheduler may still be replaying KV when it says ready; retry until it places the request.
    await waitFor(
      async () => {
        const res = await fetch(`${h.gateway.url}/v1/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-request-id': 'svc-1' },
          body: JSON.stringify(body),
        });
        return res.status === 200;
      },
      { what: 'request placed by the scheduler', timeoutMs: 20_000 },
    );
    await waitFor(() => accessLines(h).some((l) => l['request_id'] === 'svc-1' && l['status_code'] === 200), { what: 'access line' });
    const line = accessLines(h)
      .filter((l) => l['request_id'] === 'svc-1' && l['status_code'] === 200)
      .pop();
    expect(line).toMatchObject({ decided_locally: false, endpoints: { encode: ['e'], prefill: ['p'], decode: ['d'] } });
    expect(inferenceRequests(e).length).toBeGreaterThanOrEqual(1);
    expect(inferenceRequests(d).length).toBeGreaterThanOrEqual(1);
  });
});
