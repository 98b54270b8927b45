import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startSimEngine, type SimEngineHandle, type SimEngineOptions } from '@triad/engine-sim';
import { waitFor } from '@triad/testing';
import type { Exchange } from './exchange';
import { familyOf, type AddressBook } from './normalise';
import { DispatchProbe, RecordingTap } from './tap';

export const MODEL = 'conformance-model';

/** One engine of a bench: the sim, and the recording tap every router talks to instead. */
export interface BenchStage {
  readonly stage: string;
  readonly sim: SimEngineHandle;
  readonly tap: RecordingTap;
}

export type StageSpec = {
  readonly stage: string;
  readonly probeRole?: 'prefill' | 'decode';
  /** Shares the bench's fresh EC directory (vLLM ECExampleConnector's `shared_storage_path`). */
  readonly sharedEc?: boolean;
} & Omit<SimEngineOptions, 'host' | 'model' | 'sharedEcDir'>;

/** Counters whose deltas are the engine-side outcome (the rest are housekeeping or duplicates of the legs). */
const OUTCOME_COUNTERS = [
  'kvHandoffsPrepared',
  'kvPullsServed',
  'kvPullsRejected',
  'kvPullsReceived',
  'kvPullFailures',
  'kvLeasesExpired',
  'localPrefillFallbacks',
  'kvParamsInvalid',
  'kvTransferIdsMissing',
  'kvLoadFailedRequests',
  'kvPushRegistrations',
  'kvPushesSent',
  'roomsRegistered',
  'roomsMatched',
  'bootstrapTimeouts',
  'parallelSamplingHangs',
  'encoderRequests',
  'encoderItems',
  'encodes',
  'localEncodes',
  'ecHits',
  'ecMisses',
  'ecPullsServed',
  'ecPullsReceived',
  'ecPullsFailed',
  'pushesSent',
  'pushesReceived',
  'pushWaitTimeouts',
  'ecRequestsFailed',
  'embedsParts',
  'dpRankPinned',
  'badRequests',
  'faultsInjected',
] as const;

/** How long the taps must see no traffic before a request counts as finished (see {@link Bench.settle}). */
const QUIET_MS = 500;

let hostSeq = 0;
/** Each sim and each tap on its own loopback address, as pods are. */
function nextHost(): string {
  const n = hostSeq++;
  return `127.0.${70 + Math.floor(n / 200)}.${(n % 200) + 20}`;
}

/**
 * Fresh engine-sims behind recording taps, for one router's run over the request set (every router gets its own,
 * so no prefix cache or held KV carries over from another).
 */
export class Bench {
  readonly probe: DispatchProbe;
  readonly #stages = new Map<string, BenchStage>();
  #ecDir: string | undefined;
  #log: Exchange[] = [];
  #before: Record<string, number> = {};

  private constructor(holdMs: number) {
    this.probe = new DispatchProbe(holdMs);
  }

  static async start(specs: readonly StageSpec[], holdMs: number): Promise<Bench> {
    const bench = new Bench(holdMs);
    try {
      for (const { stage, probeRole, sharedEc, ...opts } of specs) {
        if (sharedEc && bench.#ecDir === undefined) bench.#ecDir = mkdtempSync(join(tmpdir(), 'triad-conformance-ec-'));
        const ec = sharedEc ? { sharedEcDir: bench.#ecDir } : {};
        const sim = await startSimEngine({ ...opts, ...ec, host: nextHost(), model: MODEL, requestLogLimit: 0 });
        const tap = await RecordingTap.start({
          stage,
          host: nextHost(),
          target: { host: sim.host, apiPort: sim.port, ...(sim.bootstrapPort !== undefined ? { bootstrapPort: sim.bootstrapPort } : {}) },
          ...(probeRole ? { probeRole, probe: bench.probe } : {}),
          onExchange: (x) => bench.#log.push(x),
        });
        bench.#stages.set(stage, { stage, sim, tap });
      }
    } catch (err) {
      await bench.close();
      throw err;
    }
    return bench;
  }

  stage(name: string): BenchStage {
    const s = this.#stages.get(name);
    if (!s) throw new Error(`no stage ${name}`);
    return s;
  }

  get stages(): readonly BenchStage[] {
    return [...this.#stages.values()];
  }

  /**
   * Names for every address a router or engine may write: taps by stage family, sims as `<family>.sim` (encoders
   * are interchangeable: which one serves an item is the router's choice, compared through the legs, not the names).
   */
  addressBook(): AddressBook {
    const hosts = new Map<string, string>();
    const ports = new Map<number, string>();
    for (const s of this.#stages.values()) {
      const name = familyOf(s.stage);
      hosts.set(s.tap.opts.host, name);
      hosts.set(s.sim.host, `${name}.sim`);
      ports.set(s.sim.port, `${name}.port`);
      if (s.sim.bootstrapPort !== undefined) ports.set(s.sim.bootstrapPort, `${name}.bootstrapPort`);
      (s.sim.ecControlAddresses ?? []).forEach((a, rank) =>
        ports.set(Number(a.slice(a.lastIndexOf(':') + 1)), `${name}.ecControlPort[${rank}]`),
      );
    }
    return { hosts, ports };
  }

  /** Exchanges recorded so far, kept. */
  peek(): readonly Exchange[] {
    return this.#log;
  }

  /** Exchanges recorded so far (setup traffic before the first request included), and forgets them. */
  take(): Exchange[] {
    const out = this.#log;
    this.#log = [];
    return out;
  }

  /** Starts a request's window: counters noted, probe reset. */
  begin(): void {
    this.#before = this.#counters();
    this.probe.reset();
  }

  /** Waits until no tap has an exchange in flight (a fire-and-forget prefill included). */
  async settle(timeoutMs: number): Promise<void> {
    // Idle for a quiet window, not just idle: a router may send a leg right after the client's answer (Triad's KV
    // release leg after a decode failure starts a few milliseconds later), and it belongs to this request.
    const quiet = () =>
      this.stages.every((s) => s.tap.inFlight === 0) &&
      performance.now() - Math.max(0, ...this.stages.map((s) => s.tap.lastActivityAt)) >= QUIET_MS;
    await waitFor(quiet, { timeoutMs, intervalMs: 20, what: 'taps quiet' }).catch(() => undefined);
  }

  /** Counter deltas since `begin`, summed per stage family, and what each family still holds, zeros omitted. */
  outcome(): Record<string, number> {
    const after = this.#counters();
    const out: Record<string, number> = {};
    for (const [k, v] of Object.entries(after)) {
      const d = v - (this.#before[k] ?? 0);
      if (d !== 0) out[k] = d;
    }
    for (const s of this.#stages.values()) {
      const held = s.sim.kvHeld();
      const key = `${familyOf(s.stage)}.kvHeldRequests`;
      if (held.requests > 0) out[key] = (out[key] ?? 0) + held.requests;
    }
    return out;
  }

  #counters(): Record<string, number> {
    const out: Record<string, number> = {};
    for (const s of this.#stages.values()) {
      const c = s.sim.counters();
      for (const name of OUTCOME_COUNTERS) {
        const key = `${familyOf(s.stage)}.${name}`;
        out[key] = (out[key] ?? 0) + (c[name] ?? 0);
      }
    }
    return out;
  }

  async close(): Promise<void> {
    for (const s of this.#stages.values()) {
      await s.tap.close();
      await s.sim.close();
    }
    if (this.#ecDir) rmSync(this.#ecDir, { recursive: true, force: true });
  }
}
