import { endpointRecord, modelServerRecord, schedulingRequest } from '../testing';
import { SchedulerReplica } from './scheduler-replica';

describe('SchedulerReplica', () => {
  it('chooses its config KV > file > defaults, keeping the running one when a candidate is invalid', () => {
    const reloads: string[] = [];
    const applied: string[] = [];
    const replica = new SchedulerReplica({
      onReload: (source, result) => reloads.push(`${source}:${result}`),
      onApplied: (config, origin) => applied.push(`${origin}:${config.topN}`),
    });
    try {
      expect(replica.activeConfig.origin).toBe('default');
      const defaultTopN = replica.scheduler.config.topN;
      replica.config.initialFile('topN: 3\n', 'scheduler.yaml');
      replica.config.kvChanged('topN: 2\n');
      replica.config.fileChanged('topN: 4\n');
      expect([replica.activeConfig.origin, replica.scheduler.config.topN]).toEqual(['kv', 2]);
      replica.config.kvChanged('topN: -1\n');
      expect([replica.activeConfig.origin, replica.scheduler.config.topN]).toEqual(['kv', 2]);
      replica.config.kvChanged(undefined);
      expect([replica.activeConfig.origin, replica.scheduler.config.topN]).toEqual(['file', 4]);
      replica.config.fileChanged('plugins: [{type: no-such-plugin}]\n');
      expect(replica.scheduler.config.topN).toBe(4);
      expect(reloads).toEqual(['kv:applied', 'file:unchanged', 'kv:rejected', 'kv:applied', 'file:rejected']);
      expect(applied).toEqual(['file:3', 'kv:2', 'file:4']);
      expect(defaultTopN).not.toBe(4);
    } finally {
      replica.close();
    }
  });

  it('refuses an invalid config file at start', () => {
    const replica = new SchedulerReplica();
    expect(() => replica.config.initialFile('topN: nope\n', 'bad.yaml')).toThrow(/invalid scheduler config bad.yaml/);
    expect(replica.activeConfig.origin).toBe('default');
    replica.close();
  });

  it('schedules over the KV views it is fed, as the replica it is named', () => {
    const replica = new SchedulerReplica({ instanceId: 'r-1' });
    try {
      replica.applyModelServer({ op: 'PUT', value: modelServerRecord() });
      for (const pod of ['a', 'b']) replica.applyEndpoint({ op: 'PUT', value: endpointRecord({ pod, scrapedAt: Date.now() + 3_600_000 }) });
      const decision = replica.schedule(schedulingRequest({ id: 'q-1' }));
      expect(decision.ok && decision.decidedBy).toBe('r-1');
      expect(decision.ok && decision.attempts.map((a) => a.endpoint.pod).sort()).toEqual(['a', 'b']);
    } finally {
      replica.close();
    }
  });
});
