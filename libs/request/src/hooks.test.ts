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
    expect(() => hooks.admit?.(requestContext())).toThrow(refusal);
    expect(admitted).toEqual([]);
  });

  it('admits synchronously until a hook makes the request wait, then waits for it before the next hook', async () => {
    const calls: string[] = [];
    let release!: () => void;
    const hooks = composeHooks([
      { admit: () => void calls.push('first') },
      {
        admit: () => {
          calls.push('second waits');
          return new Promise<void>((resolve) => (release = resolve));
        },
      },
      { admit: () => void calls.push('third') },
    ]);
    const sync = composeHooks([{ admit: () => void calls.push('a') }, { admit: () => void calls.push('b') }]);
    expect(sync.admit?.(requestContext())).toBeUndefined();
    expect(calls).toEqual(['a', 'b']);
    calls.length = 0;
    const pending = hooks.admit?.(requestContext());
    expect(pending).toBeInstanceOf(Promise);
    expect(calls).toEqual(['first', 'second waits']);
    release();
    await pending;
    expect(calls).toEqual(['first', 'second waits', 'third']);
  });

  it('a point only one hook implements calls that hook with its own this, and a lone stage span is returned as is', () => {
    const span = { headers: { traceparent: 't' }, end: () => undefined };
    const tracer = {
      seen: [] as string[],
      onRequest(this: { seen: string[] }) {
        this.seen.push('request');
      },
      onStageStart: () => span,
    };
    const hooks = composeHooks([tracer, { admit: () => undefined }, { onStageStart: () => undefined }]);
    hooks.onRequest?.(requestContext());
    expect(tracer.seen).toEqual(['request']);
    expect(hooks.onStageStart?.(proxyRequest({ decision }), 'decode', decision.attempts[0].endpoint, 0)).toBe(span);
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
