import { parsePortList } from './port-annotations';

/**
 * Pod annotations of a vLLM EPD consumer (the prefill, or the PD server of E→PD) that the router needs and cannot
 * ask the engine for: its data-parallel size and, for a push EC connector (Mooncake), the control address of each
 * DP rank, where encoders push the items. The pod-watcher copies them onto the endpoint record.
 */
export const DP_SIZE_ANNOTATION = 'triad.io/dp-size';
/** Base port of the Mooncake EC control listeners: DP rank r listens on the pod IP at port + r (vLLM with TP 1). */
export const EC_CONTROL_PORT_ANNOTATION = 'triad.io/ec-control-port';
/** Explicit control addresses, one per DP rank in rank order (`tcp://host:port` or `host:port`), for TP > 1 or another IP. */
export const EC_CONTROL_ADDRESSES_ANNOTATION = 'triad.io/ec-control-addresses';
/**
 * vLLM's default `ec_port` (`ECTransferConfig`): where ECMooncakeConnector's consumer rank 0 listens; DP rank r adds
 * r × TP size (`ec_connector/mooncake/config.py`: `control_port = ec_port + data_parallel_index * tp_size`).
 */
export const DEFAULT_EC_CONTROL_PORT = 14579;

/**
 * The control addresses a Mooncake EC consumer without annotations has, with vLLM's defaults and TP 1: rank r at
 * `tcp://<pod IP>:<14579 + r>`. vLLM binds and advertises `ec_ip` (default `127.0.0.1`, which no encoder in another
 * pod can reach): a deployment sets `ec_ip` to the pod IP, as docs/protocols/vllm.md says.
 */
export function defaultEcControlAddresses(podIp: string, dpSize: number): string[] {
  return Array.from({ length: dpSize }, (_, r) => `tcp://${hostFor(podIp)}:${DEFAULT_EC_CONTROL_PORT + r}`);
}

/** Most DP ranks one pod may declare (the endpoint record's bound too). */
export const MAX_DP_SIZE = 64;

/** What a pod's EC annotations say; `problems` name annotations that were ignored, and why. */
export interface EcControl {
  readonly dpSize?: number;
  /** `tcp://host:port` per DP rank (rank order); absent when the pod declares none. */
  readonly addresses?: readonly string[];
  readonly problems: readonly string[];
}

type Annotations = Readonly<Record<string, string>> | undefined;

const ADDRESS = /^(?:tcp:\/\/)?(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):(\d{1,5})$/;

/** `host:port` or `tcp://host:port` as `tcp://host:port`, or undefined when it is not one. */
export function normalizeEcAddress(text: string): string | undefined {
  const m = ADDRESS.exec(text.trim());
  if (!m) return undefined;
  const port = Number(m[2]);
  if (port < 1 || port > 65535) return undefined;
  return `tcp://${m[1]}:${port}`;
}

function hostFor(ip: string): string {
  return ip.includes(':') && !ip.startsWith('[') ? `[${ip}]` : ip;
}

/**
 * Reads a pod's DP size and EC control addresses. `triad.io/ec-control-addresses` wins over
 * `triad.io/ec-control-port`; with only a port, rank r gets `tcp://<pod IP>:<port + r>`. Without
 * `triad.io/dp-size`, the size is the number of explicit addresses (else 1). A list whose length differs from
 * the declared size, a malformed value or a port range past 65535 is ignored, with the reason.
 */
export function ecControlOf(annotations: Annotations, podIp: string): EcControl {
  const problems: string[] = [];
  let dpSize: number | undefined;
  const rawSize = annotations?.[DP_SIZE_ANNOTATION]?.trim();
  if (rawSize !== undefined && rawSize !== '') {
    const n = Number(rawSize);
    if (/^\d+$/.test(rawSize) && n >= 1 && n <= MAX_DP_SIZE) dpSize = n;
    else problems.push(`${DP_SIZE_ANNOTATION} annotation '${rawSize}' is not an integer in 1..${MAX_DP_SIZE}`);
  }
  let addresses: string[] | undefined;
  const rawList = annotations?.[EC_CONTROL_ADDRESSES_ANNOTATION]?.trim();
  const rawPort = annotations?.[EC_CONTROL_PORT_ANNOTATION]?.trim();
  if (rawList !== undefined && rawList !== '') {
    const list = rawList.split(',').map(normalizeEcAddress);
    if (list.some((a) => a === undefined)) {
      problems.push(`${EC_CONTROL_ADDRESSES_ANNOTATION} annotation '${rawList}' is not a comma-separated list of host:port addresses`);
    } else if (list.length > MAX_DP_SIZE) {
      problems.push(`${EC_CONTROL_ADDRESSES_ANNOTATION} annotation lists more than ${MAX_DP_SIZE} addresses`);
    } else if (dpSize !== undefined && list.length !== dpSize) {
      problems.push(`${EC_CONTROL_ADDRESSES_ANNOTATION} annotation lists ${list.length} address(es) for ${dpSize} DP rank(s)`);
    } else {
      addresses = list as string[];
      dpSize ??= list.length;
    }
  } else if (rawPort !== undefined && rawPort !== '') {
    const ports = parsePortList(rawPort);
    const size = dpSize ?? 1;
    const base = ports?.length === 1 ? ports[0] : undefined;
    if (base === undefined) problems.push(`${EC_CONTROL_PORT_ANNOTATION} annotation '${rawPort}' is not a port`);
    else if (base + size - 1 > 65535) {
      problems.push(`${EC_CONTROL_PORT_ANNOTATION} annotation ${base} + ${size} DP ranks passes port 65535`);
    } else addresses = Array.from({ length: size }, (_, r) => `tcp://${hostFor(podIp)}:${base + r}`);
  }
  return {
    ...(dpSize !== undefined ? { dpSize } : {}),
    ...(addresses !== undefined ? { addresses } : {}),
    problems,
  };
}
