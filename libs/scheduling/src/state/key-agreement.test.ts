import { KeyAgreement } from './key-agreement';
import { KvBlockIndex } from './kv-block-index';

const k = (i: number): string => i.toString(16).padStart(16, '0');

describe('KeyAgreement', () => {
  it('counts the keys an engine reported, before the decision or within the settle time, per ModelServer', () => {
    const index = new KvBlockIndex();
    const agreement = new KeyAgreement(index, { settleMs: 1_000 });
    index.store('s', 'ns/p', [k(1)]);
    agreement.observe('ns/a', [k(1), k(2), k(3)], 0);
    // The engine prefills the request and reports block 2 (block 3 never: a key the engine does not compute).
    index.store('s', 'ns/p', [k(2)]);
    index.remove('s', [k(1)]); // reported earlier, evicted since: still counted
    agreement.settle(999);
    expect(agreement.counts().size).toBe(0);
    agreement.settle(1_000);
    expect(agreement.counts().get('ns/a')).toEqual({ computed: 3, matched: 2 });
  });

  it('finds keys stored in any KV-cache group', () => {
    const index = new KvBlockIndex();
    const agreement = new KeyAgreement(index, { settleMs: 0 });
    index.store('s', 'ns/p', [`${k(7)}~1`]);
    agreement.observe('ns/h', [k(7), k(8)], 5);
    expect(agreement.counts().get('ns/h')).toEqual({ computed: 2, matched: 1 });
  });

  it('settles the oldest early when too many wait', () => {
    const agreement = new KeyAgreement(new KvBlockIndex(), { settleMs: 60_000, maxPending: 2 });
    for (let i = 0; i < 3; i++) agreement.observe('ns/x', [k(i)], i);
    expect(agreement.counts().get('ns/x')).toEqual({ computed: 1, matched: 0 });
  });
});
