import { applyScorer, buildIndex, candidatesOf, pluginContext, schedulingRequest } from '../../testing';
import { RandomScorer } from './random';

const pods = ['a', 'b', 'c', 'd', 'e', 'f'];

function scores(id: string): number[] {
  const c = candidatesOf(buildIndex(pods.map((pod) => ({ pod }))), pods);
  return applyScorer(new RandomScorer('random'), pluginContext({ request: schedulingRequest({ id }) }), c);
}

describe('random', () => {
  it('draws integers 0..100, the same for the same request id', () => {
    const first = scores('r1');
    expect(scores('r1')).toEqual(first);
    for (const v of first) {
      expect(Number.isInteger(v)).toBe(true);
      expect(v).toBeGreaterThanOrEqual(0);
      expect(v).toBeLessThanOrEqual(100);
    }
  });

  it('differs across request ids', () => {
    const distinct = new Set(['r1', 'r2', 'r3', 'r4', 'r5'].map((id) => scores(id).join(',')));
    expect(distinct.size).toBe(5);
  });
});
