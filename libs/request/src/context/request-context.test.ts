import type { Decision } from '@triad/bus';
import { RecordingSink, requestContext, serverProfile } from '../testing';
import { RequestContext, isRouted } from './request-context';
import { RequestLocal } from './request-local';

const decision: Decision = {
  id: 'r',
  ok: true,
  mode: 'aggregated',
  attempts: [{ endpoint: { key: 'k', pod: 'p', ip: '10.0.0.1', port: 1 } }],
  encoders: [],
};

describe('RequestContext', () => {
  it('takes the model and stream flag from the body (an unparsed body has model "")', () => {
    expect(requestContext({ body: { model: 'llama', stream: true } })).toMatchObject({ model: 'llama', stream: true });
    expect(requestContext({ body: { model: 3, stream: 'yes' } })).toMatchObject({ model: '', stream: false });
  });

  it('is routed once its route resolved to a target, then prepared for the stage loop', () => {
    const ctx: RequestContext = requestContext();
    expect(isRouted(ctx)).toBe(false);
    const server = serverProfile({ namespace: 'ns', name: 'ms' });
    ctx.routed({ route: 'ns/r', namespace: 'ns', serverName: 'ms', lora: false, server, upstreamModel: 'M' });
    expect(isRouted(ctx)).toBe(true);
    expect(ctx.routing.server.key).toBe('ns/ms');
    ctx.scheduled({ decision, local: true, durationMs: 2 });
    ctx.prepared({
      decision,
      attempts: decision.attempts,
      connector: 'aggregated',
      injectUsage: false,
      clientWantsUsage: false,
      media: [],
      dpRank: undefined,
    });
    expect([ctx.schedule?.local, ctx.proxy.decision]).toEqual([true, decision]);
  });

  it('aborts its signal and what is in flight when the client goes away', () => {
    const ctx = requestContext();
    const aborted: Error[] = [];
    ctx.attach({ abort: (reason) => aborted.push(reason) });
    const signal = ctx.signal;
    expect(signal.aborted).toBe(false);
    const reason = new Error('gone');
    ctx.clientGone(reason);
    expect([signal.aborted, signal.reason]).toEqual([true, reason]);
    expect(aborted).toEqual([reason]);
  });

  it('hands out an already aborted signal when the client left before anyone asked for it', () => {
    const sink = new RecordingSink();
    sink.destroyed = true;
    expect(requestContext({ sink }).signal.aborted).toBe(true);
  });
});

describe('RequestLocal', () => {
  it('keeps one value per request and slot', () => {
    const a = requestContext();
    const b = requestContext();
    const span = new RequestLocal<{ id: number }>('span');
    const ticket = new RequestLocal<string>('ticket');
    span.set(a, { id: 1 });
    ticket.set(a, 't');
    expect([span.get(a), ticket.get(a), span.get(b)]).toEqual([{ id: 1 }, 't', undefined]);
  });
});
