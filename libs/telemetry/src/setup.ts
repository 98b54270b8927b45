import { context, diag, DiagLogLevel, propagation, trace } from '@opentelemetry/api';
import type { SpanExporter } from '@opentelemetry/sdk-trace-base';
import { ErrorCode, TriadError } from '@triad/errors';
import { readTelemetryConfig, type ServiceName, type TelemetryConfig } from './config';
import { throttledDiagLogger, type TelemetryLogger } from './diag-logger';
import type { SdkInstance } from './sdk';
import { tracing } from './state';

export interface TelemetryOptions {
  readonly serviceName: ServiceName;
  /** The app's version, recorded as `service.version`. */
  readonly version: string;
  /** Environment to read `OTEL_*`, `POD_NAME`, `POD_NAMESPACE` from (default `process.env`). */
  readonly env?: Readonly<Record<string, string | undefined>>;
  /** Receives the start-up line and throttled SDK warnings (export failures, dropped spans). */
  readonly logger?: TelemetryLogger;
  /** Upper bound for `shutdown()` and `forceFlush()` (default 5000 ms): a hung collector never holds a drain. */
  readonly shutdownTimeoutMs?: number;
  /** Replaces the OTLP exporter (in-process tests); the rest of the pipeline (sampler, batching) is unchanged. */
  readonly exporter?: SpanExporter;
}

export interface Telemetry {
  /** True when spans are exported. */
  readonly enabled: boolean;
  readonly config: TelemetryConfig;
  /** Exports what is queued; resolves after at most `shutdownTimeoutMs` even when the collector hangs. */
  forceFlush(): Promise<void>;
  /** Stops tracing (helpers become no-ops at once), flushes within `shutdownTimeoutMs`, and unregisters globals. */
  shutdown(): Promise<void>;
}

let active: Telemetry | undefined;

/** Resolves with `work`'s outcome or `false` after `ms`, whichever is first; never rejects. */
function bounded(work: Promise<void>, ms: number): Promise<boolean> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), ms);
    timer.unref();
    work.then(
      () => {
        clearTimeout(timer);
        resolve(true);
      },
      () => {
        clearTimeout(timer);
        resolve(true);
      },
    );
  });
}

function disabledTelemetry(config: TelemetryConfig): Telemetry {
  return {
    enabled: false,
    config,
    forceFlush: async () => undefined,
    shutdown: async () => {
      if (active?.config === config) active = undefined;
    },
  };
}

/**
 * Configures tracing for one service from the standard `OTEL_*` env and registers it process-wide. Call once at
 * start-up, before the first request; call `shutdown()` in the drain. With tracing off (no endpoint configured,
 * `OTEL_SDK_DISABLED=true`, `OTEL_TRACES_EXPORTER=none`) no SDK module is loaded and every helper is a no-op.
 */
export function setupTelemetry(options: TelemetryOptions): Telemetry {
  if (active) throw new TriadError(ErrorCode.Internal, 'telemetry is already set up in this process; call shutdown() first');
  const config = readTelemetryConfig(options.serviceName, options.env ?? process.env);
  const logger = options.logger;
  for (const warning of config.warnings) logger?.warn({ component: 'telemetry' }, warning);
  if (!config.enabled) {
    logger?.info?.({ component: 'telemetry', tracing: false, reason: config.disabledReason }, 'tracing disabled');
    active = disabledTelemetry(config);
    return active;
  }
  if (logger) diag.setLogger(throttledDiagLogger(logger), { logLevel: DiagLogLevel.WARN, suppressOverrideMessage: true });
  const { startSdk } = require('./sdk') as typeof import('./sdk');
  const sdk: SdkInstance = startSdk(config, options.version, options.exporter);
  tracing.tracer = sdk.tracer;
  logger?.info?.(
    {
      component: 'telemetry',
      tracing: true,
      serviceName: config.serviceName,
      endpoint: config.tracesUrl,
      sampler: config.sampler,
      ratio: config.samplerRatio,
    },
    'tracing enabled',
  );

  const timeoutMs = options.shutdownTimeoutMs ?? 5000;
  let stopped: Promise<void> | undefined;
  const telemetry: Telemetry = {
    enabled: true,
    config,
    forceFlush: async () => {
      if (!(await bounded(sdk.forceFlush(), timeoutMs))) logger?.warn({ component: 'telemetry', timeoutMs }, 'trace flush timed out');
    },
    shutdown: () => {
      stopped ??= (async () => {
        tracing.tracer = undefined;
        if (!(await bounded(sdk.shutdown(), timeoutMs))) {
          logger?.warn({ component: 'telemetry', timeoutMs }, 'trace export did not finish before shutdown; queued spans dropped');
        }
        trace.disable();
        propagation.disable();
        context.disable();
        if (logger) diag.disable();
        if (active === telemetry) active = undefined;
      })();
      return stopped;
    },
  };
  active = telemetry;
  return telemetry;
}
