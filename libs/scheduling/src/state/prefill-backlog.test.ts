import { PrefillBacklog, type OpenLeg } from './prefill-backlog';

/**
 * The backlog as it was before its legs were found by request id: one map of legs per gateway keyed by
 * `request \0 endpoint \0 stage` (a reserved leg: `request \0 endpoint` under the gateway ''). The model the new one is
 * held against: the same legs, in each endpoint's set in the same order, so the same sums to the last bit.
 */
class KeyedBacklog {
  readonly byGateway = new Map<string, Map<string, { endpoint: string; at: number; tokens: number }>>();
  readonly byEndpoint = new Map<string, Set<{ endpoint: string; at: number; tokens: number }>>();

  open(gateway: string, id: string, endpoint: string, at: number, tokens: number): void {
    let legs = this.byGateway.get(gateway);
    if (!legs) this.byGateway.set(gateway, (legs = new Map()));
    const old = legs.get(id);
    if (old) this.unlink(old);
    const leg = { endpoint, at, tokens };
    legs.set(id, leg);
    let set = this.byEndpoint.get(endpoint);
    if (!set) this.byEndpoint.set(endpoint, (set = new Set()));
    set.add(leg);
  }

  close(gateway: string, id: string): void {
    const leg = this.byGateway.get(gateway)?.get(id);
    if (!leg) return;
    this.byGateway.get(gateway)?.delete(id);
    this.unlink(leg);
  }

  retain(gateway: string, inflight: Record<string, number> | undefined): void {
    const legs = this.byGateway.get(gateway);
    if (!legs) return;
    for (const [id, leg] of legs) {
      if (inflight !== undefined && (inflight[leg.endpoint] ?? 0) > 0) continue;
      legs.delete(id);
      this.unlink(leg);
    }
  }

  pendingMs(endpoint: string, now: number, msPer1kTokens: number, overheadMs: number): number {
    let ms = 0;
    for (const leg of this.byEndpoint.get(endpoint) ?? []) {
      const age = now - leg.at;
      if (age > 600_000) continue;
      const left = overheadMs + (leg.tokens / 1000) * msPer1kTokens - age;
      if (left > 0) ms += left;
    }
    return ms;
  }

  unlink(leg: { endpoint: string }): void {
    this.byEndpoint.get(leg.endpoint)?.delete(leg as never);
  }
}

/** A small deterministic generator (the same sequence every run). */
function lcg(seed: number): (n: number) => number {
  let x = seed;
  return (n) => {
    x = (x * 1103515245 + 12345) % 2147483648;
    return x % n;
  };
}

describe('PrefillBacklog', () => {
  it('holds the same legs, and sums the same to the last bit, as the backlog keyed by request, endpoint and stage', () => {
    const gateways = ['g1', 'g2'];
    const endpoints = ['ns.ms.a', 'ns.ms.b', 'ns.ms.c'];
    const stages = ['prefill', 'decode', 'aggregated'];
    for (const seed of [1, 7, 42, 1234]) {
      const next = lcg(seed);
      const backlog = new PrefillBacklog();
      const model = new KeyedBacklog();
      /** Reserved legs: the model's key, the new backlog's leg. */
      const reserved: { key: string; leg: OpenLeg }[] = [];
      let now = 1_000;
      for (let step = 0; step < 2_000; step++) {
        now += next(40);
        const gateway = gateways[next(2)];
        const request = `req-${next(12)}`;
        const endpoint = endpoints[next(3)];
        const stage = stages[next(3)];
        const op = next(10);
        if (op < 4) {
          const tokens = 1 + next(7_000) + next(1_000) / 7;
          backlog.open(gateway, request, endpoint, stage, now, tokens);
          model.open(gateway, `${request}\u0000${endpoint}\u0000${stage}`, endpoint, now, tokens);
        } else if (op < 7) {
          backlog.close(gateway, request, endpoint, stage);
          model.close(gateway, `${request}\u0000${endpoint}\u0000${stage}`);
        } else if (op === 7) {
          const inflight = next(3) === 0 ? undefined : { [endpoints[next(3)]]: next(2) };
          backlog.retain(gateway, inflight);
          model.retain(gateway, inflight);
        } else if (op === 8) {
          const key = `${request}\u0000${endpoint}`;
          // One reserved prompt per request and endpoint, as the tracker keeps them.
          if (reserved.some((r) => r.key === key)) continue;
          const tokens = 1 + next(5_000);
          reserved.push({ key, leg: backlog.add(endpoint, now, tokens) });
          model.open('', key, endpoint, now, tokens);
        } else if (reserved.length > 0) {
          const [r] = reserved.splice(next(reserved.length), 1);
          backlog.remove(r.leg);
          model.close('', r.key);
        }
        for (const e of endpoints) {
          expect(backlog.pendingMs(e, now, 37.3, 2.1)).toBe(model.pendingMs(e, now, 37.3, 2.1));
          expect(backlog.pendingMs(e, now + 500, 37.3, 2.1)).toBe(model.pendingMs(e, now + 500, 37.3, 2.1));
        }
      }
    }
  });

  it("drops emptied endpoints' sets as endpoints come and go", () => {
    const backlog = new PrefillBacklog();
    for (let i = 0; i < 10_000; i++) {
      backlog.open('self', `r${i}`, `ns.ms.pod-${i}`, 'prefill', 0, 100);
      backlog.close('self', `r${i}`, `ns.ms.pod-${i}`, 'prefill');
    }
    expect(backlog.endpointsHeld).toBeLessThanOrEqual(64);
    backlog.open('g', 'r', 'ns.ms.a', 'prefill', 0, 1_000);
    expect(backlog.pendingMs('ns.ms.a', 0, 10, 0)).toBe(10);
  });

  it('replaces a leg opened again for the same request, endpoint and stage, and keeps the others of the request', () => {
    const backlog = new PrefillBacklog();
    backlog.open('g', 'r', 'ns.ms.a', 'prefill', 0, 1_000);
    backlog.open('g', 'r', 'ns.ms.a', 'decode', 0, 2_000);
    backlog.open('g', 'r', 'ns.ms.a', 'prefill', 0, 3_000);
    expect(backlog.pendingMs('ns.ms.a', 0, 10, 0)).toBe(50);
    backlog.close('g', 'r', 'ns.ms.a', 'prefill');
    expect(backlog.pendingMs('ns.ms.a', 0, 10, 0)).toBe(20);
    backlog.close('g', 'r', 'ns.ms.b', 'decode');
    backlog.close('other', 'r', 'ns.ms.a', 'decode');
    expect(backlog.pendingMs('ns.ms.a', 0, 10, 0)).toBe(20);
    backlog.close('g', 'r', 'ns.ms.a', 'decode');
    expect(backlog.pendingMs('ns.ms.a', 0, 10, 0)).toBe(0);
  });
});
