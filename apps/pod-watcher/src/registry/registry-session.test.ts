import { RegistrySession } from './registry-session';

const want = (...urls: [string, boolean][]) => new Map(urls.map(([u, healthy]) => [u, { healthy }]));
const set = (...urls: string[]) => new Set(urls);

describe("a registry session (the watcher next to SGLang's health eviction)", () => {
  it('registers a wanted encoder once it is healthy, and not again while SGLang evicted it', () => {
    const s = new RegistrySession();
    expect(s.pass(want(['e1', false]), set(), 0, 1000).register).toEqual([]);
    expect(s.pass(want(['e1', true]), set(), 1, 1000).register).toEqual(['e1']);
    s.registered('e1', 1);
    expect(s.pass(want(['e1', true]), set('e1'), 2, 1000).register).toEqual([]);
    const gone = s.pass(want(['e1', true]), set(), 3, 1000);
    expect(gone).toMatchObject({ register: [], evicted: ['e1'] });
    expect(s.pass(want(['e1', true]), set(), 500, 1000).register).toEqual([]);
    expect(s.pass(want(['e1', true]), set('e1'), 600, 1000)).toMatchObject({ register: [], revived: ['e1'] });
  });

  it("registers an evicted encoder again once SGLang's evicted TTL has passed and it looks healthy", () => {
    const s = new RegistrySession();
    s.pass(want(['e1', true]), set('e1'), 0, 1000);
    s.pass(want(['e1', true]), set(), 10, 1000);
    expect(s.pass(want(['e1', false]), set(), 1010, 1000).register).toEqual([]);
    expect(s.pass(want(['e1', true]), set(), 1011, 1000)).toMatchObject({ register: ['e1'], afterTtl: ['e1'] });
  });

  it('unregisters what is not wanted, listed or not (SGLang may hold it for revival)', () => {
    const s = new RegistrySession();
    s.pass(want(['e1', true], ['e2', true]), set('e1', 'e2'), 0, 1000);
    s.pass(want(['e1', true], ['e2', true]), set('e1'), 1, 1000);
    const d = s.pass(want(['e1', true]), set('e1', 'stray'), 2, 1000);
    expect([...d.unregister].sort()).toEqual(['e2', 'stray']);
    s.unregistered('e2');
    expect(s.pass(want(['e1', true]), set('e1'), 3, 1000).unregister).toEqual([]);
  });

  it('registers every wanted encoder again after a restart of the server (a new session)', () => {
    const s = new RegistrySession();
    s.pass(want(['e1', true], ['e2', true]), set('e1', 'e2'), 0, 1000);
    s.restart();
    expect(s.startedAt).toBeUndefined();
    expect(s.pass(want(['e1', true], ['e2', true]), set(), 5, 1000).register).toEqual(['e1', 'e2']);
    expect(s.startedAt).toBe(5);
  });
});
