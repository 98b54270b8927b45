// Scheduler decision latency at 10,000 endpoints spread over many ModelServers (issue 22), measured in a process
// that does nothing else: the scale-fleet benchmark measures decisions while its pod-watchers, fleet and NATS keep
// both cores busy, so its tail mixes the decision's cost with the process waiting for a core. Same request stream
// (shared system prompts, varied turns, prefix hashes) against: one ModelServer of 100 endpoints (the baseline),
// 100 ModelServers × 100 endpoints, and one ModelServer of 10,000.
// Run: npx tsx tools/bench/src/decision-spread.ts [--decisions 20000] [--rounds 3]
import { SchedulerReplica } from '@triad/scheduling';
import { endpointRecord, modelServerRecord } from '@triad/scheduling/testing';
import { timeDecisions, type DecisionTimes } from './lib/decision-timing';
import { markdownTable } from './lib/table';
import { parseToolArgs } from '@triad/testing';

interface Shape {
  readonly label: string;
  readonly servers: number;
  readonly perServer: number;
}

const SHAPES: readonly Shape[] = [
  { label: 'baseline: 1 ModelServer × 100', servers: 1, perServer: 100 },
  { label: '100 ModelServers × 100', servers: 100, perServer: 100 },
  { label: '1 ModelServer × 10,000', servers: 1, perServer: 10_000 },
];

function measure(shape: Shape, decisions: number): DecisionTimes {
  const local = new SchedulerReplica();
  const now = Date.now();
  const names: string[] = [];
  for (let s = 0; s < shape.servers; s++) {
    const name = `ms${s}`;
    names.push(name);
    local.applyModelServer({ op: 'PUT', key: `default.${name}`, value: modelServerRecord({ name }) } as never);
    for (let p = 0; p < shape.perServer; p++) {
      const value = endpointRecord({
        pod: `${name}-p${p}`,
        modelServer: name,
        running: p % 7,
        waiting: p % 3,
        kv: (p % 10) / 10,
        scrapedAt: now - 500,
      });
      local.applyEndpoint({ op: 'PUT', key: `default.${name}.${name}-p${p}`, value } as never);
    }
  }
  return timeDecisions(local, names, decisions, now);
}

function main(): void {
  const { values } = parseToolArgs({
    options: { decisions: { type: 'string', default: '20000' }, rounds: { type: 'string', default: '3' } },
  });
  const decisions = Number(values.decisions);
  const rows: (string | number)[][] = [];
  for (let round = 1; round <= Number(values.rounds); round++) {
    for (const shape of SHAPES) {
      const r = measure(shape, decisions);
      rows.push([
        String(round),
        shape.label,
        shape.servers * shape.perServer,
        decisions,
        r.p50.toFixed(3),
        r.p99.toFixed(3),
        r.p999.toFixed(3),
        r.max.toFixed(2),
        r.errors,
      ]);
    }
  }
  process.stdout.write(
    `${markdownTable(['round', 'endpoints', 'held', 'decisions', 'p50 ms', 'p99 ms', 'p99.9 ms', 'max ms', 'errors'], rows)}\n`,
  );
}

main();
