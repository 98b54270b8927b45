import type { ModelServerSpec } from '@triad/crd';

/** The pdGroup the tests label their EPD pods with: group `g`, roles by the label `r` (e, p, d). */
export const EPD_GROUP = { groupKey: 'g', encodeLabels: { r: 'e' }, prefillLabels: { r: 'p' }, decodeLabels: { r: 'd' } };

/**
 * A vLLM EPD ModelServer over pods labelled `app: <app>` in `EPD_GROUP`, NIXL KV, the engines on port 8000;
 * `extra` adds or replaces fields (an EC connector, a traffic policy).
 */
export function vllmEpdSpec(model: string, app: string, extra: Partial<ModelServerSpec> = {}): ModelServerSpec {
  return {
    model,
    inferenceEngine: 'vLLM',
    pipelineMode: 'epd',
    kvConnector: { type: 'nixl' },
    workloadPort: { port: 8000, protocol: 'http' },
    workloadSelector: { matchLabels: { app }, pdGroup: EPD_GROUP },
    ...extra,
  };
}
