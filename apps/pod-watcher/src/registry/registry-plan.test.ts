import type { Placement } from '../topology/placement';
import { planEncoderRegistries } from './registry-plan';

const at = (pod: string, role: Placement['role'], ip: string, group?: string, over: Partial<Placement> = {}): Placement => ({
  key: `default.ms.${pod}`, namespace: 'default', modelServer: 'ms', pod, role, ip, port: role === 'encode' ? 9000 : 8000,
  engine: 'SGLang', mode: 'epd', ...(group ? { group } : {}), ...over,
});

describe('encoder registry plan', () => {
  it('gives each language-only prefill the healthy encoders of its group plus ungrouped ones', () => {
    const plan = planEncoderRegistries([
      at('p1', 'prefill', '10.0.0.1', 'g1'), at('p2', 'prefill', '10.0.0.2', 'g2'),
      at('e1', 'encode', '10.0.1.1', 'g1'), at('e2', 'encode', '10.0.1.2', 'g2'), at('e3', 'encode', '10.0.1.3'),
      at('e4', 'encode', '10.0.1.4', 'g1'), at('d1', 'decode', '10.0.2.1', 'g1'),
    ], (p) => p.pod !== 'e4');
    expect(Object.fromEntries([...plan].map(([k, v]) => [k, [...v].sort()]))).toEqual({
      'http://10.0.0.1:8000': ['http://10.0.1.1:9000', 'http://10.0.1.3:9000'],
      'http://10.0.0.2:8000': ['http://10.0.1.2:9000', 'http://10.0.1.3:9000'],
    });
  });

  it('ignores vLLM and non-epd ModelServers, and keeps a prefill with no encoder (empty registry)', () => {
    const plan = planEncoderRegistries([
      at('p1', 'prefill', '10.0.0.1', 'g1', { engine: 'vLLM' }), at('e1', 'encode', '10.0.1.1', 'g1', { engine: 'vLLM' }),
      at('p2', 'prefill', '10.0.0.2', 'g1', { mode: 'pd' }), at('p3', 'prefill', '10.0.0.3', 'g1'),
    ], () => true);
    expect([...plan.keys()]).toEqual(['http://10.0.0.3:8000']);
    expect(plan.get('http://10.0.0.3:8000')?.size).toBe(0);
  });
});
