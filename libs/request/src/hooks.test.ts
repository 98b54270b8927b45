import { composeHooks, type RequestHooks } from './hooks';
import { proxyRequest, requestContext } from './testing';

const decision = {
  id: 'r',
  ok: true as const,
  mode: 'aggregated' as const,
  attempts: [{ endpoint: { key: 'k', pod: 'p', ip: '10.0.0.1', port: 1 } }],
  encoders: [],
};

describe('composeHooks', () => {
  it('calls each point in order, ends in reverse order, and leaves points no hook implements undefined', async () => {
    const calls: string[] = [];
    const hook = (name: string): RequestHooks => ({
      onRequest: () => calls.push(`${name}.request`),
      admit: async () => {
        calls.push(`${name}.admit`);
      },
      onEnd: () => calls.push(`${name}.end`),
    });
    const hooks = composeHooks([hook('tracing'), hook('admission')]);
    const ctx = requestContext();
    hooks.onRequest?.(ctx);
    await hooks.admit?.(ctx);
    hooks.onEnd?.(ctx);
    expect(calls).toEqual(['tracing.request', 'admission.request', 'tracing.admit', 'admission.admit', 'admission.end', 'tracing.end']);
    expect(hooks.onRouted).toBeUndefined();
    expect(hooks.onStageStart).toBeUndefined();
  });

  it('stops admission at the first refusal', async () => {
    const admitted: string[] = [];
    const refusal = new Error('no');
    const hooks = composeHooks([
      {
        admit: () => {
          throw refusal;
        },
      },
      {
        admit: () => {
          admitted.push('second');
        },
      },
    ]);
    await expect(hooks.admit?.(requestContext())).rejects.toBe(refusal);
    expect(admitted).toEqual([]);
  });

  it('merges the stage spans of several hooks: all headers on the leg, every span ended', () => {
    const ended: string[] = [];
    const span = (name: string): RequestHooks => ({
      onStageStart: () => ({ headers: { [`x-${name}`]: name }, end: (ok, status) => ended.push(`${name}:${ok}:${status}`) }),
    });
    const hooks = composeHooks([span('a'), { onStageStart: () => undefined }, span('b')]);
    const ctx = proxyRequest({ decision });
    const merged = hooks.onStageStart?.(ctx, 'decode', decision.attempts[0].endpoint, 0);
    expect(merged?.headers).toEqual({ 'x-a': 'a', 'x-b': 'b' });
    merged?.end(true, 200);
    expect(ended).toEqual(['a:true:200', 'b:true:200']);
  });
});
