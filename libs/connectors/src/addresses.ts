/** An engine address as a URL host: IPv6 literals go in brackets (`[fd00::1]`), other addresses as they are. */
export function urlHost(ip: string): string {
  return ip.includes(':') && !ip.startsWith('[') ? `[${ip}]` : ip;
}

/** The `http://host:port` origin of an engine address. */
export function originOf(ip: string, port: number): string {
  return `http://${urlHost(ip)}:${port}`;
}
