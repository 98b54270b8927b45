import { createServer, type Server } from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { startOpsServer, type Logger, type OpsServer } from '@triad/runtime';
import { CertificateWatcher, loadKeyPair } from './certificate';
import type { WebhookConfig } from './config';
import { WebhookMetrics } from './metrics';
import { REVIEW_PATHS, malformedReview, reviewAdmission, type ReviewOutcome } from './review';

export interface Webhook {
  /** The HTTPS port (the API server's target). */
  readonly port: number;
  readonly opsPort: number;
  readonly metrics: WebhookMetrics;
  /** Re-reads the certificate files now (the file watch does it on its own). */
  reloadCertificate(): Promise<boolean>;
  close(): Promise<void>;
}

export interface StartWebhookOptions {
  readonly config: WebhookConfig;
  readonly logger: Logger;
  readonly defaultMetrics?: boolean;
}

type BodyResult = { ok: true; text: string } | { ok: false; status: number; why: string };

function readBody(req: IncomingMessage, limit: number): Promise<BodyResult> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let over = false;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) over = true;
      else if (!over) chunks.push(chunk);
    });
    req.on('end', () =>
      resolve(
        over
          ? { ok: false, status: 413, why: `the body is larger than ${limit} bytes` }
          : { ok: true, text: Buffer.concat(chunks).toString('utf8') },
      ),
    );
    req.on('error', (err) => resolve({ ok: false, status: 400, why: `reading the body failed: ${err.message}` }));
  });
}

function send(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) }).end(text);
}

/**
 * Starts `triad webhook`: a validating admission webhook over HTTPS for ModelServer, ModelRoute and
 * ExternalModelProvider (AdmissionReview v1 on `/validate` and Kthena's `/validate/<kind>` paths, `GET /healthz`
 * on the same port), with the ops server (`/healthz`, `/readyz`, `/metrics`) on its own port. The serving
 * certificate is reloaded when its files change.
 */
export async function startWebhook(options: StartWebhookOptions): Promise<Webhook> {
  const { config, logger } = options;
  const metrics = new WebhookMetrics({ defaultMetrics: options.defaultMetrics ?? true });
  const pair = await loadKeyPair(config.tlsCert, config.tlsKey).catch((err: Error) => {
    throw new Error(`cannot load the serving certificate (${config.tlsCert}, ${config.tlsKey}): ${err.message}`);
  });
  let closing = false;

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const path = (req.url ?? '/').split('?')[0] ?? '/';
    if (req.method === 'GET' && path === '/healthz') {
      res.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
      return;
    }
    if (!REVIEW_PATHS.includes(path)) {
      send(res, 404, { message: `no webhook at ${path}; POST AdmissionReviews to ${REVIEW_PATHS.join(', ')}` });
      return;
    }
    const started = performance.now();
    const outcome = await decide(req, path, config.maxBodyBytes);
    send(res, outcome.httpStatus, outcome.review);
    metrics.reviews.inc({ kind: outcome.kind, operation: outcome.operation, result: outcome.result });
    metrics.duration.observe((performance.now() - started) / 1000);
    if (outcome.result !== 'allowed') {
      const { uid, status } = outcome.review.response;
      logger.info(
        { uid, kind: outcome.kind, operation: outcome.operation, result: outcome.result, message: status?.message },
        'admission denied',
      );
    }
  };

  const server: Server = createServer({ ...pair, minVersion: 'TLSv1.2' }, (req, res) => {
    handle(req, res).catch((err: unknown) => {
      // Nothing above throws by design; if something does, the caller still gets a denial, never a dropped socket.
      logger.error({ err: (err as Error).message }, 'webhook handler failed');
      if (!res.headersSent) send(res, 500, malformedReview(`webhook error: ${(err as Error).message}`, '', 500).review);
    });
  });
  server.headersTimeout = 30_000;
  server.requestTimeout = 30_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.port, config.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const certs = new CertificateWatcher({
    certFile: config.tlsCert,
    keyFile: config.tlsKey,
    logger,
    apply: (next) => server.setSecureContext({ ...next, minVersion: 'TLSv1.2' }),
    onResult: (ok) => metrics.certReloads.inc({ result: ok ? 'ok' : 'error' }),
  });
  let ops: OpsServer;
  try {
    ops = await startOpsServer({
      host: config.metricsHost,
      port: config.metricsPort,
      registry: metrics.registry,
      readiness: () => (closing ? { ready: false, reason: 'draining' } : { ready: true }),
      liveness: () => true,
    });
  } catch (err) {
    certs.close();
    server.close();
    throw err;
  }
  const port = (server.address() as AddressInfo).port;
  logger.info({ port, opsPort: ops.port, paths: REVIEW_PATHS }, 'webhook listening');
  return {
    port,
    opsPort: ops.port,
    metrics,
    reloadCertificate: () => certs.reload(),
    close: async () => {
      if (closing) return;
      closing = true;
      certs.close();
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeIdleConnections();
      });
      await ops.close();
    },
  };
}

/** Reads and decides one request: the review's answer and the HTTP status it goes out with. */
async function decide(req: IncomingMessage, path: string, maxBodyBytes: number): Promise<ReviewOutcome & { httpStatus: number }> {
  if (req.method !== 'POST')
    return { ...malformedReview(`${req.method ?? 'no method'} is not allowed; POST the review`, '', 405), httpStatus: 405 };
  const contentType = String(req.headers['content-type'] ?? '')
    .split(';')[0]
    ?.trim();
  const body = await readBody(req, maxBodyBytes);
  if (!body.ok) return { ...malformedReview(body.why, '', body.status), httpStatus: body.status };
  if (contentType !== 'application/json') {
    return { ...malformedReview(`content-type must be application/json, got ${contentType || 'none'}`, '', 415), httpStatus: 415 };
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.text);
  } catch (err) {
    return { ...malformedReview(`the body is not JSON (${(err as Error).message})`), httpStatus: 400 };
  }
  return { ...reviewAdmission(parsed, path), httpStatus: 200 };
}
