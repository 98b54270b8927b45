import { ErrorCode, TriadError } from '@triad/errors';
import { toOpenAiError } from './openai-errors';
import {
  AdmissionUnavailableError,
  BadRequestError,
  BodyTooLargeError,
  ClientAbortedError,
  ForbiddenError,
  NotFoundError,
  PathNotFoundError,
  PathNotServedError,
  QueueTimeoutError,
  RateLimitedError,
  SchedulingError,
  TotalTimeoutError,
  UnauthorizedError,
  UpstreamError,
} from './request-errors';

const upstream = (stage: 'prefill' | 'decode', status: number, message: string) =>
  new UpstreamError(ErrorCode.UpstreamError, message, { stage, endpoint: 'e', item: -1, status }, status >= 500);

describe('toOpenAiError', () => {
  it.each([
    { err: new BadRequestError('bad', 'model'), status: 400, type: 'invalid_request_error', param: 'model' },
    { err: new TriadError(ErrorCode.GatewayUnauthorized, 'no'), status: 401, type: 'authentication_error', param: null },
    { err: new TriadError(ErrorCode.GatewayForbidden, 'no'), status: 403, type: 'permission_error', param: null },
    { err: new NotFoundError('no'), status: 404, type: 'not_found_error', param: null },
    { err: new PathNotFoundError('GET', '/v2/x', 'no route'), status: 404, type: 'not_found_error', param: null },
    { err: new BodyTooLargeError('big'), status: 413, type: 'invalid_request_error', param: null },
    { err: new TriadError(ErrorCode.GatewayRateLimited, 'slow down'), status: 429, type: 'rate_limit_error', param: null },
    { err: upstream('prefill', 500, 'boom'), status: 502, type: 'server_error', param: null },
    { err: upstream('decode', 400, 'too long'), status: 400, type: 'invalid_request_error', param: null },
    { err: new SchedulingError(ErrorCode.SchedNoCandidates, 'none'), status: 503, type: 'server_error', param: null },
    { err: new TotalTimeoutError(5), status: 504, type: 'timeout_error', param: null },
    { err: new Error('secret internals'), status: 500, type: 'server_error', param: null },
  ])('$err.message → $status', ({ err, status, type, param }) => {
    const e = toOpenAiError(err);
    expect(e.status).toBe(status);
    const body = JSON.parse(e.body) as { error: Record<string, unknown> };
    expect(body.error).toMatchObject({ type, param });
    expect(Object.keys(body.error).sort()).toEqual(['code', 'message', 'param', 'type']);
    if (!(err instanceof TriadError)) expect(body.error['message']).toBe('internal error');
  });

  it('adds Retry-After to 429s', () => {
    expect(toOpenAiError(new RateLimitedError('x', 'input_rate_limited', 2.2)).headers).toEqual({ 'retry-after': '3' });
  });

  it("passes an error's own headers on (WWW-Authenticate on a 401), never framing headers", () => {
    const err = new UnauthorizedError('no', 'invalid_credentials', {
      headers: { 'WWW-Authenticate': 'Bearer realm="triad"', 'content-length': '0', 'x-request-id': 'evil' },
    });
    expect(toOpenAiError(err)).toMatchObject({ status: 401, headers: { 'www-authenticate': 'Bearer realm="triad"' } });
    expect(Object.keys(toOpenAiError(err).headers)).toEqual(['www-authenticate']);
  });

  it('answers each admission refusal with its status, OpenAI type and headers', () => {
    const cases: [Error, number, string, Record<string, string>][] = [
      [new UnauthorizedError('m', 'missing_credentials'), 401, 'authentication_error', { 'www-authenticate': 'Bearer realm="triad"' }],
      [
        new UnauthorizedError('m', 'invalid_credentials'),
        401,
        'authentication_error',
        { 'www-authenticate': 'Bearer realm="triad", error="invalid_token"' },
      ],
      [new ForbiddenError('m'), 403, 'permission_error', {}],
      [new RateLimitedError('m', 'queue_full', 1), 429, 'rate_limit_error', { 'retry-after': '1' }],
      [new RateLimitedError('m', 'request_too_large'), 429, 'rate_limit_error', { 'retry-after': '1' }],
      [new QueueTimeoutError('m'), 504, 'timeout_error', {}],
      [new ClientAbortedError('m'), 499, 'invalid_request_error', {}],
      [new AdmissionUnavailableError('m', 1), 503, 'server_error', { 'retry-after': '1' }],
    ];
    for (const [err, status, type, headers] of cases) {
      const e = toOpenAiError(err);
      expect([e.status, JSON.parse(e.body).error.type, e.headers]).toEqual([status, type, headers]);
    }
  });

  it('never names an endpoint or an address in what a client reads; the message for logs keeps them', () => {
    const at = { stage: 'decode' as const, endpoint: 'ns.srv.pod-7', item: -1, status: 500 };
    const cases: [UpstreamError, string][] = [
      [
        new UpstreamError(
          ErrorCode.UpstreamError,
          'decode on ns.srv.pod-7 failed with HTTP 500: peer 10.0.3.4:8998 and [fd00::1]:80 gone',
          at,
          true,
        ),
        'decode failed with HTTP 500: peer <address> and <address> gone',
      ],
      [
        new UpstreamError(ErrorCode.UpstreamError, 'decode on ns.srv.pod-7 failed: pushed to the prefill on ns.srv.pod-7 lost', at, true),
        'decode failed: pushed to the prefill lost',
      ],
      [new UpstreamError(ErrorCode.UpstreamError, 'ns.srv.pod-7 said no', at, false), 'the endpoint said no'],
      [
        new UpstreamError(ErrorCode.UpstreamConnect, 'decode on ns.srv.pod-7 failed: getaddrinfo ENOTFOUND pod-7.svc', at, true, {
          code: 'ENOTFOUND',
          message: 'getaddrinfo ENOTFOUND pod-7.svc',
        }),
        'decode failed: the host name does not resolve',
      ],
      [
        new UpstreamError(ErrorCode.UpstreamError, 'decode on ns.srv.pod-7 failed: socket hang up', at, true, {
          code: 'E_WHATEVER',
          message: 'socket hang up',
        }),
        'decode failed: the connection failed (E_WHATEVER)',
      ],
    ];
    for (const [err, client] of cases) {
      expect(JSON.parse(toOpenAiError(err).body).error.message).toBe(client);
      expect(err.message).toContain('ns.srv.pod-7');
    }
  });

  it('names the method, path and model of a path the engines have no route for', () => {
    const err = new PathNotServedError('aggregated on ns.s.p answered HTTP 404', {
      stage: 'aggregated',
      endpoint: 'ns.s.p',
      item: -1,
      status: 404,
    });
    const e = toOpenAiError(err, { method: 'POST', path: '/v1/foo', model: 'm' });
    expect(e.status).toBe(404);
    expect(JSON.parse(e.body).error).toMatchObject({
      code: 'GATEWAY_PATH_NOT_FOUND',
      type: 'not_found_error',
      message: expect.stringMatching(/^POST \/v1\/foo is not served by the engines of model 'm': they have no route for it/),
    });
    expect(JSON.parse(toOpenAiError(err).body).error.message).toMatch(/^this path is not served by the engines:/);
  });
});
