import { EngineHttpError } from '../http/engine-error';
import { checkDpRank, requestedDpRank, resolveLoadBalanceMethod } from './dp-rank';

describe('DP rank of a SGLang request', () => {
  it('takes the X-Data-Parallel-Rank header over routed_dp_rank, and routed_dp_rank over data_parallel_rank', () => {
    expect(requestedDpRank({ 'x-data-parallel-rank': ' 1 ' }, { routed_dp_rank: 0 })).toBe(1);
    expect(requestedDpRank({}, { routed_dp_rank: 0, data_parallel_rank: 1 })).toBe(0);
    expect(requestedDpRank({}, { data_parallel_rank: 1 })).toBe(1);
    expect(requestedDpRank({}, {})).toBeUndefined();
  });

  it("rejects a header that is not an integer with SGLang's text", () => {
    const message = "Invalid X-Data-Parallel-Rank header: must be an integer, got '1.5'";
    expect(() => requestedDpRank({ 'x-data-parallel-rank': '1.5' }, {})).toThrow(new EngineHttpError(400, message));
    expect(() => requestedDpRank({}, { routed_dp_rank: 'x' })).toThrow(EngineHttpError);
  });

  it('ignores rank 0 without DP and reports any other rank outside [0, dp)', () => {
    expect(checkDpRank(0, 1)).toEqual({ rank: undefined });
    expect(checkDpRank(1, 2)).toEqual({ rank: 1 });
    expect(checkDpRank(2, 2)).toEqual({ error: 'routed_dp_rank=2 out of range [0, 2)' });
    expect(checkDpRank(-1, 4)).toEqual({ error: 'routed_dp_rank=-1 out of range [0, 4)' });
  });

  it('resolves auto to follow_bootstrap_room on a prefill and round_robin elsewhere', () => {
    expect(resolveLoadBalanceMethod('auto', 'prefill')).toBe('follow_bootstrap_room');
    expect(resolveLoadBalanceMethod(undefined, 'decode')).toBe('round_robin');
    expect(resolveLoadBalanceMethod('round_robin', 'prefill')).toBe('round_robin');
  });
});
