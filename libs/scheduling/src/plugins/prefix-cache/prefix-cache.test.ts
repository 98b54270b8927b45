import { prefixBlockHashes } from '../../hashing/prefix-hashes';
import { applyScorer, buildIndex, candidatesOf, keyOf, pluginContext, schedulingRequest } from '../../testing';
import { PrefixCacheScorer } from './prefix-cache';
import { PrefixStore } from './prefix-store';

const params = { blockSizeToHash: 64, maxBlocksToMatch: 128, maxHashCacheSize: 50_000, topKMatches: 5 };

function score(plugin: PrefixCacheScorer, hashes: string[], pods = ['a', 'b', 'c'], model = 'm'): number[] {
  const c = candidatesOf(buildIndex(pods.map((pod) => ({ pod }))), pods);
  return applyScorer(plugin, pluginContext({ request: schedulingRequest({ model, prefixHashes: hashes }) }), c);
}

describe('prefix-cache', () => {
  it('scores matchLen/len·100 from the longest held prefix, 0 for no match', () => {
    const plugin = new PrefixCacheScorer('prefix-cache', params);
    plugin.store.insert('m', ['h1', 'h2'], keyOf('a'));
    plugin.store.insert('m', ['h1', 'h2', 'h3', 'h4'], keyOf('b'));
    // b holds h4 (4/4), a's longest is h2 (2/4), c nothing.
    expect(score(plugin, ['h1', 'h2', 'h3', 'h4'])).toEqual([50, 100, 0]);
    // Only the first block shared: 1/4.
    expect(score(plugin, ['h1', 'x2', 'x3', 'x4'])).toEqual([25, 25, 0]);
  });

  it('ignores matches of another model and of endpoints that are not candidates', () => {
    const plugin = new PrefixCacheScorer('prefix-cache', params);
    plugin.store.insert('other', ['h1'], keyOf('a'));
    plugin.store.insert('m', ['h1'], keyOf('gone'));
    expect(score(plugin, ['h1'])).toEqual([0, 0, 0]);
  });

  it('stops after topKMatches endpoints, longest matches first', () => {
    const plugin = new PrefixCacheScorer('prefix-cache', { ...params, topKMatches: 1 });
    plugin.store.insert('m', ['h1'], keyOf('a'));
    plugin.store.insert('m', ['h1', 'h2'], keyOf('b'));
    expect(score(plugin, ['h1', 'h2'])).toEqual([0, 100, 0]);
  });

  it('matches only the first maxBlocksToMatch hashes', () => {
    const plugin = new PrefixCacheScorer('prefix-cache', { ...params, maxBlocksToMatch: 2 });
    plugin.store.insert('m', ['h1', 'h2'], keyOf('a'));
    expect(score(plugin, ['h1', 'h2', 'h3', 'h4'])).toEqual([100, 0, 0]);
  });

  it('gives every endpoint 0 for a request without hashes', () => {
    const plugin = new PrefixCacheScorer('prefix-cache', params);
    plugin.store.insert('m', ['h1'], keyOf('a'));
    expect(score(plugin, [])).toEqual([0, 0, 0]);
  });

  it('works on real chained hashes: prompts sharing the first block share its hash', () => {
    const plugin = new PrefixCacheScorer('prefix-cache', params);
    const system = 'You are a helpful assistant. Answer briefly and cite sources!!'.padEnd(64, '.');
    plugin.store.insert('m', prefixBlockHashes('m', `${system}What is NATS?`), keyOf('a'));
    const other = prefixBlockHashes('m', `${system}What is JetStream?`);
    expect(other).toHaveLength(2);
    expect(score(plugin, other)).toEqual([50, 0, 0]);
  });
});

describe('PrefixStore', () => {
  it('evicts the least recently used entry of an endpoint and its ownership with it', () => {
    const store = new PrefixStore(2);
    store.insert('m', ['h1', 'h2'], 'a');
    store.insert('m', ['h1'], 'a'); // refresh h1: h2 is now the oldest
    store.insert('m', ['h3'], 'a');
    expect(store.owners('m', 'h2')).toBeUndefined();
    expect([...(store.owners('m', 'h1') ?? [])]).toEqual(['a']);
    expect(store.sizeOf('a')).toBe(2);
  });

  it('forgets an endpoint entirely when it is removed', () => {
    const store = new PrefixStore(10);
    store.insert('m', ['h1'], 'a');
    store.insert('m', ['h1'], 'b');
    store.removeEndpoint('a');
    expect([...(store.owners('m', 'h1') ?? [])]).toEqual(['b']);
    expect(store.sizeOf('a')).toBe(0);
  });
});
