import type { Placement } from '../topology/placement';
import { planEncoderRegistries, type EngineState } from './registry-plan';

const at = (pod: string, role: Placement['role'], ip: string, group?: string, over: Partial<Placement> = {}): Placement => ({
  key: `default.ms.${pod}`,
  namespace: 'default',
  modelServer: 'ms',
  pod,
  role,
  ip,
  port: role === 'encode' ? 9000 : 8000,
  engine: 'SGLang',
  mode: 'epd',
  ...(group ? { group } : {}),
  ...(role === 'prefill' ? { registryOwner: true } : {}),
  ...over,
});
const healthy: EngineState = { healthy: true, load: 0 };
const members = (plan: ReturnType<typeof planEncoderRegistries>) =>
  Object.fromEntries([...plan].map(([k, v]) => [k, [...v.want].map(([url, w]) => `${url}${w.healthy ? '' : ' (unhealthy)'}`).sort()]));

describe('encoder registry plan', () => {
  it('gives each language-only prefill the encoders of its group plus ungrouped ones, on the registry port (8997 by default)', () => {
    const plan = planEncoderRegistries(
      [
        at('p1', 'prefill', '10.0.0.1', 'g1'),
        at('p2', 'prefill', '10.0.0.2', 'g2'),
        at('e1', 'encode', '10.0.1.1', 'g1'),
        at('e2', 'encode', '10.0.1.2', 'g2'),
        at('e3', 'encode', '10.0.1.3'),
        at('e4', 'encode', '10.0.1.4', 'g1'),
        at('d1', 'decode', '10.0.2.1', 'g1'),
      ],
      (p) => (p.pod === 'e4' ? { healthy: false, load: 0 } : healthy),
      { encodersPerPrefill: 0 },
    );
    expect(members(plan)).toEqual({
      'http://10.0.0.1:8997': ['http://10.0.1.1:9000', 'http://10.0.1.3:9000', 'http://10.0.1.4:9000 (unhealthy)'],
      'http://10.0.0.2:8997': ['http://10.0.1.2:9000', 'http://10.0.1.3:9000'],
    });
    expect(plan.get('http://10.0.0.1:8997')).toMatchObject({ portSource: 'default', prefills: ['default.ms.p1'] });
  });

  it('takes the registry port from the annotation over /server_info, and skips servers that are not language-only', () => {
    const plan = planEncoderRegistries(
      [
        at('p1', 'prefill', '10.0.0.1', 'g1', { encoderBootstrapPort: 7001 }),
        at('p2', 'prefill', '10.0.0.2', 'g1'),
        at('p3', 'prefill', '10.0.0.3', 'g1'),
      ],
      (p) => ({
        healthy: true,
        load: 0,
        serverInfo: p.pod === 'p3' ? { languageOnly: false } : { languageOnly: true, encoderBootstrapPort: 7002 },
      }),
      { encodersPerPrefill: 0 },
    );
    const ports = [...plan.values()].map((r) => [r.registryUrl, r.portSource]);
    expect(ports).toEqual([
      ['http://10.0.0.1:7001', 'annotation'],
      ['http://10.0.0.2:7002', 'server-info'],
    ]);
  });

  it('ignores vLLM and non-epd ModelServers, and keeps a prefill with no encoder (empty registry)', () => {
    const plan = planEncoderRegistries(
      [
        at('p1', 'prefill', '10.0.0.1', 'g1', { engine: 'vLLM' }),
        at('e1', 'encode', '10.0.1.1', 'g1', { engine: 'vLLM' }),
        at('p2', 'prefill', '10.0.0.2', 'g1', { mode: 'pd', registryOwner: undefined }),
        at('p3', 'prefill', '10.0.0.3', 'g1'),
      ],
      () => healthy,
      { encodersPerPrefill: 0 },
    );
    expect([...plan.keys()]).toEqual(['http://10.0.0.3:8997']);
    expect(plan.get('http://10.0.0.3:8997')?.want.size).toBe(0);
  });

  describe('spreading N encoders per registry', () => {
    const prefills = ['p1', 'p2', 'p3'].map((p, i) => at(p, 'prefill', `10.0.0.${i + 1}`, 'g'));
    const encoders = ['e1', 'e2', 'e3', 'e4'].map((e, i) => at(e, 'encode', `10.0.1.${i + 1}`, 'g'));
    const all = [...prefills, ...encoders];

    it('balances encoders over registries, the least loaded first', () => {
      const load: Record<string, number> = { e1: 5, e2: 0, e3: 1, e4: 9 };
      const plan = planEncoderRegistries(all, (p) => ({ healthy: true, load: load[p.pod] ?? 0 }), { encodersPerPrefill: 1 });
      const chosen = [...plan.values()].map((r) => [...r.want.keys()][0]);
      expect(new Set(chosen).size).toBe(3);
      expect(chosen).not.toContain('http://10.0.1.4:9000');
    });

    it('keeps earlier choices while valid, and swaps an unhealthy member for a healthy spare', () => {
      const first = planEncoderRegistries(all, () => healthy, { encodersPerPrefill: 1 });
      const previous = new Map([...first].map(([k, v]) => [k, new Set(v.want.keys())]));
      const again = planEncoderRegistries(all, () => ({ healthy: true, load: 100 }), { encodersPerPrefill: 1, previous });
      expect(members(again)).toEqual(members(first));
      const sick = [...(previous.get('http://10.0.0.1:8997') ?? [])][0];
      const sickState = (p: Placement) => ({ healthy: `http://${p.ip}:9000` !== sick, load: 0 });
      const swapped = planEncoderRegistries(all, sickState, { encodersPerPrefill: 1, previous });
      expect(swapped.get('http://10.0.0.1:8997')?.want.has(sick)).toBe(false);
      expect(swapped.get('http://10.0.0.1:8997')?.want.size).toBe(1);
      expect(members(swapped)['http://10.0.0.2:8997']).toEqual(members(first)['http://10.0.0.2:8997']);
    });
  });
});
