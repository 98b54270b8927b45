import type { OutgoingHttpHeaders, ServerResponse } from 'node:http';

const JSON_TYPE = 'application/json';

/** Writes a complete JSON response (the body is already serialized). */
export function sendJson(res: ServerResponse, status: number, body: string, headers?: OutgoingHttpHeaders): void {
  if (res.headersSent || res.destroyed) return;
  res.writeHead(status, { 'content-type': JSON_TYPE, 'content-length': Buffer.byteLength(body), ...headers });
  res.end(body);
}

/** Writes a complete plain-text response. */
export function sendText(res: ServerResponse, status: number, body: string, contentType = 'text/plain; charset=utf-8'): void {
  if (res.headersSent || res.destroyed) return;
  res.writeHead(status, { 'content-type': contentType, 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

/** Starts a server-sent-events response as both engines do (`text/event-stream`, chunked). */
export function startEventStream(res: ServerResponse, headers?: OutgoingHttpHeaders): void {
  res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', ...headers });
}

/** FastAPI's default 404 and 405 bodies (both engines are FastAPI apps). */
export const NOT_FOUND_BODY = '{"detail":"Not Found"}';
export const METHOD_NOT_ALLOWED_BODY = '{"detail":"Method Not Allowed"}';
