import type { ListenerRef } from '@triad/bus';
import { BadRequestError, BodyTooLargeError, PathNotFoundError } from '@triad/request';
import type { GatewayApiView } from '../gateway-api/gateway-api-view';
import { readBody, writeError, type HttpLayerOptions, type RequestTakerFn } from './http-layer';
import type { InferenceHandler } from './inference-handler';

/**
 * The inference routes straight on node:http: `POST /v1/*` and `POST /generate` (every POST in Gateway API mode,
 * where HTTPRoutes may serve any path). Their body is read as raw bytes and handed to the pipeline, which parses it
 * once and writes the answer on the socket itself; fastify (routing, request and reply objects, its content-type
 * parser and hooks) was a per-request cost with nothing to do on this path. Everything else still goes to fastify.
 * A body over the limit gets the HTTP layer's 413 and the connection closes, as under fastify.
 */
export function inferenceRoute(handler: InferenceHandler, layer: HttpLayerOptions, gatewayApi: GatewayApiView | undefined): RequestTakerFn {
  return (req, res) => {
    if (req.method !== 'POST') return false;
    const url = req.url ?? '';
    const q = url.indexOf('?');
    const path = q < 0 ? url : url.slice(0, q);
    if (gatewayApi === undefined && !path.startsWith('/v1/') && path !== '/generate') return false;
    readBody(req, req, layer, (err, body) => {
      if (err !== null) {
        // A stream error means the client is gone or broke the framing: either way the connection is done.
        writeError(
          res,
          err instanceof BodyTooLargeError ? err : new BadRequestError(`the request body could not be read: ${err.message}`),
          true,
        );
        return;
      }
      let listener: ListenerRef | undefined;
      if (gatewayApi !== undefined) {
        const host = req.headers.host;
        const found = gatewayApi.listenerFor(req.socket.localPort ?? 0, typeof host === 'string' ? host : undefined);
        if (found.kind === 'no-match') {
          // Kthena's words; a listener miss is a request without a route, not a model that does not exist.
          writeError(res, new PathNotFoundError('POST', path, 'No matching listener found'));
          return;
        }
        if (found.kind === 'listener') listener = found.listener;
      }
      void handler.handle('POST', path, req.headers, body, res, listener);
    });
    return true;
  };
}
