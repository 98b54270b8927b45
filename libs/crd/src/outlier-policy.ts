import type { ModelServerSpec } from './model-server';
import { durationMs } from './semantic-rules';

/** `trafficPolicy.outlierDetection` with its defaults applied. */
export interface OutlierPolicy {
  /** 0 = outlier detection off. */
  readonly consecutiveErrors: number;
  readonly baseEjectionMs: number;
  readonly maxEjectionMs: number;
  readonly maxEjectionPercent: number;
  /**
   * Envoy's `healthy_panic_threshold`: when fewer than this share (percent) of a stage's candidates are healthy,
   * the stage ignores ejection and balances over all of them (0 = never).
   */
  readonly panicThresholdPercent: number;
  /** Active probing of ejected endpoints (a 2xx ends the ejection early); absent: only real traffic probes. */
  readonly probe?: { readonly path: string; readonly intervalMs: number; readonly timeoutMs: number };
}

export const DEFAULT_OUTLIER_POLICY: OutlierPolicy = Object.freeze({
  consecutiveErrors: 5,
  baseEjectionMs: 10_000,
  maxEjectionMs: 300_000,
  maxEjectionPercent: 50,
  panicThresholdPercent: 50,
});

/** The outlier policy of a ModelServer: its `trafficPolicy.outlierDetection` over the defaults. */
export function outlierPolicyOf(spec: Pick<ModelServerSpec, 'trafficPolicy'>): OutlierPolicy {
  const o = spec.trafficPolicy?.outlierDetection;
  if (o === undefined) return DEFAULT_OUTLIER_POLICY;
  const base = durationMs(o.baseEjectionTime, DEFAULT_OUTLIER_POLICY.baseEjectionMs);
  return {
    consecutiveErrors: o.consecutiveErrors ?? DEFAULT_OUTLIER_POLICY.consecutiveErrors,
    baseEjectionMs: base,
    maxEjectionMs: Math.max(base, durationMs(o.maxEjectionTime, DEFAULT_OUTLIER_POLICY.maxEjectionMs)),
    maxEjectionPercent: o.maxEjectionPercent ?? DEFAULT_OUTLIER_POLICY.maxEjectionPercent,
    panicThresholdPercent: o.panicThreshold ?? DEFAULT_OUTLIER_POLICY.panicThresholdPercent,
    ...(o.probe === undefined
      ? {}
      : {
          probe: {
            path: o.probe.path ?? '/health',
            intervalMs: Math.max(100, durationMs(o.probe.interval, 5000)),
            timeoutMs: Math.max(10, durationMs(o.probe.timeout, 1000)),
          },
        }),
  };
}
