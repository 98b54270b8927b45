/** What a steady load saw, overall or in one phase. */
export interface LoadReport {
  readonly sent: number;
  readonly ok: number;
  readonly failed: number;
  /** Failures by HTTP status or transport error name. */
  readonly failures: Readonly<Record<string, number>>;
  /** Longest time without a successful answer (ms), measured from the phase start to its end. */
  readonly longestGapMs: number;
}

export interface SteadyLoadOptions {
  /** Base URLs of the gateways; worker `i` sends to `targets[i % targets.length]`. */
  readonly targets: readonly string[];
  /** Request path (default `/v1/chat/completions`). */
  readonly path?: string;
  /** JSON body of every request. */
  readonly body: Record<string, unknown>;
  /** Workers, each with one request in flight at a time (default 4). */
  readonly concurrency?: number;
  /** Pause between a worker's requests, so the load stays steady and small on a shared machine (default 20 ms). */
  readonly paceMs?: number;
  /** Per-request timeout (default 10 s). */
  readonly timeoutMs?: number;
}

export interface SteadyLoad {
  /** Starts a new phase (`name`); the report of the previous one is kept. */
  phase(name: string): void;
  /** Reports so far: overall and per phase, in order. */
  report(): { total: LoadReport; phases: { name: string; report: LoadReport }[] };
  /** Stops the workers (requests in flight finish) and returns the final reports. */
  stop(): Promise<{ total: LoadReport; phases: { name: string; report: LoadReport }[] }>;
}

class Tally {
  sent = 0;
  ok = 0;
  failed = 0;
  readonly failures: Record<string, number> = {};
  lastSuccess: number;
  longestGapMs = 0;
  readonly startedAt: number;
  endedAt: number | undefined;

  constructor(now: number) {
    this.startedAt = now;
    this.lastSuccess = now;
  }

  record(ok: boolean, reason: string, now: number): void {
    this.sent++;
    if (ok) {
      this.ok++;
      this.longestGapMs = Math.max(this.longestGapMs, now - this.lastSuccess);
      this.lastSuccess = now;
    } else {
      this.failed++;
      this.failures[reason] = (this.failures[reason] ?? 0) + 1;
    }
  }

  report(now: number): LoadReport {
    const end = this.endedAt ?? now;
    return {
      sent: this.sent,
      ok: this.ok,
      failed: this.failed,
      failures: { ...this.failures },
      longestGapMs: Math.max(this.longestGapMs, end - this.lastSuccess),
    };
  }
}

/**
 * A small, steady request load over several gateways that records every answer: failures by status or error,
 * and the longest stretch without a success, overall and per named phase (e.g. "steady", "node killed"). Used by
 * failover tests and benchmarks, where the question is "did anything fail, and for how long did nothing work".
 */
export function startSteadyLoad(options: SteadyLoadOptions): SteadyLoad {
  const concurrency = options.concurrency ?? 4;
  const pace = options.paceMs ?? 20;
  const timeoutMs = options.timeoutMs ?? 10_000;
  const path = options.path ?? '/v1/chat/completions';
  const body = JSON.stringify(options.body);
  const total = new Tally(Date.now());
  const phases: { name: string; tally: Tally }[] = [{ name: 'start', tally: new Tally(Date.now()) }];
  let running = true;
  const one = async (target: string): Promise<void> => {
    let ok: boolean;
    let reason: string;
    try {
      const res = await fetch(`${target}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body,
        signal: AbortSignal.timeout(timeoutMs),
      });
      await res.arrayBuffer();
      ok = res.status === 200;
      reason = String(res.status);
    } catch (err) {
      ok = false;
      reason = (err as Error).name;
    }
    const now = Date.now();
    total.record(ok, reason, now);
    (phases[phases.length - 1] as { tally: Tally }).tally.record(ok, reason, now);
  };
  const workers = Array.from({ length: concurrency }, async (_v, i) => {
    const target = options.targets[i % options.targets.length];
    while (running) {
      await one(target);
      if (pace > 0) await new Promise((r) => setTimeout(r, pace));
    }
  });
  const report = () => {
    const now = Date.now();
    return { total: total.report(now), phases: phases.map((p) => ({ name: p.name, report: p.tally.report(now) })) };
  };
  return {
    phase(name) {
      const now = Date.now();
      (phases[phases.length - 1] as { tally: Tally }).tally.endedAt = now;
      phases.push({ name, tally: new Tally(now) });
    },
    report,
    async stop() {
      running = false;
      await Promise.all(workers);
      const now = Date.now();
      total.endedAt = now;
      (phases[phases.length - 1] as { tally: Tally }).tally.endedAt = now;
      return report();
    },
  };
}
