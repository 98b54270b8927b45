import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import { ErrorCode, TriadError } from '@triad/errors';
import { BadRequestError, BodyTooLargeError, NotFoundError, PathNotFoundError, echo } from '@triad/request';
import { bodyTooLarge, createGatewayServer, errorAnswer, onClientError, readBody, type HttpLayerOptions } from './http-layer';
import { inferenceRoute } from './inference-route';
import type { InferenceHandler } from './inference-handler';
import type { ClientConnectionCap } from './client-connection-cap';
import type { RouteTable } from '../routing/route-table';
import type { GatewayApiView } from '../gateway-api/gateway-api-view';

export interface HttpServerOptions {
  readonly bodyLimit: number;
  /** Bytes of an oversized body read and dropped before the 413 (so clients still sending can read it). */
  readonly bodyDiscardLimit: number;
  /** Idle time allowed between requests on a connection. */
  readonly keepAliveTimeoutMs: number;
  /** Time allowed to send a request head, from its first byte (408 and close past it). */
  readonly headersTimeoutMs: number;
  /** Time allowed to send a whole request, head and body, from its first byte (408 and close past it). */
  readonly requestTimeoutMs: number;
  /** Open connections per client address, shared by every server built with these options. */
  readonly connectionCap?: ClientConnectionCap | undefined;
  /** The gateway is shutting down (new requests on open connections get a 503). */
  readonly draining: () => boolean;
  readonly handler: InferenceHandler;
  readonly routes: RouteTable;
  /** Gateway API mode: requests are matched to a Gateway listener by the port they arrived on and their Host. */
  readonly gatewayApi?: GatewayApiView | undefined;
  /** `/readyz` on the data port answers 200 only while this holds. */
  readonly ready: () => boolean;
}

/** The HTTP layer's error answer, sent through fastify's reply (fastify's errors and the non-inference routes). */
function sendError(
  reply: { code(n: number): unknown; headers(h: Record<string, string | number>): unknown; send(b: string): unknown },
  err: unknown,
): void {
  const a = errorAnswer(err);
  reply.code(a.status);
  reply.headers(a.headers);
  reply.send(a.body);
}

/** What a client that asked for a path the gateway has no route for is told it serves instead. */
const SERVED_PATHS =
  'POST /v1/* and POST /generate (a JSON body naming the model, routed by ModelRoutes), GET /v1/models and GET /v1/models/{model}';

/** fastify's own errors (body too large, bad content type, malformed request) as request errors. */
function fromFastifyError(err: { code?: string; statusCode?: number; message: string }, bodyLimit: number): TriadError {
  if (err instanceof BodyTooLargeError) return err;
  if (err.code === 'FST_ERR_CTP_BODY_TOO_LARGE' || err.statusCode === 413) return bodyTooLarge(bodyLimit);
  if (err.statusCode !== undefined && err.statusCode >= 400 && err.statusCode < 500) return new BadRequestError(err.message);
  return new TriadError(ErrorCode.Internal, 'internal error', { cause: err });
}

/**
 * The OpenAI-compatible HTTP surface. Inference calls are taken on node:http before fastify (inference-route.ts):
 * their bodies are read as raw bytes (size-limited) and parsed once by the pipeline, which writes to the socket
 * directly; fastify serves the rest (health, models, 404s). Every error, fastify's own and the HTTP layer's included (http-layer.ts), is
 * OpenAI-shaped.
 */
export function buildHttpServer(options: HttpServerOptions): FastifyInstance {
  const layer: HttpLayerOptions = {
    bodyLimit: options.bodyLimit,
    discardLimit: options.bodyDiscardLimit,
    keepAliveTimeoutMs: options.keepAliveTimeoutMs,
    headersTimeoutMs: options.headersTimeoutMs,
    requestTimeoutMs: options.requestTimeoutMs,
    connectionCap: options.connectionCap,
    draining: options.draining,
  };
  const fastifyError = (err: unknown) =>
    fromFastifyError(err as { code?: string; statusCode?: number; message: string }, options.bodyLimit);
  const app = Fastify({
    bodyLimit: options.bodyLimit,
    logger: false,
    // Draining is answered by the server below, OpenAI-shaped.
    return503OnClosing: false,
    requestIdHeader: false,
    serverFactory: (handler) => createGatewayServer(handler, layer, inferenceRoute(options.handler, layer, options.gatewayApi)),
    clientErrorHandler: onClientError,
    frameworkErrors: (err, _request, reply) => sendError(reply as unknown as Parameters<typeof sendError>[0], fastifyError(err)),
  });
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', (request, payload, done) => readBody(request.raw, payload, layer, done));

  app.setErrorHandler((err, _request, reply) => sendError(reply, fastifyError(err)));
  const served = options.gatewayApi === undefined ? SERVED_PATHS : `${SERVED_PATHS}; HTTPRoutes serve POST calls to their paths`;
  app.setNotFoundHandler((request, reply) => {
    const path = request.url.split('?')[0] ?? '';
    const message = `There is no route for ${request.method} ${echo(path)}. The gateway serves ${served}`;
    sendError(reply, new PathNotFoundError(request.method, path, message));
  });

  app.get('/healthz', (_req, reply) => reply.type('text/plain').send('ok'));
  app.get('/readyz', (_req, reply) =>
    options.ready() ? reply.type('text/plain').send('ready') : reply.code(503).type('text/plain').send('not ready'),
  );
  const models = (_req: FastifyRequest, reply: { type(t: string): { send(b: string): unknown } }) =>
    reply.type('application/json').send(options.routes.modelsJson());
  app.get('/v1/models', models);
  app.get('/models', models);
  // Model ids carry slashes (`Qwen/Qwen2.5-0.5B`): the SDKs send them percent-encoded, curl users often raw.
  const model = (request: FastifyRequest, reply: FastifyReply) => {
    const path = request.url.split('?')[0] ?? '';
    const rawId = path.slice(path.indexOf('/models/') + '/models/'.length);
    let id: string;
    try {
      id = decodeURIComponent(rawId);
    } catch {
      id = rawId;
    }
    const body = options.routes.modelJson(id);
    if (body === undefined) {
      sendError(reply, new NotFoundError(`The model '${echo(id)}' does not exist`, 'model'));
      return;
    }
    void reply.type('application/json').send(body);
  };
  app.get('/v1/models/*', model);
  app.get('/models/*', model);

  // POST /v1/*, POST /generate (and every POST in Gateway API mode) never reach fastify: inference-route.ts.
  return app;
}
