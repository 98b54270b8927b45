import { AffinityBatchSchema, DispatchBatchSchema, Subjects, decodeMessage, type AffinityBatch, type DispatchBatch } from '@triad/bus';
import { connectBus, type Bus } from '@triad/bus/client';
import { mediaContentKey } from '@triad/scheduling';
import { waitFor } from '@triad/testing';
import { accessLines, startHarness, type Harness } from './support/harness';
import { startSchedulerService, type SchedulerService } from './support/scheduler-service';
import { vllmEpdSpec } from './support/specs';

const MODEL = 'Qwen/Qwen2.5-VL-3B-Instruct';
const REQUESTS = 20;
/** The scheduler's affinity window in this test: long, so that requests share it however slow the machine is. */
const AFFINITY_WINDOW_MS = 1000;
/** The gateway's dispatch window in the in-process test, for the same reason. */
const DISPATCH_WINDOW_MS = 1000;

/** What crosses NATS on the subjects a request makes the stack publish mid-request, as a subscriber receives it. */
class Messages {
  readonly affinity: { at: number; batch: AffinityBatch }[] = [];
  readonly dispatch: { at: number; batch: DispatchBatch }[] = [];

  constructor(bus: Bus) {
    bus.nc.subscribe(Subjects.affinity, {
      callback: (_e, m) => {
        const d = decodeMessage(AffinityBatchSchema, m.data);
        if (d.ok) this.affinity.push({ at: Date.now(), batch: d.value });
      },
    });
    bus.nc.subscribe(Subjects.dispatch, {
      callback: (_e, m) => {
        const d = decodeMessage(DispatchBatchSchema, m.data);
        if (d.ok) this.dispatch.push({ at: Date.now(), batch: d.value });
      },
    });
  }

  /** Media keys the encode records of `origin` taught (one per image request). */
  encoderKeys(origin: (o: string) => boolean): Set<string> {
    const keys = new Set<string>();
    for (const { batch } of this.affinity)
      if (origin(batch.origin)) for (const r of batch.records) if (r.role === 'encode') for (const k of r.mediaKeys ?? []) keys.add(k);
    return keys;
  }

  /** Leg events of the requests named `prefix…` the dispatch messages carried. */
  legEvents(prefix: string): number {
    return this.dispatch.reduce((n, { batch }) => n + batch.events.filter((e) => e.requestId.startsWith(prefix)).length, 0);
  }
}

const imageUrl = (i: number): string => `https://example.com/image-${i}.png`;

/** Whether the encoder records seen name the image of every request `0..REQUESTS-1`. */
function everyImage(keys: ReadonlySet<string>): boolean {
  for (let i = 0; i < REQUESTS; i++) if (!keys.has(mediaContentKey({ url: imageUrl(i) }))) return false;
  return true;
}

function imageBody(i: number): string {
  return JSON.stringify({
    model: 'vl',
    max_tokens: 4,
    messages: [
      {
        role: 'user',
        content: [
          { type: 'text', text: 'what is it?' },
          { type: 'image_url', image_url: { url: imageUrl(i) } },
        ],
      },
    ],
  });
}

async function post(h: Harness, id: string, body: string): Promise<number> {
  const res = await fetch(`${h.gateway.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-request-id': id },
    body,
  });
  await res.arrayBuffer();
  return res.status;
}

/** EPD sims and records for `vl`; the scheduler is whatever the test runs. */
async function epdStack(h: Harness): Promise<void> {
  const e = await h.startSim({ engine: 'vllm', role: 'encode', host: '127.0.11.1', model: MODEL });
  const p = await h.startSim({ engine: 'vllm', role: 'prefill', host: '127.0.11.2', model: MODEL });
  const d = await h.startSim({ engine: 'vllm', role: 'decode', host: '127.0.11.3', model: MODEL });
  await h.putServer('vl', vllmEpdSpec(MODEL, 'vl'));
  await h.putRoute('vl', { modelName: 'vl', rules: [{ targetModels: [{ modelServerName: 'vl', weight: 100 }] }] });
  await h.putEndpoint('vl', 'e', 'encode', e, { group: 'g1' });
  await h.putEndpoint('vl', 'p', 'prefill', p, { group: 'g1' });
  await h.putEndpoint('vl', 'd', 'decode', d, { group: 'g1' });
  await h.waitForModel('vl');
}

describe('NATS messages per EPD request, on a real nats-server', () => {
  describe('with the scheduler service', () => {
    let h: Harness;
    let scheduler: SchedulerService | undefined;
    let counter: Bus;

    beforeAll(async () => {
      // A budget no loaded machine overruns: every request is decided by the service, never locally.
      h = await startHarness({ config: { scheduleBudgetMs: 5_000 } });
      await h.stopScheduler();
      scheduler = await startSchedulerService(h.nats.url, {
        args: ['--instance-id', 'svc'],
        env: { TRIAD_AFFINITY_FLUSH_MS: String(AFFINITY_WINDOW_MS) },
      });
      await epdStack(h);
      await scheduler.ready();
      // The scheduler may still be replaying KV when it says ready: one request it places first.
      await waitFor(async () => (await post(h, 'warm', imageBody(-1))) === 200, { what: 'a request placed', timeoutMs: 20_000 });
      counter = await connectBus({ servers: h.nats.url, name: 'message-counter' });
    }, 60_000);
    afterAll(async () => {
      await scheduler?.stop();
      await counter?.close();
      await h?.close();
    });

    it("coalesces the scheduler's affinity records over its window, and every record and leg event still arrives", async () => {
      const seen = new Messages(counter);
      await counter.nc.flush();
      const from = Date.now();
      for (let i = 0; i < REQUESTS; i++) expect(await post(h, `svc-${i}`, imageBody(i))).toBe(200);
      const elapsed = Date.now() - from;
      const during = seen.affinity.filter((m) => m.batch.origin === 'svc').length;
      // Each message's window starts at the first record after the previous message: at most one per window, plus
      // one whose window began before the count did (the warm-up request's records).
      expect(during).toBeLessThanOrEqual(Math.floor(elapsed / AFFINITY_WINDOW_MS) + 1);
      // Nothing is lost to the coalescing: every request's encoder record reaches the subscribers once its window
      // ends, and every leg's start and finish reach them.
      await waitFor(() => everyImage(seen.encoderKeys((o) => o === 'svc')), { what: 'every encoder record', timeoutMs: 10_000 });
      await waitFor(() => seen.legEvents('svc-') === REQUESTS * 6, { what: 'start and finish of every leg' });
      expect(accessLines(h).filter((l) => String(l['request_id']).startsWith('svc-') && l['decided_locally'] === false)).toHaveLength(
        REQUESTS,
      );
    });
  });

  describe('with in-process scheduling', () => {
    let h: Harness;
    let counter: Bus;

    beforeAll(async () => {
      // Long windows (and no periodic snapshot inside the run), so that requests share them however slow the machine.
      h = await startHarness({
        config: { scheduling: 'in-process', dispatchFlushMs: DISPATCH_WINDOW_MS, snapshotIntervalMs: 600_000 },
      });
      await h.stopScheduler();
      await epdStack(h);
      counter = await connectBus({ servers: h.nats.url, name: 'message-counter' });
    }, 60_000);
    afterAll(async () => {
      await counter?.close();
      await h?.close();
    });

    it("sends the gateway's affinity records with its dispatch events, not one message per decision", async () => {
      const seen = new Messages(counter);
      await counter.nc.flush();
      const from = Date.now();
      for (let i = 0; i < REQUESTS; i++) expect(await post(h, `local-${i}`, imageBody(i))).toBe(200);
      const elapsed = Date.now() - from;
      const local = (o: string): boolean => o.endsWith('/local');
      const during = (list: readonly { at: number }[]): number => list.filter((m) => m.at <= from + elapsed).length;
      // One flush per window: the first event or record after a flush starts the next window.
      const bound = Math.floor(elapsed / DISPATCH_WINDOW_MS) + 1;
      expect(during(seen.dispatch)).toBeLessThanOrEqual(bound);
      expect(during(seen.affinity.filter((m) => local(m.batch.origin)))).toBeLessThanOrEqual(bound);
      await waitFor(() => everyImage(seen.encoderKeys(local)), { what: 'every encoder record', timeoutMs: 10_000 });
      await waitFor(() => seen.legEvents('local-') === REQUESTS * 6, { what: 'start and finish of every leg', timeoutMs: 10_000 });
      // Each affinity message left in a flush of the dispatch publisher, together with its events.
      expect(seen.affinity.filter((m) => local(m.batch.origin)).length).toBeLessThanOrEqual(seen.dispatch.length);
    });
  });
});
