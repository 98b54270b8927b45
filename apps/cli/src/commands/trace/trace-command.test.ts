import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { ROOT_CONTEXT, SpanKind, trace } from '@opentelemetry/api';
import { ProtobufTraceSerializer } from '@opentelemetry/otlp-transformer';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { waitFor } from '@triad/testing';

// The real `triad` binary: `trace serve` as a long-running process, `trace list|show` as one-shot commands.
const root = join(__dirname, '../../../../..');
const bin = join(root, 'apps/cli/bin/triad.js');

function triad(args: string[]): { status: number | null; stdout: string; stderr: string } {
  const run = spawnSync(process.execPath, [bin, ...args], { cwd: root, encoding: 'utf8', timeout: 30_000 });
  return { status: run.status, stdout: run.stdout, stderr: run.stderr };
}

/** An EPD-shaped trace from two services, as the OTLP http/protobuf exporter would send it. */
function exportBody(): { body: Uint8Array; traceId: string } {
  const memory = new InMemorySpanExporter();
  const provider = (service: string) =>
    new BasicTracerProvider({
      resource: resourceFromAttributes({ 'service.name': service }),
      spanProcessors: [new SimpleSpanProcessor(memory)],
    }).getTracer('test');
  const gateway = provider('triad-gateway');
  const scheduler = provider('triad-scheduler');
  const t0 = Date.now() - 1000;
  const request = gateway.startSpan(
    'POST /v1/chat/completions',
    { kind: SpanKind.SERVER, startTime: t0, attributes: { 'http.response.status_code': 200 } },
    ROOT_CONTEXT,
  );
  const ctx = trace.setSpan(ROOT_CONTEXT, request);
  const schedule = gateway.startSpan('schedule', { kind: SpanKind.CLIENT, startTime: t0 + 1 }, ctx);
  scheduler
    .startSpan(
      'schedule',
      { kind: SpanKind.SERVER, startTime: t0 + 2, attributes: { 'triad.decision.endpoint': 'default.m.decode-0' } },
      trace.setSpan(ROOT_CONTEXT, schedule),
    )
    .end(t0 + 3);
  schedule.end(t0 + 4);
  for (const [i, start] of [
    [0, 5],
    [1, 7],
  ] as const) {
    gateway
      .startSpan('encode', { kind: SpanKind.CLIENT, startTime: t0 + start, attributes: { 'triad.encoder.item_index': i } }, ctx)
      .end(t0 + start + 40);
  }
  gateway.startSpan('decode', { kind: SpanKind.CLIENT, startTime: t0 + 50 }, ctx).end(t0 + 90);
  request.end(t0 + 91);
  const body = ProtobufTraceSerializer.serializeRequest(memory.getFinishedSpans());
  if (!body) throw new Error('nothing serialized');
  return { body, traceId: request.spanContext().traceId };
}

describe('triad trace serve | list | show', () => {
  let server: ChildProcess;
  let stdout = '';
  let url = '';
  beforeAll(async () => {
    server = spawn(process.execPath, [bin, 'trace', 'serve', '--port', '0'], { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] });
    server.stdout?.on('data', (d: Buffer) => {
      stdout += d.toString();
    });
    url = await waitFor(() => /listening on (http:\/\/\S+)/.exec(stdout)?.[1], { what: 'triad trace serve to listen', timeoutMs: 20_000 });
  }, 30_000);
  afterAll(async () => {
    if (server.exitCode === null && server.signalCode === null) {
      const closed = new Promise((resolve) => server.once('close', resolve));
      server.kill('SIGTERM');
      await closed;
    }
  });

  it('receives an export and prints its span tree', async () => {
    const { body, traceId } = exportBody();
    const res = await fetch(`${url}/v1/traces`, { method: 'POST', headers: { 'content-type': 'application/x-protobuf' }, body });
    expect(res.status).toBe(200);

    const list = triad(['trace', 'list', '--from', url]);
    expect(list.status).toBe(0);
    expect(list.stdout).toMatch(new RegExp(`${traceId} .* 6 .* triad-gateway: POST /v1/chat/completions`));

    const show = triad(['trace', 'show', traceId, '--from', url]);
    expect(show.status).toBe(0);
    const lines = show.stdout.split('\n');
    const serviceColumn = lines.find((l) => l.startsWith('SPAN'))!.indexOf('SERVICE');
    const tree = lines.filter((l) => /\b(SERVER|CLIENT)\b/.test(l)).map((l) => l.slice(0, serviceColumn).trimEnd());
    expect(tree).toEqual(['POST /v1/chat/completions', '├─ schedule', '│  └─ schedule', '├─ encode', '├─ encode', '└─ decode']);
    expect(show.stdout).toContain(`trace ${traceId} · 6 spans · triad-gateway, triad-scheduler · 91.00 ms`);
    expect(show.stdout).toMatch(/├─ encode\s+triad-gateway\s+CLIENT\s+\+5\.00\s+40\.00/);
    expect(show.stdout).toMatch(/├─ encode\s+triad-gateway\s+CLIENT\s+\+7\.00\s+40\.00/);
    expect(show.stdout).toContain('decision.endpoint=default.m.decode-0');
  }, 30_000);

  it('says when a trace is unknown or the receiver is not there, with exit code 1', () => {
    const unknown = triad(['trace', 'show', 'f'.repeat(32), '--from', url]);
    expect(unknown.status).toBe(1);
    expect(unknown.stderr).toContain('not found');
    const nobody = triad(['trace', 'list', '--from', 'http://127.0.0.1:9']);
    expect(nobody.status).toBe(1);
    expect(nobody.stderr).toContain('cannot reach the trace receiver');
  }, 30_000);

  it('stops cleanly on SIGTERM', async () => {
    // 'close' comes after the child's stdout has been read to the end ('exit' may come before the last line).
    const closed = new Promise<number | null>((resolve) => server.once('close', (code) => resolve(code)));
    server.kill('SIGTERM');
    expect(await closed).toBe(0);
    expect(stdout).toContain('receiver stopped');
  }, 30_000);
});
