import { ErrorCode, TriadError } from '@triad/errors';
import { toOpenAiError } from './openai-errors';
import { upstreamHttpError } from './errors';

describe('toOpenAiError', () => {
  it.each([
    { err: new TriadError(ErrorCode.GatewayBadRequest, 'bad', { details: { param: 'model' } }), status: 400, type: 'invalid_request_error', param: 'model' },
    { err: new TriadError(ErrorCode.GatewayUnauthorized, 'no'), status: 401, type: 'authentication_error', param: null },
    { err: new TriadError(ErrorCode.GatewayForbidden, 'no'), status: 403, type: 'permission_error', param: null },
    { err: new TriadError(ErrorCode.GatewayModelNotFound, 'no'), status: 404, type: 'not_found_error', param: null },
    { err: new TriadError(ErrorCode.GatewayBodyTooLarge, 'big'), status: 413, type: 'invalid_request_error', param: null },
    { err: new TriadError(ErrorCode.GatewayRateLimited, 'slow down'), status: 429, type: 'rate_limit_error', param: null },
    { err: upstreamHttpError({ stage: 'prefill', endpoint: 'e', item: -1, status: 500 }, 'boom'), status: 502, type: 'server_error', param: null },
    { err: upstreamHttpError({ stage: 'decode', endpoint: 'e', item: -1, status: 400 }, 'too long'), status: 400, type: 'invalid_request_error', param: null },
    { err: new TriadError(ErrorCode.SchedNoCandidates, 'none'), status: 503, type: 'server_error', param: null },
    { err: new TriadError(ErrorCode.UpstreamTimeout, 'slow'), status: 504, type: 'timeout_error', param: null },
    { err: new Error('secret internals'), status: 500, type: 'server_error', param: null },
  ])('$err.message → $status', ({ err, status, type, param }) => {
    const e = toOpenAiError(err);
    expect(e.status).toBe(status);
    const body = JSON.parse(e.body) as { error: Record<string, unknown> };
    expect(body.error).toMatchObject({ type, param });
    expect(Object.keys(body.error).sort()).toEqual(['code', 'message', 'param', 'type']);
    if (!(err instanceof TriadError)) expect(body.error['message']).toBe('internal error');
  });

  it('names the stage of an engine failure and adds Retry-After to 429s', () => {
    expect(JSON.parse(toOpenAiError(upstreamHttpError({ stage: 'encode', endpoint: 'ns.ms.e0', item: 2, status: 503 }, 'busy')).body).error.message).toBe('encode of item 2 on ns.ms.e0 failed with HTTP 503: busy');
    expect(toOpenAiError(new TriadError(ErrorCode.GatewayRateLimited, 'x', { details: { retryAfterSeconds: 2.2 } })).headers).toEqual({ 'retry-after': '3' });
  });

  it('passes the headers in details.headers on (WWW-Authenticate on a 401), never framing headers', () => {
    const err = new TriadError(ErrorCode.GatewayUnauthorized, 'no', {
      details: { headers: { 'WWW-Authenticate': 'Bearer realm="triad"', 'content-length': '0', 'x-request-id': 'evil', n: 3 } },
    });
    expect(toOpenAiError(err)).toMatchObject({ status: 401, headers: { 'www-authenticate': 'Bearer realm="triad"' } });
    expect(Object.keys(toOpenAiError(err).headers)).toEqual(['www-authenticate']);
  });
});
