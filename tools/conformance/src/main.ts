/**
 * Differential conformance: each upstream reference router and Triad in front of the same recording engine-sims,
 * the same request set, compared per request and per leg (docs/conformance.md).
 *
 *   npx tsx tools/conformance/src/main.ts --ref nixl-toy=PATH --ref mooncake=PATH --ref mini_lb=PATH \
 *     [--out report.md] [--json results.json] [--hold-ms 750] [--log-dir DIR]
 *   npx tsx tools/conformance/src/main.ts --render results.json [--out report.md]   (re-render with the current allow-list)
 *
 * The references are not part of this repository: pass paths of local copies (docs/conformance.md says which
 * files). Exits 1 when a difference is neither fixed nor on the allow-list.
 */
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { ALLOW_LIST } from './allowed';
import { classify } from './allow-list';
import { Bench } from './bench';
import { requestSet } from './cases';
import { diffResults, type Difference, type RequestResult } from './diff';
import { REFERENCES, type Reference } from './references';
import { renderComparison, type Comparison } from './report';
import { startReference, type RunningRouter } from './router';
import { runCases, type RouterRun } from './run';
import { startTriad } from './triad-router';
import { parseToolArgs } from '@triad/testing';

async function runOne(ref: Reference, start: (bench: Bench) => Promise<RunningRouter>, tag: string, holdMs: number): Promise<RouterRun> {
  const bench = await Bench.start(ref.stages, holdMs);
  try {
    const router = await start(bench);
    try {
      const cases = requestSet(tag, ref).filter((c) => ref.skip?.[c.name] === undefined);
      return await runCases(router, bench, cases, ref.prefillStage);
    } catch (err) {
      process.stderr.write(`--- ${router.name} log ---\n${router.log()}\n`);
      throw err;
    } finally {
      await router.close();
    }
  } finally {
    await bench.close();
  }
}

function setupResult(run: RouterRun): RequestResult {
  return { case: 'setup', client: { status: 0, complete: true }, trace: run.setup, outcome: {} };
}

async function compare(ref: Reference, script: string, holdMs: number, logDir: string): Promise<Comparison> {
  const tag = `${ref.name}-${Date.now().toString(36)}`;
  const referenceRun = await runOne(
    ref,
    (bench) =>
      startReference({
        name: ref.name,
        script,
        args: () => ref.args(bench),
        ready: ref.ready(bench),
        logDir,
        ...(ref.hostFlag === false ? { hostFlag: false } : {}),
      }),
    tag,
    holdMs,
  );
  const triadRun = await runOne(ref, (bench) => startTriad(bench, ref.triad), tag, holdMs);
  const differences: Difference[] = diffResults(setupResult(referenceRun), setupResult(triadRun));
  for (const r of referenceRun.results) {
    const t = triadRun.results.find((x) => x.case === r.case);
    if (t) differences.push(...diffResults(r, t));
  }
  const text = readFileSync(script);
  return {
    reference: ref.name,
    upstream: ref.upstream,
    skipped: ref.skip ?? {},
    copy: { path: script, sha256: createHash('sha256').update(text).digest('hex') },
    referenceRun,
    triadRun,
    differences,
    classified: classify(ref.name, differences, ALLOW_LIST),
  };
}

async function main(): Promise<void> {
  const { values } = parseToolArgs({
    options: {
      ref: { type: 'string', multiple: true, default: [] },
      out: { type: 'string' },
      json: { type: 'string' },
      'hold-ms': { type: 'string', default: '750' },
      'log-dir': { type: 'string' },
      render: { type: 'string' },
    },
  });
  if (values.render) {
    // Re-renders a --json file of an earlier run with the current allow-list (no engines, no proxies).
    const saved = JSON.parse(readFileSync(values.render, 'utf8')) as Comparison[];
    const comparisons = saved.map((c) => ({ ...c, classified: classify(c.reference, c.differences, ALLOW_LIST) }));
    const report = comparisons.map(renderComparison).join('\n');
    if (values.out) writeFileSync(values.out, report);
    else process.stdout.write(`${report}\n`);
    return;
  }
  const holdMs = Number(values['hold-ms']);
  const wanted = (values.ref ?? []).map((spec) => {
    const [name, path] = spec.split('=', 2) as [string, string | undefined];
    const ref = REFERENCES.find((r) => r.name === name);
    if (!ref || !path) throw new Error(`--ref ${spec}: expected one of ${REFERENCES.map((r) => r.name).join(', ')} as NAME=PATH`);
    return { ref, path: resolve(path) };
  });
  if (wanted.length === 0) throw new Error(`pass --ref NAME=PATH for some of: ${REFERENCES.map((r) => r.name).join(', ')}`);
  // The references' own logs: kept in --log-dir, else in a temporary directory removed at the end.
  const logDir = values['log-dir'] ?? mkdtempSync(join(tmpdir(), 'triad-conformance-'));
  const comparisons: Comparison[] = [];
  try {
    for (const { ref, path } of wanted) {
      process.stderr.write(`conformance: ${ref.name} …\n`);
      comparisons.push(await compare(ref, path, holdMs, logDir));
    }
  } finally {
    if (!values['log-dir']) rmSync(logDir, { recursive: true, force: true });
  }
  const report = comparisons.map(renderComparison).join('\n');
  if (values.out) writeFileSync(values.out, report);
  else process.stdout.write(`${report}\n`);
  if (values.json) writeFileSync(values.json, JSON.stringify(comparisons, null, 2));
  const unexplained = comparisons.reduce((n, c) => n + c.classified.unexplained.length, 0);
  process.stderr.write(`conformance: ${unexplained} unexplained difference(s)\n`);
  if (unexplained > 0) process.exitCode = 1;
}

main().catch((err: unknown) => {
  process.stderr.write(`conformance: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exitCode = 1;
});
