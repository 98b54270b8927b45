import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface WrkOptions {
  readonly url: string;
  readonly method?: 'GET' | 'POST';
  readonly body?: string;
  readonly headers?: Readonly<Record<string, string>>;
  readonly connections: number;
  /** wrk threads; 1 keeps the load generator's CPU share small on a 2-core machine. */
  readonly threads?: number;
  readonly durationSec: number;
  /** A short unmeasured run first, so connection pools and JITs are warm. */
  readonly warmupSec?: number;
}

export interface WrkResult {
  readonly requests: number;
  readonly rps: number;
  readonly p50ms: number;
  readonly p90ms: number;
  readonly p99ms: number;
  readonly errors: number;
  readonly non2xx: number;
}

function luaScript(opts: WrkOptions): string {
  const headers = Object.entries({ 'content-type': 'application/json', ...opts.headers })
    .map(([k, v]) => `wrk.headers[${JSON.stringify(k)}] = ${JSON.stringify(v)}`)
    .join('\n');
  return `wrk.method = ${JSON.stringify(opts.method ?? 'POST')}\n${
    opts.body !== undefined ? `wrk.body = ${JSON.stringify(opts.body)}\n` : ''
  }${headers}\n`;
}

function toMs(value: string, unit: string): number {
  const n = Number(value);
  if (unit === 'us') return n / 1000;
  if (unit === 's') return n * 1000;
  if (unit === 'm') return n * 60_000;
  return n;
}

/** Parses wrk's `--latency` report. */
export function parseWrkOutput(text: string): WrkResult {
  const pct = (p: string): number => {
    const m = new RegExp(`^\\s*${p}%\\s+([\\d.]+)(us|ms|s|m)\\s*$`, 'm').exec(text);
    return m ? toMs(m[1], m[2]) : NaN;
  };
  const requests = Number(/(\d+) requests in/.exec(text)?.[1] ?? NaN);
  const rps = Number(/Requests\/sec:\s+([\d.]+)/.exec(text)?.[1] ?? NaN);
  const sock = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(text);
  const errors = sock ? sock.slice(1).reduce((s, v) => s + Number(v), 0) : 0;
  const non2xx = Number(/Non-2xx or 3xx responses: (\d+)/.exec(text)?.[1] ?? 0);
  return { requests, rps, p50ms: pct('50'), p90ms: pct('90'), p99ms: pct('99'), errors, non2xx };
}

function runOnce(opts: WrkOptions, seconds: number, script: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const args = [
      '-t',
      String(opts.threads ?? 1),
      '-c',
      String(opts.connections),
      '-d',
      `${seconds}s`,
      '--latency',
      '-s',
      script,
      opts.url,
    ];
    const child = spawn('wrk', args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    child.once('error', (err: NodeJS.ErrnoException) =>
      reject(err.code === 'ENOENT' ? new Error('wrk is not installed (apt-get install wrk)') : err),
    );
    child.once('exit', (code) => (code === 0 ? resolve(out) : reject(new Error(`wrk exited with ${code}: ${out}`))));
  });
}

/** Runs wrk (warm-up, then the measured run) and returns throughput and latency percentiles. */
export async function runWrk(opts: WrkOptions): Promise<WrkResult> {
  const dir = mkdtempSync(join(tmpdir(), 'triad-wrk-'));
  const script = join(dir, 'request.lua');
  writeFileSync(script, luaScript(opts));
  if (opts.warmupSec) await runOnce(opts, opts.warmupSec, script);
  return parseWrkOutput(await runOnce(opts, opts.durationSec, script));
}
