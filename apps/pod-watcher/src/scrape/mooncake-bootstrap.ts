import { ScrapeError, type EngineHttp } from './engine-http';

/**
 * What the bootstrap port of a vLLM prefill under `kvConnector: mooncake` said. Upstream vLLM's MooncakeConnector
 * runs `MooncakeBootstrapServer` there (FastAPI), whose `GET /query` lists `{dp_rank: {engine_id, worker_addr}}`:
 * such a prefill needs the concurrent flow, and `engineIds` (rank order) are what its decodes must name. vllm-ascend's
 * MooncakeConnector runs no HTTP server there (its side channels are ZMQ sockets from `kv_port`): any other answer —
 * refused, not found, not that JSON — means the sequential, NIXL-like flow. `detail` says what was seen.
 */
export interface MooncakeProbe {
  readonly flow: 'concurrent' | 'sequential';
  readonly engineIds?: readonly string[];
  readonly detail: string;
}

/** Engine ids by DP rank from a `/query` body; undefined when it is not that server's answer. */
export function parseBootstrapQuery(text: string): string[] | undefined {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (body === null || typeof body !== 'object' || Array.isArray(body)) return undefined;
  const byRank = new Map<number, string>();
  for (const [key, entry] of Object.entries(body as Record<string, unknown>)) {
    if (!/^\d+$/.test(key) || entry === null || typeof entry !== 'object') return undefined;
    const id = (entry as Record<string, unknown>)['engine_id'];
    if (typeof id !== 'string' || id === '') return undefined;
    byRank.set(Number(key), id);
  }
  // Ranks register one by one while the engine starts: a gap means the list is not complete yet.
  const ids: string[] = [];
  for (let r = 0; byRank.has(r); r++) ids.push(byRank.get(r) as string);
  return ids;
}

/** `GET <url>` (the prefill's `http://ip:port/query`) and its verdict; never rejects. */
export async function probeMooncakeBootstrap(http: EngineHttp, url: string): Promise<MooncakeProbe> {
  try {
    const text = await http.getText(url);
    const ids = parseBootstrapQuery(text);
    if (ids === undefined)
      return { flow: 'sequential', detail: `GET ${url} answered something other than a Mooncake bootstrap server's /query` };
    return { flow: 'concurrent', engineIds: ids, detail: `GET ${url} listed ${ids.length} engine id(s)` };
  } catch (err) {
    const why = err instanceof ScrapeError ? err.message : (err as Error).message;
    return { flow: 'sequential', detail: `no Mooncake bootstrap server answered: ${why}` };
  }
}

/** Same verdict, same engine ids (the wording of the detail aside: an error message may vary from probe to probe). */
export function sameProbe(a: MooncakeProbe | undefined, b: MooncakeProbe | undefined): boolean {
  if (a === undefined || b === undefined) return a === b;
  return a.flow === b.flow && (a.engineIds ?? []).join('\n') === (b.engineIds ?? []).join('\n');
}
