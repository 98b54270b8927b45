import { Command, InvalidArgumentError } from 'commander';
import { fetchTrace, fetchTraces, TraceCommandError } from './trace/client';
import { renderTrace, renderTraceList } from './trace/render';
import { serve } from './trace/serve';

const DEFAULT_URL = 'http://127.0.0.1:4318';

function parsePort(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0 || n > 65535) throw new InvalidArgumentError('must be a port number (0 picks a free one)');
  return n;
}

function parsePositiveInt(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError('must be a positive integer');
  return n;
}

/**
 * `triad trace serve|list|show`: a local OTLP receiver and a terminal viewer for it, so traces can be read
 * without Jaeger (see docs/tracing.md).
 */
export async function main(argv: readonly string[]): Promise<void> {
  const out = process.stdout;
  const from = process.env['TRIAD_TRACE_URL'] ?? DEFAULT_URL;
  const program = new Command('triad trace')
    .description('a local OTLP trace receiver and a span-tree viewer (no Jaeger needed)')
    .showHelpAfterError()
    .exitOverride();
  program
    .command('serve')
    .description('run an OTLP/HTTP receiver (POST /v1/traces, protobuf or JSON) keeping spans in memory')
    .option('--port <port>', 'port (4318 is the OTLP/HTTP default)', parsePort, 4318)
    .option('--host <host>', 'address to bind (0.0.0.0 to accept other hosts)', '127.0.0.1')
    .option('--max-spans <n>', 'spans kept before the oldest traces are dropped', parsePositiveInt, 100_000)
    .action(async (opts: { port: number; host: string; maxSpans: number }) => {
      await serve(opts, out);
    });
  program
    .command('list')
    .description('list recent traces, newest first')
    .option('--from <url>', 'receiver URL (env TRIAD_TRACE_URL)', from)
    .option('--limit <n>', 'how many', parsePositiveInt, 20)
    .action(async (opts: { from: string; limit: number }) => {
      out.write(renderTraceList(await fetchTraces(opts.from, opts.limit)));
    });
  program
    .command('show')
    .description('print the span tree of one trace (name, service, kind, start offset, duration, key attributes)')
    .argument('<trace-id>', 'the 32-hex-digit trace id (x-triad-trace-id response header, access log `trace_id`)')
    .option('--from <url>', 'receiver URL (env TRIAD_TRACE_URL)', from)
    .option('--all-attributes', 'print every attribute, not only the key ones')
    .option('--json', 'print the spans as JSON')
    .action(async (traceId: string, opts: { from: string; allAttributes?: boolean; json?: boolean }) => {
      const spans = await fetchTrace(opts.from, traceId);
      out.write(
        opts.json
          ? `${JSON.stringify(spans, null, 2)}\n`
          : renderTrace(traceId.toLowerCase(), spans, { allAttributes: opts.allAttributes === true }),
      );
    });
  try {
    await program.parseAsync([...argv], { from: 'user' });
  } catch (err) {
    // Commander already printed help or the usage error; keep its exit code (0 for --help, 1 otherwise).
    const { code, exitCode } = err as { code?: string; exitCode?: number };
    if (code?.startsWith('commander.')) {
      process.exitCode = exitCode ?? 1;
      return;
    }
    if (err instanceof TraceCommandError) {
      process.stderr.write(`triad trace: ${err.message}\n`);
      process.exitCode = 1;
      return;
    }
    throw err;
  }
}
