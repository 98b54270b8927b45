import type { IncomingMessage, ServerResponse } from 'node:http';

// The REST conventions of the Kubernetes API the fake server needs: paths, Status bodies, JSON in and out.

export interface Route {
  readonly collection: string;
  readonly namespace: string | undefined;
  readonly name: string | undefined;
  readonly subresource: string | undefined;
}

/** Splits `/api/v1/namespaces/ns/pods/name/status` (or `/apis/g/v/...`) into its parts. */
export function route(pathname: string): Route | undefined {
  const segs = pathname.split('/').filter(Boolean);
  let prefix: string[];
  if (segs[0] === 'api' && segs.length >= 3) prefix = segs.slice(0, 2);
  else if (segs[0] === 'apis' && segs.length >= 4) prefix = segs.slice(0, 3);
  else return undefined;
  let rest = segs.slice(prefix.length);
  let namespace: string | undefined;
  if (rest[0] === 'namespaces' && rest.length >= 3) {
    namespace = rest[1];
    rest = rest.slice(2);
  }
  const [plural, name, subresource] = rest;
  if (!plural) return undefined;
  return { collection: [...prefix, plural].join('/'), namespace, name, subresource };
}

export const statusBody = (code: number, reason: string, message: string) => ({
  kind: 'Status',
  apiVersion: 'v1',
  metadata: {},
  status: 'Failure',
  message,
  reason,
  code,
});

export function sendJson(res: ServerResponse, code: number, body: unknown): void {
  res.writeHead(code, { 'content-type': 'application/json' }).end(JSON.stringify(body));
}

export function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}
