import type { EndpointRecord } from '@triad/bus';

/** One engine event socket to follow. */
export interface SourceSpec {
  /** `namespace/pod`, with `#rank` for data-parallel ranks above 0. */
  readonly source: string;
  readonly pod: string;
  readonly endpoint: string;
  readonly replayEndpoint: string | undefined;
}

/**
 * The engines' event sockets an endpoint record names. The endpoint may leave the host out (`tcp://*:5557`,
 * `tcp://:5557` or just `5557`): the pod's IP fills it in. Data-parallel rank r publishes on the endpoint's port
 * + r, as vLLM and SGLang offset it (`offset_endpoint_port`).
 */
export function sourcesOf(record: EndpointRecord): SourceSpec[] {
  const kv = record.kvEvents;
  if (!kv) return [];
  const pod = `${record.namespace}/${record.pod}`;
  const out: SourceSpec[] = [];
  for (let rank = 0; rank < (kv.ranks ?? 1); rank++) {
    const endpoint = resolve(kv.endpoint, record.ip, rank);
    if (endpoint === undefined) continue;
    out.push({
      source: rank === 0 ? pod : `${pod}#${rank}`,
      pod,
      endpoint,
      replayEndpoint: kv.replayEndpoint ? resolve(kv.replayEndpoint, record.ip, rank) : undefined,
    });
  }
  return out;
}

function resolve(raw: string, ip: string, rank: number): string | undefined {
  const text = raw.trim();
  // A bare port, or [tcp://]host:port with the host possibly empty or `*`.
  const m = /^\d+$/.test(text) ? [text, undefined, text] : /^(?:tcp:\/\/)?(\*|\[[^\]]+\]|[^:/]*):(\d+)$/.exec(text);
  if (!m) return undefined;
  const host = m[1] === undefined || m[1] === '' || m[1] === '*' ? ip : m[1];
  const port = Number(m[2]) + rank;
  if (!(port >= 1 && port <= 65535)) return undefined;
  return `tcp://${host.includes(':') && !host.startsWith('[') ? `[${host}]` : host}:${port}`;
}
