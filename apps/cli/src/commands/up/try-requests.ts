import { resolvePipelineMode, type ModelRoute, type ModelServer, type PipelineMode } from '@triad/crd';

/** A 1×1 PNG as a data URI: an image the engines accept without fetching anything. */
export const TINY_PNG_DATA_URI =
  'data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==';

/** A route clients can call, with the pipeline mode of the ModelServer it leads to. */
export interface CallableModel {
  readonly name: string;
  readonly mode: PipelineMode;
  readonly engine: string;
}

/** The model names clients can send (ModelRoute `modelName`s), with the mode of their first target. */
export function callableModels(routes: readonly ModelRoute[], servers: readonly ModelServer[]): CallableModel[] {
  const models: CallableModel[] = [];
  for (const route of routes) {
    const name = route.spec.modelName;
    const target = route.spec.rules?.[0]?.targetModels[0]?.modelServerName;
    const server = servers.find((s) => s.metadata.name === target && s.metadata.namespace === route.metadata.namespace);
    if (name && server) models.push({ name, mode: resolvePipelineMode(server.spec), engine: server.spec.inferenceEngine });
  }
  return models;
}

/** The three requests to try: text, image and a stream, each on the model that shows it best. */
export interface TryRequests {
  readonly text?: CallableModel;
  readonly image?: CallableModel;
  readonly stream?: CallableModel;
}

export function pickTryModels(models: readonly CallableModel[]): TryRequests {
  const byMode = (mode: PipelineMode) => models.find((m) => m.mode === mode);
  return {
    text: byMode('aggregated') ?? byMode('pd') ?? models[0],
    image: byMode('epd') ?? models[0],
    stream: byMode('pd') ?? byMode('epd') ?? models[0],
  };
}

function curl(baseUrl: string, body: unknown, stream: boolean): string {
  return `curl ${stream ? '-N ' : ''}-s ${baseUrl}/v1/chat/completions -H 'content-type: application/json' -d '${JSON.stringify(body)}'`;
}

/** The curl lines printed when the stack is ready. */
export function curlLines(baseUrl: string, picks: TryRequests): { label: string; command: string }[] {
  const lines: { label: string; command: string }[] = [];
  if (picks.text) {
    lines.push({
      label: `text (${picks.text.name}, ${picks.text.engine} ${picks.text.mode})`,
      command: curl(
        baseUrl,
        { model: picks.text.name, messages: [{ role: 'user', content: 'Say hello in five words.' }], max_tokens: 32 },
        false,
      ),
    });
  }
  if (picks.image) {
    lines.push({
      label: `image (${picks.image.name}, ${picks.image.engine} ${picks.image.mode})`,
      command: curl(
        baseUrl,
        {
          model: picks.image.name,
          messages: [
            {
              role: 'user',
              content: [
                { type: 'text', text: 'What is in this image?' },
                { type: 'image_url', image_url: { url: TINY_PNG_DATA_URI } },
              ],
            },
          ],
          max_tokens: 32,
        },
        false,
      ),
    });
  }
  if (picks.stream) {
    lines.push({
      label: `stream (${picks.stream.name}, ${picks.stream.engine} ${picks.stream.mode})`,
      command: curl(
        baseUrl,
        { model: picks.stream.name, messages: [{ role: 'user', content: 'Count from one to ten.' }], max_tokens: 32, stream: true },
        true,
      ),
    });
  }
  return lines;
}
