import { readFileSync } from 'node:fs';

/** An IPv4 address as /proc/net/tcp writes it: 8 hex digits, the bytes in host (little-endian) order. */
function ipv4(hex: string): string {
  return [6, 4, 2, 0].map((i) => parseInt(hex.slice(i, i + 2), 16)).join('.');
}

/** An IPv6 address from /proc/net/tcp6: the wildcard and loopback by name, anything else as its hex. */
function ipv6(hex: string): string {
  if (/^0{32}$/.test(hex)) return '::';
  if (hex === '00000000000000000000000001000000') return '::1';
  return hex;
}

/**
 * The local addresses the kernel holds a listening TCP socket on for `port` (Linux, this network namespace):
 * `127.0.0.1` for loopback only, `0.0.0.0` or `::` for every interface. Read from /proc/net/tcp{,6}, so it is
 * what is bound, not what a process says it bound.
 */
export function listeningAddresses(port: number): string[] {
  const found: string[] = [];
  for (const [file, decode] of [
    ['/proc/net/tcp', ipv4],
    ['/proc/net/tcp6', ipv6],
  ] as const) {
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch {
      continue; // no IPv6 in this kernel
    }
    for (const line of text.split('\n').slice(1)) {
      const [, local, , state] = line.trim().split(/\s+/);
      if (!local || state !== '0A') continue; // 0A: LISTEN
      const [address, portHex] = local.split(':');
      if (parseInt(portHex ?? '', 16) === port) found.push(decode(address ?? ''));
    }
  }
  return found.sort();
}
