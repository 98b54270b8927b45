import { buildIndex, candidatesOf, pluginContext, schedulingRequest } from '../../testing';
import { MaxScorePicker } from './max-score';

const pods = ['a', 'b', 'c', 'd', 'e'];

function pick(finals: number[], id = 'r1', order = pods, count = 3, pending?: number[]): string[] {
  const candidates = candidatesOf(buildIndex(order.map((pod) => ({ pod }))), order);
  const ctx = pluginContext({ request: schedulingRequest({ id }) });
  const f = Float64Array.from(order.map((p) => finals[pods.indexOf(p)]));
  const input = pending
    ? {
        candidates,
        finals: f,
        count,
        pending: Int32Array.from(order.map((p) => pending[pods.indexOf(p)])),
      }
    : { candidates, finals: f, count };
  return new MaxScorePicker('max-score').pick(ctx, input).order.map((i) => candidates.endpoint(i).record.pod);
}

describe('max-score', () => {
  it('orders by final score', () => {
    expect(pick([10, 300, 50, 200, 0])).toEqual(['b', 'd', 'c']);
  });

  it('breaks ties the same way for the same request, whatever the input order', () => {
    const ties = [7, 7, 7, 7, 7];
    const first = pick(ties, 'req-42', pods, 5);
    expect(pick(ties, 'req-42', [...pods].reverse(), 5)).toEqual(first);
    expect(pick(ties, 'req-42', ['c', 'a', 'e', 'b', 'd'], 5)).toEqual(first);
  });

  it('spreads tied endpoints across requests', () => {
    const firsts = new Set(Array.from({ length: 40 }, (_, i) => pick([1, 1, 1, 1, 1], `req-${i}`, pods, 1)[0]));
    expect(firsts.size).toBe(5);
  });

  it('puts endpoints with fewer items of this request first when placing several items', () => {
    expect(pick([100, 90, 80, 0, 0], 'r1', pods, 3, [1, 0, 0, 1, 1])).toEqual(['b', 'c', 'a']);
  });
});
