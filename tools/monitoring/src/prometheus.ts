import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { freePort, waitFor } from '@triad/testing';
import { requireTool } from './tools';

/** One scrape job: a name (the `job` label) and its `host:port` targets. */
export interface ScrapeJob {
  readonly job: string;
  readonly targets: readonly string[];
}

/** A sample of an instant query: its labels and value (NaN and ±Inf kept as numbers). */
export interface Sample {
  readonly labels: Readonly<Record<string, string>>;
  readonly value: number;
}

export interface PrometheusHandle {
  readonly url: string;
  /** Instant query; throws on a PromQL error (with Prometheus's message). */
  query(expr: string): Promise<Sample[]>;
  /** Values of `label` on the series matching `selector`. */
  labelValues(label: string, selector: string): Promise<string[]>;
  /** The process's output so far (for failure messages). */
  output(): string;
  close(): Promise<void>;
}

export interface PrometheusOptions {
  readonly jobs: readonly ScrapeJob[];
  /** Rule files to load (plain Prometheus rule files). */
  readonly ruleFiles?: readonly string[];
  /** Scrape and rule evaluation interval (default 1s, so a test sees rates within seconds). */
  readonly interval?: string;
}

/**
 * Starts the real `prometheus` on a free loopback port with a throw-away config and TSDB directory (never the
 * system service or its data), scraping the given jobs, and waits until it is ready.
 */
export async function startPrometheus(options: PrometheusOptions): Promise<PrometheusHandle> {
  const bin = requireTool('prometheus');
  const dir = mkdtempSync(join(tmpdir(), 'triad-prometheus-'));
  const interval = options.interval ?? '1s';
  const config = {
    global: { scrape_interval: interval, evaluation_interval: interval, scrape_timeout: interval },
    rule_files: options.ruleFiles ?? [],
    scrape_configs: options.jobs.map((j) => ({ job_name: j.job, static_configs: [{ targets: j.targets }] })),
  };
  const configFile = join(dir, 'prometheus.yml');
  writeFileSync(configFile, stringify(config));
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const child: ChildProcess = spawn(
    bin,
    [
      `--config.file=${configFile}`,
      `--storage.tsdb.path=${join(dir, 'data')}`,
      `--web.listen-address=127.0.0.1:${port}`,
      '--storage.tsdb.retention.time=1h',
      '--log.level=warn',
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let output = '';
  const keep = (d: Buffer) => {
    output = (output + d.toString()).slice(-20_000);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const close = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    await exited;
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    await waitFor(
      async () => {
        if (child.exitCode !== null) throw new Error(`prometheus exited with ${child.exitCode}: ${output}`);
        return (await fetch(`${url}/-/ready`).catch(() => undefined))?.ok;
      },
      { what: 'prometheus ready', timeoutMs: 30_000, intervalMs: 100 },
    );
  } catch (err) {
    await close();
    throw err;
  }

  const api = async (path: string): Promise<unknown> => {
    const res = await fetch(`${url}${path}`);
    const body = (await res.json()) as { status: string; data?: unknown; error?: string };
    if (body.status !== 'success') throw new Error(`prometheus ${path}: ${body.error ?? res.status}`);
    return body.data;
  };
  return {
    url,
    async query(expr) {
      const data = (await api(`/api/v1/query?query=${encodeURIComponent(expr)}`)) as { resultType: string; result: unknown };
      if (data.resultType === 'scalar') return [{ labels: {}, value: Number((data.result as [number, string])[1]) }];
      const vector = data.result as { metric: Record<string, string>; value: [number, string] }[];
      return vector.map((r) => ({ labels: r.metric, value: Number(r.value[1]) }));
    },
    async labelValues(label, selector) {
      return (await api(`/api/v1/label/${encodeURIComponent(label)}/values?match[]=${encodeURIComponent(selector)}`)) as string[];
    },
    output: () => output,
    close,
  };
}
