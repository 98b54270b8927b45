import { randomBytes } from 'node:crypto';
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { renderPlanNotes } from './banner';
import { loadStackConfig, type StackConfig } from './config';
import type { ChildExit, ManagedChild } from './managed-child';
import { resolveNats, type NatsAddress, type NatsEndpoint } from './nats';
import type { UpOptions } from './options';
import { assertPortFree, freeLoopbackPort } from './ports';
import { httpGet, waitUntilReady } from './readiness';
import { planSims, type SimPlan } from './sim-plan';
import { StartupError } from './startup-error';
import { Supervisor } from './supervisor';

export interface StackEnvironment {
  /** The `triad` entry script the services are started from (bin/triad.js, or the bundle in an image). */
  readonly cliEntry: string;
  readonly out: NodeJS.WritableStream;
  readonly env: NodeJS.ProcessEnv;
  readonly color: boolean;
  /** Aborting (Ctrl-C during start-up) stops what has started and rejects with a StartupError. */
  readonly abort?: AbortSignal;
  /** Where `--nats auto` looks for a running server (127.0.0.1:4222; tests point it at their own). */
  readonly localNats?: NatsAddress;
}

/** A service of the stack and where its ops endpoints are. */
export interface ServiceInfo {
  readonly name: string;
  readonly pid: number | undefined;
  readonly opsPort: number;
}

export interface RunningStack {
  readonly config: StackConfig;
  /** The address the gateway and the ops ports listen on (`--host`). */
  readonly host: string;
  readonly plan: SimPlan;
  readonly nats: NatsEndpoint;
  readonly natsNote?: string;
  readonly gatewayUrl: string;
  readonly services: readonly ServiceInfo[];
  /** Resolves when a service exits on its own (a crash): the stack is then broken and should be stopped. */
  readonly crashed: Promise<{ child: ManagedChild; exit: ChildExit }>;
  /** Pids of the processes the stack runs now (each leads its own process group). */
  pids(): number[];
  stop(): Promise<void>;
  /** SIGKILL everything now (a second Ctrl-C). */
  kill(): void;
}

/** Stop order: the gateway drains first, then what it used, NATS last. */
const STOP_STAGES = [['gateway'], ['scheduler', 'pod-watcher', 'kv-indexer', 'sim-pods'], ['nats']];

/**
 * The local model's chat template: the shipped tokenizer (BERT) has none, and sims and gateway must render chat
 * the same way for their block hashes to agree.
 */
const LOCAL_CHAT_TEMPLATE =
  '{% for m in messages %}<|{{ m.role }}|>{{ m.content }}\n{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}';

/**
 * Precise prefix routing for the local stack: a tokenizer directory (the shipped tokenizer plus the chat template)
 * and a scheduler config whose language profiles score with `precise-prefix-cache` in place of `prefix-cache`,
 * hashing as the sims do (vLLM defaults, PYTHONHASHSEED=0, 16-token blocks), weighted 3 (as llm-d weighs its
 * prefix scorer against load). Returns the two paths.
 */
function writePreciseRouting(workDir: string, shippedTokenizer: string): { tokenizer: string; schedulerConfig: string } {
  const tokenizer = join(workDir, 'tokenizer');
  mkdirSync(tokenizer);
  copyFileSync(join(shippedTokenizer, 'tokenizer.json'), join(tokenizer, 'tokenizer.json'));
  writeFileSync(join(tokenizer, 'tokenizer_config.json'), JSON.stringify({ chat_template: LOCAL_CHAT_TEMPLATE }));
  const schedulerConfig = join(workDir, 'scheduler.yaml');
  const language = {
    filters: ['stale-metrics', 'least-request'],
    // What the engines report they hold outweighs the load and latency spreads of an idle local stack.
    scorers: ['least-request', 'gpu-usage', 'least-latency', { plugin: 'precise-prefix-cache', weight: 3 }],
    picker: 'max-score',
  };
  writeFileSync(
    schedulerConfig,
    `${JSON.stringify(
      {
        plugins: [
          {
            type: 'precise-prefix-cache',
            args: { blockSize: 16, hashAlgo: 'sha256', hashSeed: '0', tokenizers: [{ model: '*', path: tokenizer }] },
          },
        ],
        profiles: { default: language },
      },
      null,
      2,
    )}\n`,
  );
  return { tokenizer, schedulerConfig };
}

/** Checks every address the stack will listen on, before anything is started. */
async function checkPorts(options: UpOptions, plan: SimPlan): Promise<void> {
  await assertPortFree(options.host, options.port, `the gateway (--port ${options.port})`);
  for (const sim of plan.sims) {
    await assertPortFree(sim.host, sim.port, `the engine sim of pod ${sim.key}`);
    if (sim.bootstrapPort !== undefined) await assertPortFree(sim.host, sim.bootstrapPort, `the bootstrap server of pod ${sim.key}`);
    for (const address of [sim.kvEvents?.endpoint, sim.kvEvents?.replayEndpoint]) {
      if (address !== undefined) await assertPortFree(sim.host, Number(address.split(':').pop()), `the KV-event socket of pod ${sim.key}`);
    }
  }
}

/** The address this machine reaches a service at that listens on `host` (a wildcard is reached on loopback). */
export function reachableHost(host: string): string {
  if (host === '0.0.0.0' || host === '::' || host === '') return '127.0.0.1';
  return host.includes(':') ? `[${host}]` : host;
}

/** How long `triad up` waits for the first scrapes after the services are ready (sims start with the pod-watcher). */
const SCRAPED_WAIT_MS = 10_000;

/**
 * After the models are listed: waits (until `deadline`) for the scheduler to hold engine metrics of every ready
 * endpoint. The pod-watcher starts with the sims, so its first scrapes may find them not yet listening; until a
 * scrape succeeds the `stale-metrics` filter leaves those endpoints out, and the first requests would not go
 * where the scorers (prefix, load) send them. Returns how many still have none at the deadline.
 */
async function waitForScrapedEndpoints(schedulerOps: string, deadline: number): Promise<number> {
  for (;;) {
    const res = await httpGet(`${schedulerOps}/metrics`);
    const m = res?.status === 200 ? /^triad_scheduler_endpoints_without_metrics (\S+)$/m.exec(res.body) : null;
    const unscraped = m ? Number(m[1]) : Number.NaN;
    if (unscraped === 0 || Date.now() > deadline) return Number.isNaN(unscraped) ? 0 : unscraped;
    await new Promise((r) => setTimeout(r, 100));
  }
}

/**
 * After every /readyz: waits (within the deadline) until the gateway lists every routed model, so the curl lines
 * printed next work at once. Returns the names still missing at the deadline (a gateway without
 * `GET /v1/models` counts as listing them all).
 */
async function waitForModels(gatewayUrl: string, names: readonly string[], deadline: number): Promise<string[]> {
  let missing = [...names];
  for (;;) {
    const res = await httpGet(`${gatewayUrl}/v1/models`);
    if (res?.status === 404) return [];
    if (res?.status === 200) missing = names.filter((n) => !res.body.includes(JSON.stringify(n)));
    if (missing.length === 0 || Date.now() > deadline) return missing;
    await new Promise((r) => setTimeout(r, 100));
  }
}

/**
 * Starts the local stack: NATS (found or started), the engine sims of the loopback pods in one process, the
 * pod-watcher on the config file, a scheduler and the gateway, and waits until each reports ready. On any failure
 * everything started so far is stopped again before the error is thrown.
 */
export async function startStack(options: UpOptions, environment: StackEnvironment): Promise<RunningStack> {
  const config = loadStackConfig(options.configPath);
  const plan = planSims(config.modelServers, config.modelRoutes, config.pods);
  // Notes about pods that get no sim come first, so they do not scroll away behind the service logs.
  environment.out.write(renderPlanNotes(plan.notes));
  await checkPorts(options, plan);
  environment.out.write(`triad up: starting the local stack from ${config.path}\n`);

  const workDir = mkdtempSync(join(tmpdir(), 'triad-up-'));
  const sharedEcDir = join(workDir, 'ec-cache');
  mkdirSync(sharedEcDir);
  const nameWidth = 'pod-watcher'.length;
  const supervisor = new Supervisor({
    out: environment.out,
    style: { nameWidth, color: environment.color, raw: options.rawLogs },
    stopTimeoutMs: options.stopTimeoutMs,
  });
  const crashed = new Promise<{ child: ManagedChild; exit: ChildExit }>((resolve) => {
    supervisor.onUnexpectedExit((child, exit) => resolve({ child, exit }));
  });
  let stopped: Promise<void> | undefined;
  let releaseNats: (() => Promise<void>) | undefined;
  const stop = () => {
    stopped ??= supervisor
      .stopAll(STOP_STAGES)
      .then(() =>
        releaseNats?.().catch((err: unknown) => {
          environment.out.write(
            `triad up: note: could not remove Triad's buckets from the reused NATS server: ${(err as Error).message}\n`,
          );
        }),
      )
      .finally(() => rmSync(workDir, { recursive: true, force: true }));
    return stopped;
  };

  try {
    const deadline = Date.now() + options.readyTimeoutMs;
    const {
      endpoint: nats,
      note: natsNote,
      release,
    } = await resolveNats(options.nats, supervisor, join(workDir, 'nats'), environment.env, options.readyTimeoutMs, environment.localNats);
    releaseNats = release;
    environment.out.write(`triad up: NATS at ${nats.url}${nats.origin === 'started' ? ' (nats-server started with JetStream)' : ''}\n`);
    if (natsNote) environment.out.write(`triad up: note: ${natsNote}\n`);
    // One credentials key per run, shared by the pod-watcher (which seals ExternalModelProvider credentials from
    // the config's Secrets) and the gateway (which opens them), unless the environment brings its own.
    const env = { ...environment.env };
    if (!env['TRIAD_CREDENTIALS_KEY'] && !env['TRIAD_CREDENTIALS_KEY_FILE'])
      env['TRIAD_CREDENTIALS_KEY'] = randomBytes(32).toString('base64');
    const triad = (name: string, args: readonly string[], opsPort: number) => {
      const child = supervisor.start(name, process.execPath, [environment.cliEntry, ...args], env);
      return { child, opsPort };
    };
    // Every service's ops port listens where the gateway does: loopback unless --host says otherwise.
    const natsArgs = ['--nats', nats.url, '--metrics-host', options.host];
    // A port probed free is free only until someone binds it: never hand out the gateway's --port (a probe may
    // return it before the gateway, started last, listens) or a port already handed to another service.
    const taken = new Set<number>([options.port]);
    const port = async () => {
      for (;;) {
        const candidate = await freeLoopbackPort();
        if (!taken.has(candidate)) {
          taken.add(candidate);
          return String(candidate);
        }
      }
    };
    const starting: { child: ManagedChild; opsPort: number }[] = [];
    // Pods annotated with triad.io/kv-events-endpoint: their sims publish KV events, a kv-indexer follows them and
    // the scheduler routes on them.
    const precise =
      plan.sims.some((s) => s.kvEvents) && options.tokenizerDir ? writePreciseRouting(workDir, options.tokenizerDir) : undefined;
    if (plan.sims.some((s) => s.kvEvents) && !precise) {
      environment.out.write(
        'triad up: note: no tokenizer found (infra/tokenizers in a checkout): the sims publish no KV events and ' +
          'prefix routing stays approximate\n',
      );
    }
    if (plan.sims.length > 0) {
      const p = await port();
      starting.push(
        triad(
          'sim-pods',
          [
            '_sim-pods',
            '--config',
            config.path,
            '--shared-ec-dir',
            sharedEcDir,
            '--metrics-port',
            p,
            '--metrics-host',
            options.host,
            '--latency',
            options.simLatency,
            ...(precise ? ['--tokenizer', precise.tokenizer] : []),
          ],
          Number(p),
        ),
      );
    }
    if (precise) {
      const p = await port();
      starting.push(triad('kv-indexer', ['kv-indexer', ...natsArgs, '--metrics-port', p], Number(p)));
    }
    let p = await port();
    starting.push(triad('pod-watcher', ['pod-watcher', ...natsArgs, '--source', `file:${config.path}`, '--metrics-port', p], Number(p)));
    p = await port();
    const schedulerOpsPort = Number(p);
    starting.push(
      triad(
        'scheduler',
        ['scheduler', ...natsArgs, '--metrics-port', p, ...(precise ? ['--config', precise.schedulerConfig] : [])],
        Number(p),
      ),
    );
    p = await port();
    starting.push(
      triad(
        'gateway',
        [
          'gateway',
          ...natsArgs,
          '--host',
          options.host,
          '--port',
          String(options.port),
          '--metrics-port',
          p,
          ...(precise ? ['--scheduler-config', precise.schedulerConfig] : []),
        ],
        Number(p),
      ),
    );

    const reach = reachableHost(options.host);
    const gatewayUrl = `http://${reach}:${options.port}`;
    const ready = Promise.all(starting.map(({ child, opsPort }) => waitUntilReady(child, `http://${reach}:${opsPort}/readyz`, deadline)))
      .then(() =>
        waitForModels(
          gatewayUrl,
          config.modelRoutes.flatMap((r) => (r.spec.modelName ? [r.spec.modelName] : [])),
          deadline,
        ),
      )
      .then(async (missing) => {
        if (missing.length > 0) {
          environment.out.write(
            `triad up: note: the gateway does not list ${missing.join(', ')} yet (GET /v1/models); see the ` +
              `pod-watcher's lines above\n`,
          );
        }
        const unscraped = await waitForScrapedEndpoints(
          `http://${reach}:${schedulerOpsPort}`,
          Math.min(deadline, Date.now() + SCRAPED_WAIT_MS),
        );
        if (unscraped > 0) {
          environment.out.write(
            `triad up: note: ${unscraped} ready endpoint(s) have no engine metrics yet, and the scheduler prefers ` +
              `the others until they do; see the pod-watcher's "scrape failed" lines above\n`,
          );
        }
      });
    const crashedFirst = crashed.then(({ child, exit }) => {
      throw new StartupError(
        `${child.name} stopped while the stack was starting ` +
          `(${exit.error ? exit.error.message : (exit.signal ?? `code ${exit.code}`)}):\n  ${child.lastLines().join('\n  ')}`,
      );
    });
    const aborted = new Promise<never>((_, reject) => {
      const fail = () => reject(new StartupError('interrupted while starting; everything started so far has been stopped'));
      if (environment.abort?.aborted) fail();
      environment.abort?.addEventListener('abort', fail, { once: true });
    });
    await Promise.race([ready, crashedFirst, aborted]);
    return {
      config,
      host: options.host,
      plan,
      nats,
      ...(natsNote ? { natsNote } : {}),
      gatewayUrl,
      crashed,
      services: starting.map(({ child, opsPort }) => ({ name: child.name, pid: child.pid, opsPort })),
      pids: () => supervisor.pids(),
      stop,
      kill: () => supervisor.killAll(),
    };
  } catch (err) {
    await stop();
    throw err;
  }
}
