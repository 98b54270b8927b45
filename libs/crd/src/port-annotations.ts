import { BOOTSTRAP_PORT_ANNOTATION } from './model-server';

/** SMG's pod annotation for the bootstrap port(s) of a pod's SGLang prefill workers. */
export const SGLANG_BOOTSTRAP_PORT_ANNOTATION = 'sglang.ai/bootstrap-port';
/** SMG's pod annotation listing the data ports of a pod's workers, which a bootstrap-port list is aligned with. */
export const WORKER_PORTS_ANNOTATION = 'smg.ai/worker-ports';
/** Pod annotation overriding the encoder-registry port of a language-only SGLang server (`--encoder-bootstrap-port`). */
export const ENCODER_BOOTSTRAP_PORT_ANNOTATION = 'triad.io/encoder-bootstrap-port';
/** SGLang's default `--encoder-bootstrap-port`. */
export const DEFAULT_SGLANG_ENCODER_BOOTSTRAP_PORT = 8997;

/** A port read from an annotation, or why the annotation was ignored (absent: no annotation). */
export interface AnnotatedPort {
  readonly port?: number;
  readonly problem?: string;
}

/** A comma-separated port list as SMG parses it: order kept, every entry 1..65535, or nothing at all. */
export function parsePortList(text: string): number[] | undefined {
  const ports: number[] = [];
  for (const part of text.split(',')) {
    const t = part.trim();
    if (!/^\+?\d{1,5}$/.test(t)) return undefined;
    const port = Number(t);
    if (port < 1 || port > 65535) return undefined;
    ports.push(port);
  }
  return ports;
}

type Annotations = Readonly<Record<string, string>> | undefined;

/** The pod's worker data ports: SMG's worker-ports annotation (deduplicated) when valid, else the role port alone. */
function workerPorts(annotations: Annotations, rolePort: number): number[] {
  const raw = annotations?.[WORKER_PORTS_ANNOTATION];
  const list = raw === undefined ? undefined : parsePortList(raw);
  return list ? [...new Set(list)] : [rolePort];
}

/**
 * Reads a per-worker port annotation the way SMG reads `sglang.ai/bootstrap-port`: one value applies to every worker
 * of the pod; a comma list must have one value per worker port (`smg.ai/worker-ports`, else just `rolePort`) and
 * gives the value aligned with `rolePort`. A misaligned or malformed value is ignored, with the reason.
 */
export function annotatedPortFor(annotations: Annotations, name: string, rolePort: number): AnnotatedPort {
  const raw = annotations?.[name];
  if (raw === undefined) return {};
  const list = parsePortList(raw);
  if (!list) return { problem: `${name} annotation '${raw}' is not a port or a comma-separated port list` };
  if (list.length === 1) return { port: list[0] };
  const ports = workerPorts(annotations, rolePort);
  const at = ports.indexOf(rolePort);
  if (list.length !== ports.length || at < 0) {
    return { problem: `${name} annotation '${raw}' does not align with the worker port(s) ${ports.join(',')} of role port ${rolePort}` };
  }
  return { port: list[at] };
}

/** Where a prefill's bootstrap port came from, for logs and the ops surface. */
export type BootstrapPortSource = 'server-info' | 'annotation:triad.io' | 'annotation:sglang.ai' | 'model-server' | 'default';

/**
 * The bootstrap port of a SGLang prefill pod from its static configuration: `triad.io/bootstrap-port`, then SMG's
 * `sglang.ai/bootstrap-port`, then the ModelServer's `bootstrapPort`, then SGLang's default. (A pod's own
 * `/server_info` is more authoritative; the pod-watcher prefers it once read.)
 */
export function staticBootstrapPort(
  annotations: Annotations,
  rolePort: number,
  modelServerPort: number | undefined,
  fallback: number,
): {
  port: number;
  source: BootstrapPortSource;
  problems: string[];
} {
  const problems: string[] = [];
  const sources = [
    [BOOTSTRAP_PORT_ANNOTATION, 'annotation:triad.io'],
    [SGLANG_BOOTSTRAP_PORT_ANNOTATION, 'annotation:sglang.ai'],
  ] as const;
  for (const [name, source] of sources) {
    const read = annotatedPortFor(annotations, name, rolePort);
    if (read.port !== undefined) return { port: read.port, source, problems };
    if (read.problem) problems.push(read.problem);
  }
  if (modelServerPort !== undefined) return { port: modelServerPort, source: 'model-server', problems };
  return { port: fallback, source: 'default', problems };
}
