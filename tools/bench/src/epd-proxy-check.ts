/**
 * Proves the engine-sims speak vLLM's EPD protocol: vLLM's own reference proxy, newest version, in front of the
 * sims for each EC connector (shared storage, NIXL P2P, Mooncake with --ec-consumer-zmq-addrs), for 1 image, a
 * stream, 3 images on 2 encoders, audio, video and text only. A row is ok when the request succeeds, the encoder
 * requests are what the proxy's batching makes, and no consumer had to encode an item itself (0 local encodes).
 * With --classic, the classic proxy's rows follow for comparison (no verdict: it passes no handles).
 *
 *   npx tsx tools/bench/src/epd-proxy-check.ts --newest PATH [--classic PATH] [--mode quiet|shipped]
 *
 * The proxies are not part of this repository; docs/reference-proxies.md says how to get and run them.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { EcConnectorKind } from '@triad/engine-sim';
import { markdownTable } from './lib/table';
import { CHECK_MODEL, cases, snapshot, startSetup, type Case, type Setup } from './epd-proxy-setups';
import { startReferenceProxy } from './reference-proxy-process';
import { parseToolArgs } from '@triad/testing';

const REQUEST_TIMEOUT_MS = 60_000;

interface Row {
  readonly cells: string[];
  readonly ok: boolean | undefined;
}

async function send(url: string, c: Case): Promise<{ status: number; complete: boolean; error?: string }> {
  try {
    const res = await fetch(`${url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: CHECK_MODEL, messages: [{ role: 'user', content: c.content }], max_tokens: 8, stream: c.stream }),
      signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
    });
    const text = await res.text();
    const complete = c.stream ? text.endsWith('data: [DONE]\n\n') && !text.includes('"error"') : res.ok && text.includes('"choices"');
    return { status: res.status, complete, ...(res.ok ? {} : { error: text.slice(0, 200) }) };
  } catch (err) {
    return { status: 0, complete: false, error: (err as Error).message };
  }
}

/** What travelled for the items: files found (shared storage), pulls served (NIXL), pushes received (Mooncake). */
function handoffs(connector: EcConnectorKind, d: Record<string, number>): string {
  if (connector === 'nixl') return `${d['pulls']} pulled`;
  if (connector === 'mooncake') return `${d['pushes']} pushed`;
  return `${d['ecHits']} found`;
}

type Version = 'newest' | 'classic';

async function runProxy(version: Version, script: string, mode: 'quiet' | 'shipped', setup: Setup, logDir: string): Promise<Row[]> {
  const mooncake = version === 'newest' && setup.ecConsumerZmqAddrs;
  const proxy = await startReferenceProxy({
    script,
    mode,
    logDir,
    name: `${version}-${setup.connector}-${setup.topology === 'E→PD' ? 'epd' : 'e-p-d'}`,
    encode: setup.encoders.map((e) => e.url),
    prefill: setup.prefill ? [setup.prefill.url] : [],
    decode: [setup.decode.url],
    ...(mooncake ? { ecConsumerZmqAddrs: setup.ecConsumerZmqAddrs, ecConsumerDpSize: setup.ecConsumerDpSize ?? 1 } : {}),
  });
  const rows: Row[] = [];
  try {
    for (const c of cases(`${version}-${setup.connector}-${setup.topology}`)) {
      const before = snapshot(setup);
      const answer = await send(proxy.url, c);
      const after = snapshot(setup);
      const d = Object.fromEntries(Object.keys(after).map((k) => [k, (after[k] ?? 0) - (before[k] ?? 0)]));
      const batched = d['encoderRequests'] === c.encoderRequests && d['encoderItems'] === c.items;
      const ok = version === 'newest' ? answer.complete && d['localEncodes'] === 0 && d['failures'] === 0 && batched : undefined;
      const verdict = ok === undefined ? '(comparison)' : ok ? 'ok' : `FAIL${answer.error ? `: ${answer.error}` : ''}`;
      rows.push({
        ok,
        cells: [
          `${version} (${mode})`,
          setup.connector,
          setup.topology,
          c.name,
          String(answer.status),
          String(d['localEncodes']),
          `${d['encoderRequests']}/${d['encoderItems']}`,
          handoffs(setup.connector, d),
          String(d['embeds']),
          verdict,
        ],
      });
    }
  } finally {
    if (rows.some((r) => r.ok === false)) {
      process.stderr.write(`--- ${version} proxy log (${setup.connector}, ${setup.topology}) ---\n${proxy.log()}\n`);
    }
    await proxy.close();
  }
  return rows;
}

async function main(): Promise<void> {
  const options = { newest: { type: 'string' }, classic: { type: 'string' }, mode: { type: 'string', default: 'quiet' } } as const;
  const { values } = parseToolArgs({ options });
  const newest = values.newest ?? process.env['TRIAD_BENCH_REFERENCE_PROXY_NEWEST'];
  const classic = values.classic ?? process.env['TRIAD_BENCH_REFERENCE_PROXY'];
  const mode = values.mode === 'shipped' ? 'shipped' : 'quiet';
  if (!newest) throw new Error('pass --newest <path to the newest disagg_epd_proxy.py> (see docs/reference-proxies.md)');
  const logDir = mkdtempSync(join(tmpdir(), 'triad-epd-check-logs-'));
  const rows: Row[] = [];
  // [connector, E→P→D?]; Mooncake consumer addresses are static-proxy flags for E→PD only.
  const topologies: [EcConnectorKind, boolean][] = [
    ['shared-storage', true],
    ['shared-storage', false],
    ['nixl', true],
    ['nixl', false],
    ['mooncake', false],
  ];
  try {
    for (const [version, script] of [
      ['newest', newest],
      ['classic', classic],
    ] as const) {
      if (!script) continue;
      for (const [connector, split] of topologies) {
        // The classic proxy sends Mooncake encoders no consumer address: every image request would wait and fail.
        if (version === 'classic' && connector === 'mooncake') continue;
        const setup = await startSetup(connector, split);
        try {
          rows.push(...(await runProxy(version, script, mode, setup, logDir)));
        } finally {
          await setup.close();
        }
      }
    }
  } finally {
    rmSync(logDir, { recursive: true, force: true });
  }
  const headers = [
    'proxy',
    'EC connector',
    'topology',
    'case',
    'HTTP',
    'local encodes',
    'E requests/items',
    'hand-offs',
    'embeds parts',
    'verdict',
  ];
  process.stdout.write(
    `${markdownTable(
      headers,
      rows.map((r) => r.cells),
    )}\n`,
  );
  const failed = rows.filter((r) => r.ok === false).length;
  process.stdout.write(failed === 0 ? '\nnewest proxy: every case ok (0 local encodes)\n' : `\nnewest proxy: ${failed} case(s) failed\n`);
  if (failed > 0) process.exitCode = 1;
}

main().catch((err: unknown) => {
  process.stderr.write(`epd proxy check: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exitCode = 1;
});
