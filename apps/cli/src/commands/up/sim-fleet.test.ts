import { SimFleet, type RunningSim } from './sim-fleet';
import type { SimSpec } from './sim-plan';

const spec = (key: string, port = 8000): SimSpec => ({
  key,
  modelServer: 'default/ms',
  engine: 'vllm',
  role: 'both',
  host: '127.0.0.1',
  port,
  model: 'm',
  usesSharedEc: false,
  loraAdapters: [],
});

/** A fleet over fake sims that records what happened, in order. */
function fleet(drainMs: number, failKeys: string[] = []) {
  const log: string[] = [];
  let closed: () => void = () => undefined;
  const closedOnce = () =>
    new Promise<void>((r) => {
      closed = r;
    });
  const f = new SimFleet(
    async (s) => {
      if (failKeys.includes(s.key)) throw new Error('EADDRINUSE');
      log.push(`start ${s.key}:${s.port}`);
      const sim: RunningSim = {
        url: `http://${s.host}:${s.port}`,
        close: async () => {
          log.push(`close ${s.key}:${s.port}`);
          closed();
        },
      };
      return sim;
    },
    { started: () => undefined, stopped: () => undefined, failed: (s) => log.push(`failed ${s.key}`) },
    drainMs,
  );
  return { f, log, closedOnce };
}

describe('SimFleet', () => {
  it('starts new pods, restarts changed ones, and keeps unchanged ones running', async () => {
    const { f, log } = fleet(60_000);
    await f.apply([spec('a'), spec('b')]);
    await f.apply([spec('a'), spec('b', 9000), spec('c')]);
    expect(log).toEqual(['start a:8000', 'start b:8000', 'close b:8000', 'start b:9000', 'start c:8000']);
    await f.closeAll();
  });

  it("closes a removed pod's sim after the drain time, and keeps it when the pod comes back first", async () => {
    const { f, log, closedOnce } = fleet(0);
    await f.apply([spec('a'), spec('b')]);
    const closed = closedOnce();
    await f.apply([spec('a')]);
    await closed;
    expect(log).toContain('close b:8000');
    expect(f.keys()).toEqual(['a']);

    const slow = fleet(60_000);
    await slow.f.apply([spec('a')]);
    await slow.f.apply([]);
    expect(slow.f.keys()).toEqual(['a']);
    await slow.f.apply([spec('a')]);
    expect(slow.log).toEqual(['start a:8000']);
    await slow.f.closeAll();
    expect(slow.log).toEqual(['start a:8000', 'close a:8000']);
  });

  it('reports sims that fail to start and keeps the others', async () => {
    const { f, log } = fleet(0, ['bad']);
    const failed = await f.apply([spec('ok'), spec('bad', 9)]);
    expect(failed.map((s) => s.key)).toEqual(['bad']);
    expect(log).toEqual(['start ok:8000', 'failed bad']);
    await f.closeAll();
  });
});
