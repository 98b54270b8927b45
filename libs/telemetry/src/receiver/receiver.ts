import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { gunzipSync } from 'node:zlib';
import { decodeJsonTraces } from './otlp-json';
import { decodeProtobufTraces } from './otlp-protobuf';
import type { ReceivedSpan } from './span-model';
import { SpanStore, type WaitForSpansOptions } from './span-store';
import { buildSpanTree, type SpanTreeNode, type TraceSummary } from './span-tree';

export interface OtlpReceiverOptions {
  /** 0 (default) picks a free port. */
  readonly port?: number;
  /** Default 127.0.0.1. */
  readonly host?: string;
  /** Spans kept in memory before the oldest traces are dropped (default 100 000). */
  readonly maxSpans?: number;
  /** Largest accepted request body, bytes (default 32 MiB). */
  readonly maxBodyBytes?: number;
}

/** Counts of export requests by outcome, to assert which encoding an exporter used. */
export interface ReceiverStats {
  protobuf: number;
  json: number;
  rejected: number;
}

export interface OtlpReceiver {
  /** Base URL: the value for `OTEL_EXPORTER_OTLP_ENDPOINT`. */
  readonly url: string;
  /** `url` + `/v1/traces`: the value for `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or an exporter's `url`. */
  readonly tracesUrl: string;
  readonly port: number;
  readonly stats: Readonly<ReceiverStats>;
  spans(): ReceivedSpan[];
  byTrace(traceId: string): ReceivedSpan[];
  traceIds(): string[];
  traces(limit?: number): TraceSummary[];
  /** The span tree of one trace (roots first). */
  tree(traceId: string): SpanTreeNode[];
  /** Waits until at least `count` spans match `predicate` (woken on arrival, never polls). */
  waitForSpans(predicate: (span: ReceivedSpan) => boolean, opts?: WaitForSpansOptions): Promise<ReceivedSpan[]>;
  clear(): void;
  close(): Promise<void>;
}

class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > limit) {
        reject(new HttpError(413, `body larger than ${limit} bytes`));
        req.destroy();
        return;
      }
      chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
}

/** Media type without parameters, lower case. */
function mediaType(req: IncomingMessage): string {
  return (req.headers['content-type'] ?? '').split(';')[0].trim().toLowerCase();
}

/**
 * A local OTLP/HTTP trace receiver: `POST /v1/traces` in protobuf (`application/x-protobuf`) or JSON
 * (`application/json`), optionally gzip-encoded, kept in memory. Read API for tools: `GET /api/traces?limit=N`
 * (summaries, newest first) and `GET /api/traces/<trace-id>` (`{ traceId, spans }`).
 */
export async function startOtlpReceiver(options: OtlpReceiverOptions = {}): Promise<OtlpReceiver> {
  const store = new SpanStore(options.maxSpans);
  const maxBody = options.maxBodyBytes ?? 32 * 1024 * 1024;
  const stats: ReceiverStats = { protobuf: 0, json: 0, rejected: 0 };

  const ingest = async (req: IncomingMessage, res: ServerResponse) => {
    const type = mediaType(req);
    const isProto = type === 'application/x-protobuf' || type === 'application/protobuf';
    if (!isProto && type !== 'application/json') throw new HttpError(415, `unsupported content-type '${type}'`);
    let body = await readBody(req, maxBody);
    const encoding = (req.headers['content-encoding'] ?? '').toLowerCase();
    if (encoding === 'gzip') body = gunzipSync(body, { maxOutputLength: maxBody });
    else if (encoding && encoding !== 'identity') throw new HttpError(415, `unsupported content-encoding '${encoding}'`);
    let spans: ReceivedSpan[];
    try {
      spans = isProto ? decodeProtobufTraces(body) : decodeJsonTraces(body.toString('utf8'));
    } catch (err) {
      throw new HttpError(400, `cannot decode OTLP ${isProto ? 'protobuf' : 'JSON'}: ${(err as Error).message}`);
    }
    store.add(spans);
    if (isProto) {
      stats.protobuf++;
      // An empty ExportTraceServiceResponse is zero bytes.
      res.writeHead(200, { 'content-type': 'application/x-protobuf', 'content-length': '0' }).end();
    } else {
      stats.json++;
      sendJson(res, 200, {});
    }
  };

  const read = (path: string, query: URLSearchParams, res: ServerResponse) => {
    if (path === '/api/traces') {
      const limit = Number(query.get('limit') ?? '20');
      sendJson(res, 200, { traces: store.summaries(Number.isInteger(limit) && limit > 0 ? limit : 20) });
      return;
    }
    const id = path.slice('/api/traces/'.length).toLowerCase();
    if (!/^[0-9a-f]{32}$/.test(id)) throw new HttpError(400, `'${id}' is not a trace id (32 hex digits)`);
    const spans = store.byTrace(id);
    if (spans.length === 0) throw new HttpError(404, `trace ${id} not found`);
    sendJson(res, 200, { traceId: id, spans });
  };

  const server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://receiver');
    const path = url.pathname.replace(/\/+$/, '') || '/';
    const handle = async () => {
      if (req.method === 'POST' && path === '/v1/traces') return ingest(req, res);
      if (req.method === 'GET' && (path === '/api/traces' || path.startsWith('/api/traces/'))) return read(path, url.searchParams, res);
      if (req.method === 'GET' && path === '/healthz') return sendJson(res, 200, { spans: store.all().length });
      throw new HttpError(404, `no route for ${req.method} ${path}`);
    };
    handle().catch((err: unknown) => {
      const status = err instanceof HttpError ? err.status : 500;
      if (req.method === 'POST') stats.rejected++;
      if (!res.headersSent) sendJson(res, status, { error: (err as Error).message });
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, options.host ?? '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const addr = server.address() as AddressInfo;
  const host = addr.family === 'IPv6' ? `[${addr.address}]` : addr.address;
  const url = `http://${host}:${addr.port}`;
  let closed: Promise<void> | undefined;
  return {
    url,
    tracesUrl: `${url}/v1/traces`,
    port: addr.port,
    stats,
    spans: () => store.all(),
    byTrace: (traceId) => store.byTrace(traceId),
    traceIds: () => store.traceIds(),
    traces: (limit) => store.summaries(limit),
    tree: (traceId) => buildSpanTree(store.byTrace(traceId)),
    waitForSpans: (predicate, opts) => store.waitFor(predicate, opts),
    clear: () => store.clear(),
    close: () => {
      closed ??= new Promise<void>((resolve) => {
        store.failWaiters('OTLP receiver closed');
        server.closeAllConnections();
        server.close(() => resolve());
      });
      return closed;
    },
  };
}
