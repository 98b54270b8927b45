import { captureLogger } from '@triad/runtime/testing';
import { modelServer, pod } from '../../test/support/objects';
import { acceptedCondition, conditionDiffers, mergeCondition } from './accepted-condition';
import { Inventory, type InventoryChange, type StatusReporter } from './inventory';

function setup() {
  const { logger, lines } = captureLogger('test');
  const changes: InventoryChange[] = [];
  const reports: [string, string, number][] = [];
  const status: StatusReporter = {
    report: (kind, _ns, name, problems) => reports.push([kind, name, problems.length]),
    conditions: () => undefined,
    routeParents: () => undefined,
    forget: () => undefined,
  };
  const rejects: string[] = [];
  const inv = new Inventory({ logger, status, onChange: (c) => changes.push(c), onReject: (c) => rejects.push(c.kind) });
  return { inv, changes, reports, lines, rejects };
}

describe('inventory', () => {
  it('keeps the last valid ModelServer when an invalid version arrives, and reports both outcomes', () => {
    const { inv, changes, reports } = setup();
    inv.upsert(modelServer('qwen'));
    const bad = modelServer('qwen');
    (bad.spec as Record<string, unknown>)['inferenceEngine'] = 'TGI';
    inv.upsert(bad);
    expect(inv.modelServer('default', 'qwen')?.spec.inferenceEngine).toBe('vLLM');
    expect(inv.invalidCounts()).toMatchObject({ ModelServer: 1, ModelRoute: 0, Pod: 0, ExternalModelProvider: 0 });
    expect(changes).toHaveLength(1);
    expect(reports).toEqual([
      ['ModelServer', 'qwen', 0],
      ['ModelServer', 'qwen', 1],
    ]);
    inv.upsert(modelServer('qwen', { engine: 'SGLang' }));
    expect(inv.invalidCounts().ModelServer).toBe(0);
    expect(changes).toHaveLength(2);
  });

  it('tells the reconciler about each new invalid version once (a resync of the same one is not news)', () => {
    const { inv, rejects } = setup();
    const bad = modelServer('qwen');
    (bad.spec as Record<string, unknown>)['inferenceEngine'] = 'TGI';
    inv.upsert(bad);
    inv.upsert(bad);
    expect(rejects).toEqual(['ModelServer']);
    const worse = modelServer('qwen');
    (worse.spec as Record<string, unknown>)['inferenceEngine'] = 'TGI';
    (worse.spec as Record<string, unknown>)['workloadPort'] = { port: 70000 };
    inv.upsert(worse);
    expect(rejects).toEqual(['ModelServer', 'ModelServer']);
  });

  it('signals a pod change only when labels, annotations, IP or readiness change', () => {
    const { inv, changes } = setup();
    const a = pod('a', { app: 'x' });
    inv.upsert(a);
    inv.upsert({ ...a, metadata: { ...a.metadata, resourceVersion: '99' }, status: { ...a.status, containerStatuses: [] } });
    expect(changes).toHaveLength(1);
    inv.upsert(pod('a', { app: 'x' }, { ready: false }));
    inv.upsert(pod('a', { app: 'y' }, { ready: false }));
    inv.upsert(pod('a', { app: 'y' }, { ready: false, ip: '10.0.0.9' }));
    expect(changes.map((c) => c.kind)).toEqual(['Pod', 'Pod', 'Pod', 'Pod']);
    inv.remove('Pod', 'default', 'a');
    inv.remove('Pod', 'default', 'a');
    expect(changes).toHaveLength(5);
    expect(inv.pods('default')).toEqual([]);
  });

  it('logs a rejected version once, names it, and ignores kinds it does not watch', () => {
    const { inv, lines } = setup();
    const bad = { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'Not_A_Name' } };
    inv.upsert(bad);
    inv.upsert(bad);
    inv.upsert({ apiVersion: 'apps/v1', kind: 'Deployment', metadata: { name: 'x' } });
    const warnings = lines.filter((l) => l['msg'] === 'rejected invalid object');
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatchObject({ kind: 'Pod', name: 'Not_A_Name', lastValidInForce: false });
    expect(inv.counts()).toMatchObject({ ModelServer: 0, ModelRoute: 0, Pod: 0, Secret: 0 });
  });
});

describe('Accepted condition', () => {
  const now = new Date('2026-01-01T00:00:00Z');
  it('says True/Valid or False/InvalidSpec with every problem', () => {
    expect(acceptedCondition([], 3, now)).toMatchObject({ type: 'Accepted', status: 'True', reason: 'Valid', observedGeneration: 3 });
    const c = acceptedCondition(
      [
        { path: 'spec.inferenceEngine', message: 'bad' },
        { path: '', message: 'worse' },
      ],
      4,
      now,
    );
    expect(c).toMatchObject({
      status: 'False',
      reason: 'InvalidSpec',
      message: 'spec.inferenceEngine: bad; worse; the last valid version stays in force',
    });
  });

  it('changes only when something but the time differs, keeps other conditions and the transition time', () => {
    const old = { ...acceptedCondition([], 3, new Date(0)) };
    expect(conditionDiffers([old], acceptedCondition([], 3, now))).toBe(false);
    expect(conditionDiffers([old], acceptedCondition([], 4, now))).toBe(true);
    const other = { type: 'Ready', status: 'True' as const };
    const merged = mergeCondition([other, old], acceptedCondition([], 4, now));
    expect(merged).toEqual([other, expect.objectContaining({ observedGeneration: 4, lastTransitionTime: old.lastTransitionTime })]);
    expect(mergeCondition([old], acceptedCondition([{ path: '', message: 'x' }], 4, now))[0]?.lastTransitionTime).toBe(now.toISOString());
  });
});
