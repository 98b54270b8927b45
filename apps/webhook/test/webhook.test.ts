import { mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect } from 'node:tls';
import { parseAllDocuments } from 'yaml';
import { captureLogger } from '@triad/runtime/testing';
import { waitFor, writeSelfSignedCert } from '@triad/testing';
import { resolveConfig } from '../src/config';
import { startWebhook, type Webhook } from '../src/server';

// Real AdmissionReview bodies over HTTPS to the real server, with a throw-away self-signed certificate that
// openssl makes for each run; the client trusts exactly that certificate (as the API server trusts caBundle).

interface Reply {
  status: number;
  body: {
    apiVersion?: string;
    kind?: string;
    response: { uid: string; allowed: boolean; status?: { code: number; reason?: string; message: string }; warnings?: string[] };
  };
}

const fixture = (name: string) => readFileSync(join(__dirname, '../../../libs/crd/src/__fixtures__', name), 'utf8');

describe('triad webhook (AdmissionReview v1 over HTTPS)', () => {
  let dir: string;
  let webhook: Webhook;
  let ca: Buffer;
  const { logger, lines: logs } = captureLogger('webhook');

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'triad-webhook-'));
    writeSelfSignedCert(dir, 'first');
    renameSync(join(dir, 'first.crt'), join(dir, 'tls.crt'));
    renameSync(join(dir, 'first.key'), join(dir, 'tls.key'));
    ca = readFileSync(join(dir, 'tls.crt'));
    const config = resolveConfig(
      { host: '127.0.0.1', port: 0, metricsPort: 0, tlsCert: join(dir, 'tls.crt'), tlsKey: join(dir, 'tls.key'), maxBodyBytes: 64 * 1024 },
      {},
    );
    webhook = await startWebhook({ config, logger, defaultMetrics: false });
  });

  afterAll(async () => {
    await webhook?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  function post(path: string, body: string, contentType = 'application/json', method = 'POST'): Promise<Reply> {
    return new Promise((resolve, reject) => {
      const req = request(
        { host: '127.0.0.1', port: webhook.port, path, method, ca, servername: 'localhost', headers: { 'content-type': contentType } },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () =>
            resolve({ status: res.statusCode ?? 0, body: JSON.parse(Buffer.concat(chunks).toString('utf8')) as Reply['body'] }),
          );
        },
      );
      req.on('error', reject);
      req.end(body);
    });
  }

  const review = (object: unknown, extra: Record<string, unknown> = {}) =>
    JSON.stringify({
      apiVersion: 'admission.k8s.io/v1',
      kind: 'AdmissionReview',
      request: {
        uid: 'uid-1',
        kind: { group: 'networking.serving.volcano.sh', version: 'v1alpha1', kind: (object as { kind?: string })?.kind },
        operation: 'CREATE',
        object,
        ...extra,
      },
    });
  const server = (spec: Record<string, unknown>) => ({
    apiVersion: 'networking.serving.volcano.sh/v1alpha1',
    kind: 'ModelServer',
    metadata: { name: 'ms', namespace: 'llm' },
    spec: { inferenceEngine: 'vLLM', workloadPort: { port: 8000 }, workloadSelector: { matchLabels: { app: 'a' } }, ...spec },
  });

  it("admits every Kthena example of the three kinds unchanged, on Kthena's paths and on /validate", async () => {
    const docs = parseAllDocuments(fixture('kthena-examples.yaml'))
      .map((d) => d.toJS() as { kind: string; metadata: { name: string } } | null)
      .filter((d) => d !== null);
    const ours = docs.filter((d) => ['ModelServer', 'ModelRoute', 'ExternalModelProvider'].includes(d.kind));
    expect(ours.length).toBeGreaterThan(20);
    for (const doc of ours) {
      const kindPath = `/validate/${doc.kind.toLowerCase()}`;
      for (const path of [kindPath, '/validate']) {
        const r = await post(path, review(doc));
        expect({ name: doc.metadata.name, path, status: r.status, response: r.body.response }).toEqual({
          name: doc.metadata.name,
          path,
          status: 200,
          response: { uid: 'uid-1', allowed: true },
        });
      }
    }
  });

  it('denies an invalid ModelServer with every problem, in the libs/crd words triad validate prints', async () => {
    const r = await post(
      '/validate/modelserver',
      review(server({ inferenceEngine: 'TGI', pipelineMode: 'epd', workloadPort: { port: 0 } })),
    );
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({
      apiVersion: 'admission.k8s.io/v1',
      kind: 'AdmissionReview',
      response: { uid: 'uid-1', allowed: false, status: { code: 422, reason: 'Invalid' } },
    });
    expect(r.body.response.status?.message).toBe(
      [
        'ModelServer ms is invalid: spec.inferenceEngine: Invalid option: expected one of "vLLM"|"SGLang"',
        'spec.workloadPort.port: Too small: expected number to be >=1',
        'spec.workloadSelector.pdGroup: required when pipelineMode is epd',
      ].join('; '),
    );
  });

  const denials: [string, unknown, string][] = [
    [
      'ModelRoute without target',
      {
        apiVersion: 'networking.serving.volcano.sh/v1alpha1',
        kind: 'ModelRoute',
        metadata: { name: 'r' },
        spec: { modelName: 'm', rules: [{ targetModels: [{ weight: 5 }] }] },
      },
      'ModelRoute r is invalid: spec.rules[0].targetModels[0]: exactly one of modelServerName or externalModelProviderName is required',
    ],
    [
      'ModelRoute with a bad regex',
      {
        apiVersion: 'networking.serving.volcano.sh/v1alpha1',
        kind: 'ModelRoute',
        metadata: { name: 'r' },
        spec: { modelName: 'm', rules: [{ modelMatch: { uri: { regex: '(' } }, targetModels: [{ modelServerName: 'a' }] }] },
      },
      'ModelRoute r is invalid: spec.rules[0].modelMatch.uri.regex: regex does not compile',
    ],
    [
      'LoRA route to a provider',
      {
        apiVersion: 'networking.serving.volcano.sh/v1alpha1',
        kind: 'ModelRoute',
        metadata: { name: 'r' },
        spec: { loraAdapters: ['a'], rules: [{ targetModels: [{ externalModelProviderName: 'p' }] }] },
      },
      'ModelRoute r is invalid: spec.rules[0].targetModels[0]: LoRA routes may not target an ExternalModelProvider',
    ],
    [
      'provider over http with a reserved header',
      {
        apiVersion: 'networking.serving.volcano.sh/v1alpha1',
        kind: 'ExternalModelProvider',
        metadata: { name: 'p' },
        spec: { baseURL: 'https://api.example.com?x=1', headers: { Cookie: 'a' }, auth: { secretRef: { key: 'k', optional: true } } },
      },
      'ExternalModelProvider p is invalid: spec.baseURL: must not contain userinfo, query, or fragment; spec.headers.Cookie: header is reserved and cannot be configured as a static header; spec.auth.secretRef.name: secret name is required; spec.auth.secretRef.optional: optional must be false or unset',
    ],
    [
      'wrong apiVersion',
      { ...server({}), apiVersion: 'networking.serving.volcano.sh/v1' },
      'ModelServer ms is invalid: apiVersion: must be networking.serving.volcano.sh/v1alpha1',
    ],
  ];
  it.each(denials)('denies %s', async (_name, object, message) => {
    const r = await post('/validate', review(object));
    expect(r.body.response.allowed).toBe(false);
    expect(r.body.response.status?.message.startsWith(message)).toBe(true);
  });

  it('passes the CRD-schema warnings on (kubectl prints them) without denying', async () => {
    const r = await post('/validate', review(server({ encodeLables: { r: 'e' } })));
    expect(r.body.response).toEqual({
      uid: 'uid-1',
      allowed: true,
      warnings: ['spec.encodeLables: unknown field; the API server drops it'],
    });
  });

  it("keeps a ModelRoute's modelName immutable on UPDATE, and allows DELETE without an object", async () => {
    const route = (modelName: string) => ({
      apiVersion: 'networking.serving.volcano.sh/v1alpha1',
      kind: 'ModelRoute',
      metadata: { name: 'r' },
      spec: { modelName, rules: [] },
    });
    const update = await post('/validate', review(route('b'), { operation: 'UPDATE', oldObject: route('a') }));
    expect(update.body.response).toMatchObject({
      allowed: false,
      status: { message: 'ModelRoute r is invalid: spec.modelName: is immutable' },
    });
    const same = await post('/validate', review(route('a'), { operation: 'UPDATE', oldObject: route('a') }));
    expect(same.body.response.allowed).toBe(true);
    const del = await post(
      '/validate',
      JSON.stringify({
        apiVersion: 'admission.k8s.io/v1',
        kind: 'AdmissionReview',
        request: { uid: 'd', operation: 'DELETE', object: null, oldObject: route('a') },
      }),
    );
    expect(del.body.response).toEqual({ uid: 'd', allowed: true });
  });

  const malformed: [string, string, string, string, number, string][] = [
    ['not JSON', '/validate', '{"apiVersion":', 'application/json', 400, 'malformed AdmissionReview: the body is not JSON'],
    [
      'wrong content type',
      '/validate',
      '{}',
      'text/plain',
      415,
      'malformed AdmissionReview: content-type must be application/json, got text/plain',
    ],
    [
      'not a review',
      '/validate',
      JSON.stringify({ apiVersion: 'v1', kind: 'Pod' }),
      'application/json',
      200,
      'malformed AdmissionReview: expected apiVersion admission.k8s.io/v1 and kind AdmissionReview, got v1 Pod',
    ],
    [
      'no request',
      '/validate',
      JSON.stringify({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview' }),
      'application/json',
      200,
      'malformed AdmissionReview: request is missing',
    ],
    [
      'no uid',
      '/validate',
      JSON.stringify({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', request: { operation: 'CREATE' } }),
      'application/json',
      200,
      'malformed AdmissionReview: request.uid is missing',
    ],
    ['a JSON array', '/validate', '[1,2]', 'application/json', 200, 'malformed AdmissionReview: the body is not a JSON object'],
    [
      'too large',
      '/validate',
      JSON.stringify({ pad: 'x'.repeat(70 * 1024) }),
      'application/json',
      413,
      'malformed AdmissionReview: the body is larger than 65536 bytes',
    ],
  ];
  it.each(malformed)('denies a malformed review (%s) with a clear message', async (_name, path, body, type, status, message) => {
    const r = await post(path, body, type);
    expect(r.status).toBe(status);
    expect(r.body).toMatchObject({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', response: { allowed: false } });
    expect(r.body.response.status?.message.startsWith(message)).toBe(true);
  });

  it('denies a review whose object is missing or is the wrong kind for the path (uid kept), and answers GET with 405', async () => {
    const noObject = await post(
      '/validate',
      JSON.stringify({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', request: { uid: 'u2', operation: 'CREATE' } }),
    );
    expect(noObject.body.response).toMatchObject({
      uid: 'u2',
      allowed: false,
      status: { message: 'malformed AdmissionReview: request.object is missing' },
    });
    const wrongKind = await post('/validate/modelroute', review(server({})));
    expect(wrongKind.body.response).toMatchObject({
      uid: 'uid-1',
      allowed: false,
      status: { message: 'malformed AdmissionReview: /validate/modelroute validates ModelRoute objects, got ModelServer' },
    });
    const get = await post('/validate', '', 'application/json', 'GET');
    expect(get.status).toBe(405);
    expect(get.body.response.allowed).toBe(false);
  });

  it('allows a kind it does not validate, with a warning, so a misrouted webhook never blocks the cluster', async () => {
    const r = await post('/validate', review({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'c' } }));
    expect(r.body.response).toEqual({ uid: 'uid-1', allowed: true, warnings: ['triad webhook: kind ConfigMap is not validated here'] });
  });

  it('counted every answer by result, logged the denials, and is still serving', async () => {
    const text = await webhook.metrics.registry.metrics();
    expect(text).toMatch(/triad_webhook_reviews_total\{kind="ModelServer",operation="CREATE",result="denied"\} [1-9]/);
    expect(text).toMatch(/triad_webhook_reviews_total\{kind="\(unknown\)",operation="\(unknown\)",result="malformed"\} [1-9]/);
    expect(logs.some((l) => l['msg'] === 'admission denied' && l['result'] === 'malformed')).toBe(true);
    const health = await new Promise<number>((resolve, reject) => {
      request({ host: '127.0.0.1', port: webhook.port, path: '/healthz', ca, servername: 'localhost' }, (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      })
        .on('error', reject)
        .end();
    });
    expect(health).toBe(200);
  });

  it('serves a renewed certificate once its files change, and keeps the old one when the new files are broken', async () => {
    const fingerprint = () =>
      new Promise<string>((resolve, reject) => {
        const socket = connect({ host: '127.0.0.1', port: webhook.port, rejectUnauthorized: false, servername: 'localhost' }, () => {
          resolve(socket.getPeerX509Certificate()?.fingerprint256 ?? '');
          socket.end();
        });
        socket.on('error', reject);
      });
    const before = await fingerprint();
    writeFileSync(join(dir, 'tls.crt'), 'not a certificate');
    expect(await webhook.reloadCertificate()).toBe(false);
    expect(await fingerprint()).toBe(before);
    const next = writeSelfSignedCert(dir, 'second');
    // A mounted Secret changes both files at once; rename them into place as the kubelet's symlink swap does.
    renameSync(next.key, join(dir, 'tls.key'));
    renameSync(next.cert, join(dir, 'tls.crt'));
    await waitFor(async () => (await fingerprint()) !== before, { what: 'the renewed certificate served' });
    const renewed = readFileSync(join(dir, 'tls.crt'));
    ca = renewed;
    const r = await post('/validate', review(server({})));
    expect(r.body.response.allowed).toBe(true);
  });
});
