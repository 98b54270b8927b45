import { isAbsolute, relative } from 'node:path';
import type { RunningStack } from './stack';
import { callableModels, curlLines, pickTryModels } from './try-requests';

const NATS_ORIGIN: Record<RunningStack['nats']['origin'], string> = {
  given: 'given with --nats / TRIAD_NATS_URL',
  local: 'reused: the server already running on this machine; the Triad buckets go when triad up stops',
  started: 'started by triad up, store in a temp dir',
};

/** Where the gateway and the ops ports listen, and who can reach them: what `--host` chose. */
export function describeListen(host: string): string {
  if (host === '127.0.0.1' || host === '::1' || host === 'localhost')
    return `${host} only: this machine (--host 0.0.0.0 opens them to the network)`;
  if (host === '0.0.0.0' || host === '::') return `${host}: every interface, so other machines can reach them`;
  return `${host} (--host)`;
}

/** The path relative to the working directory when it lies below it, else absolute. */
function shortPath(cwd: string, path: string): string {
  const rel = relative(cwd, path);
  return rel && !rel.startsWith('..') && !isAbsolute(rel) ? rel : path;
}

/** Lines about pods that get no sim (non-loopback IPs, unselected pods...), printed before the services start. */
export function renderPlanNotes(notes: readonly string[]): string {
  return notes.map((n) => `triad up: note: ${n}\n`).join('');
}

/** The message printed once every service is ready: where things are, the models, and what to try. */
export function renderReadyBanner(stack: RunningStack, elapsedMs: number, cwd: string): string {
  const models = callableModels(stack.config.modelRoutes, stack.config.modelServers);
  const lines = [
    '',
    `Triad is ready in ${(elapsedMs / 1000).toFixed(1)} s: gateway ${stack.gatewayUrl} (OpenAI API under /v1)`,
    `  config   ${shortPath(cwd, stack.config.path)} (edit it while this runs: the pools follow)`,
    `  nats     ${stack.nats.url} (${NATS_ORIGIN[stack.nats.origin]})`,
    `  engines  ${stack.plan.sims.length} simulated, one per loopback pod`,
    `  models   ${models.map((m) => `${m.name} (${m.engine} ${m.mode})`).join(', ') || '(no ModelRoute)'}`,
    `  ops      ${stack.services.map((s) => `${s.name} :${s.opsPort}`).join(', ')}  (/healthz /readyz /metrics)`,
    `  listen   ${describeListen(stack.host)}`,
    ...(stack.natsNote ? [`  note     ${stack.natsNote}`] : []),
    '',
    'Try:',
    ...curlLines(stack.gatewayUrl, pickTryModels(models)).flatMap(({ label, command }) => [`  # ${label}`, `  ${command}`]),
    '',
    'Ctrl-C stops everything.',
    '',
  ];
  return `${lines.join('\n')}\n`;
}
