// Gateway instructions per request, counted by valgrind's callgrind: the figure a loaded, shared machine does not
// move (CPU time and throughput it does). One stack (gateway-stack.ts, every per-request feature on as in
// gateway.ts: tracing at its default sampler to a discarding sink, a ModelRoute rateLimit, metrics, outlier
// detection, the EPD `*_embeds` rewrite), the gateway under callgrind with counting off through start-up and
// warm-up; then per case: counters zeroed, N requests C at a time, wait until the spans of the window were exported
// (the export is part of a request's cost), dump, instructions over N. Each case is measured `--rounds` times; the
// spread of the rounds is the run-to-run noise (a JIT runtime's count is not exact: GC and compilation land in
// whichever window they fall in).
// Run: npx tsx tools/bench/src/gateway-instructions.ts [--cases epd:1,epd:32,agg:32,agg:32:sse] [--requests 1000]
//   [--warmup 1500] [--rounds 2] [--scheduling service|in-process] [--features all|none] [--json FILE]
//   [--process gateway|scheduler (which process runs under callgrind; scheduler: the scheduler service's
//   instructions per request, the gateway at full speed)] [--keep-dumps DIR (the callgrind dumps, one per round,
//   stay there for callgrind_annotate)] [--threads (also count the main thread alone: JavaScript and the event loop,
//   without V8's background threads, whose optimizing-compiler jobs still land in whichever round they fall in)]
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { TRIAD_BIN, waitFor, parseToolArgs } from '@triad/testing';
import { runtimeOf } from './lib/baseline';
import { callgrindControl, callgrindLauncher, dumpInstructions, dumpThreadInstructions } from './lib/callgrind';
import { markdownTable } from './lib/table';
import { startGatewayStack } from './gateway-stack';

const TEXT = 'Describe the picture in one sentence, please.';

function chatBody(model: string, stream: boolean): string {
  const content =
    model === 'epd'
      ? [
          { type: 'text', text: TEXT },
          { type: 'image_url', image_url: { url: 'https://example.com/bench/cat.png' } },
        ]
      : TEXT;
  return JSON.stringify({ model, messages: [{ role: 'user', content }], max_tokens: stream ? 64 : 16, stream });
}

/** `count` requests, `connections` at a time; returns how many were answered 200. */
async function load(url: string, body: string, count: number, connections: number): Promise<number> {
  let next = 0;
  let ok = 0;
  let reported = false;
  const worker = async (): Promise<void> => {
    while (next < count) {
      next++;
      try {
        const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
        await res.arrayBuffer();
        if (res.status === 200) ok++;
      } catch (err) {
        // A connection the slowed gateway let go: counted as failed, and the load goes on.
        if (!reported) process.stderr.write(`request failed: ${String((err as Error).cause ?? err)}\n`);
        reported = true;
      }
    }
  };
  await Promise.all(Array.from({ length: connections }, worker));
  return ok;
}

export interface InstructionCase {
  readonly model: string;
  readonly connections: number;
  /** A 64-token SSE stream (`model:conns:sse`) instead of a 16-token JSON answer. */
  readonly stream: boolean;
}

export interface InstructionResult extends InstructionCase {
  /** Instructions per request of each round. */
  readonly rounds: readonly number[];
  /** `--threads`: the main thread's instructions per request of each round. */
  readonly mainThread?: readonly number[];
  /** Requests of all rounds that were not answered 200 (a count with failures measures another path). */
  readonly failed: number;
}

async function main(): Promise<void> {
  const { values } = parseToolArgs({
    options: {
      cases: { type: 'string', default: 'epd:1,epd:32,agg:32' },
      requests: { type: 'string', default: '1000' },
      warmup: { type: 'string', default: '1500' },
      rounds: { type: 'string', default: '2' },
      scheduling: { type: 'string', default: 'service' },
      features: { type: 'string', default: 'all' },
      json: { type: 'string' },
      process: { type: 'string', default: 'gateway' },
      'keep-dumps': { type: 'string' },
      threads: { type: 'boolean', default: false },
    },
  });
  const cases: InstructionCase[] = String(values.cases)
    .split(',')
    .map((c) => {
      const [model, conns, kind] = c.split(':');
      return { model: model, connections: Number(conns ?? 32), stream: kind === 'sse' };
    });
  const requests = Number(values.requests);
  const rounds = Number(values.rounds);
  const threads = values.threads === true;
  const keep = values['keep-dumps'];
  const dir = keep !== undefined ? (mkdirSync(keep, { recursive: true }), keep) : mkdtempSync(join(tmpdir(), 'triad-callgrind-'));
  const stack = await startGatewayStack({
    features: values.features === 'none' ? 'none' : 'all',
    ...(values.scheduling === 'in-process' ? { gatewayScheduling: 'in-process' as const } : {}),
    // Budgets for a gateway that runs 20-50× slower: the scheduling reply must not fall back to local decisions
    // (the budget is 50 ms), nor a leg time out, or the count measures another path.
    gatewayEnv: {
      OTEL_BSP_SCHEDULE_DELAY: '500',
      TRIAD_SCHEDULE_BUDGET_MS: '10000',
      TRIAD_ENCODE_TIMEOUT_MS: '300000',
      TRIAD_PREFILL_TIMEOUT_MS: '300000',
      TRIAD_FIRST_BYTE_TIMEOUT_MS: '300000',
      TRIAD_TOTAL_TIMEOUT_MS: '600000',
    },
    ...(values.process === 'scheduler'
      ? { schedulerLauncher: callgrindLauncher(dir, threads) }
      : { gatewayLauncher: callgrindLauncher(dir, threads) }),
    readyTimeoutMs: 600_000,
  });
  const results: InstructionResult[] = [];
  try {
    const pid = stack.pid(values.process === 'scheduler' ? 'scheduler' : 'gateway') as number;
    const url = `${stack.gatewayUrl}/v1/chat/completions`;
    for (const c of cases) {
      // Warm-up at 8 connections: under callgrind 32 at a time only queue in the gateway.
      const warm = await load(url, chatBody(c.model, c.stream), Number(values.warmup), 8);
      if (warm < Number(values.warmup)) process.stderr.write(`${c.model}: ${Number(values.warmup) - warm} warm-up requests failed\n`);
    }
    callgrindControl(['--instr=on', String(pid)]);
    for (const c of cases) {
      const perRound: number[] = [];
      const mainPerRound: number[] = [];
      let failed = 0;
      for (let r = 0; r < rounds; r++) {
        callgrindControl(['--zero', String(pid)]);
        const ok = await load(url, chatBody(c.model, c.stream), requests, c.connections);
        if (ok < requests) process.stderr.write(`${c.model}:${c.connections}: ${requests - ok} of ${requests} requests failed\n`);
        failed += requests - ok;
        const loadEnded = Date.now();
        const sink = stack.traceSink;
        if (sink !== undefined)
          await waitFor(() => sink.lastAt() > loadEnded && Date.now() - sink.lastAt() > 1_500, {
            timeoutMs: 120_000,
            what: 'the last span export of the window',
          });
        if (threads) {
          const counted = dumpThreadInstructions(pid, dir);
          perRound.push(Math.round(counted.total / requests));
          mainPerRound.push(Math.round(counted.main / requests));
        } else {
          perRound.push(Math.round(dumpInstructions(pid, dir) / requests));
        }
        process.stderr.write(
          `${c.model} c${c.connections} round ${r + 1}: ${perRound[perRound.length - 1]} instructions/request` +
            `${threads ? `, main thread ${mainPerRound[mainPerRound.length - 1]}` : ''}\n`,
        );
      }
      results.push({ ...c, rounds: perRound, ...(threads ? { mainThread: mainPerRound } : {}), failed });
    }
  } finally {
    await stack.close();
    if (keep === undefined) rmSync(dir, { recursive: true, force: true });
  }
  process.stdout.write(
    `${values.process} instructions per request (callgrind; ${requests} requests per round, scheduling ${values.scheduling}, features ${values.features}; ` +
      `${runtimeOf(TRIAD_BIN)}, ${process.version})\n\n` +
      `${markdownTable(
        [
          'model',
          'body',
          'conns',
          'instructions/request (min)',
          'rounds',
          ...(threads ? ['main thread (min)', 'main thread rounds'] : []),
          'failed',
        ],
        results.map((r) => [
          r.model,
          r.stream ? 'SSE 64 tok' : 'JSON',
          r.connections,
          Math.min(...r.rounds),
          r.rounds.join(' / '),
          ...(r.mainThread !== undefined ? [Math.min(...r.mainThread), r.mainThread.join(' / ')] : []),
          r.failed,
        ]),
      )}\n`,
  );
  if (values.json !== undefined) writeFileSync(values.json, `${JSON.stringify(results, null, 2)}\n`);
}

main().catch((err: unknown) => {
  process.stderr.write(`gateway instructions: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exitCode = 1;
});
