import { EncoderRegistry } from './encoder-registry';

describe('SGLang encoder registry', () => {
  const events = () => {
    const log: string[] = [];
    const record = (what: string) => (url: string) => log.push(`${what} ${url}`);
    return { log, handlers: { evicted: record('evicted'), revived: record('revived'), dropped: record('dropped') } };
  };

  it('stores URLs verbatim, once, in registration order; unregistering an absent URL is fine', () => {
    const r = new EncoderRegistry(['http://e0:1']);
    r.register('http://e1:1/');
    r.register('http://e0:1');
    expect(r.list()).toEqual(['http://e0:1', 'http://e1:1/']);
    r.unregister('http://nobody:1');
    r.unregister('http://e0:1');
    expect(r.list()).toEqual(['http://e1:1/']);
  });

  it('evicts after three consecutive failed probes, keeps probing, revives when healthy', () => {
    const { log, handlers } = events();
    const r = new EncoderRegistry(['http://e0:1'], handlers, 1_000);
    for (const t of [1, 2]) r.probed('http://e0:1', false, t);
    r.probed('http://e0:1', true, 3);
    for (const t of [4, 5]) r.probed('http://e0:1', false, t);
    expect(r.list()).toEqual(['http://e0:1']);
    r.probed('http://e0:1', false, 6);
    expect(r.list()).toEqual([]);
    expect(r.probeCandidates(7)).toEqual(['http://e0:1']);
    r.probed('http://e0:1', true, 8);
    expect(r.list()).toEqual(['http://e0:1']);
    expect(log).toEqual(['evicted http://e0:1', 'revived http://e0:1']);
  });

  it('drops an evicted URL after the TTL; an explicit unregister or register ends its eviction', () => {
    const { log, handlers } = events();
    const r = new EncoderRegistry(['http://a:1', 'http://b:1', 'http://c:1'], handlers, 1_000);
    for (const url of r.list()) for (let i = 0; i < 3; i++) r.probed(url, false, 10);
    r.unregister('http://b:1');
    r.register('http://c:1');
    expect(r.list()).toEqual(['http://c:1']);
    expect(r.probeCandidates(500)).toEqual(['http://c:1', 'http://a:1']);
    expect(r.probeCandidates(1_010)).toEqual(['http://c:1']);
    // A probe that was in flight when the URL was unregistered changes nothing.
    r.probed('http://b:1', true, 1_020);
    expect(r.list()).toEqual(['http://c:1']);
    expect(log).toEqual(['evicted http://a:1', 'evicted http://b:1', 'evicted http://c:1', 'dropped http://a:1']);
  });
});
