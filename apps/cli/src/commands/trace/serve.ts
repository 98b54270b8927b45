import { startOtlpReceiver } from '@triad/telemetry/receiver';

export interface ServeOptions {
  readonly host: string;
  readonly port: number;
  readonly maxSpans: number;
}

/**
 * `triad trace serve`: an OTLP/HTTP receiver in the foreground, for machines without Jaeger. Services export to
 * it with `OTEL_EXPORTER_OTLP_ENDPOINT`; `triad trace list|show` read it back. Stops on SIGINT/SIGTERM.
 */
export async function serve(options: ServeOptions, out: NodeJS.WritableStream): Promise<void> {
  const receiver = await startOtlpReceiver({ host: options.host, port: options.port, maxSpans: options.maxSpans });
  out.write(
    `triad trace: OTLP/HTTP receiver listening on ${receiver.url} (protobuf and JSON, POST /v1/traces)\n` +
      `  export to it:  OTEL_EXPORTER_OTLP_ENDPOINT=${receiver.url}\n` +
      `  read it back:  triad trace list --from ${receiver.url}\n` +
      `                 triad trace show <trace-id> --from ${receiver.url}\n`,
  );
  await new Promise<void>((resolve) => {
    const stop = () => resolve();
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
  });
  await receiver.close();
  out.write('triad trace: receiver stopped\n');
}
