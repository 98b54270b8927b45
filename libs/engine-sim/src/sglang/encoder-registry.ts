import { EngineHttpError } from '../http/engine-error';
import type { Exchange, RouteHandler } from '../http/router';
import { sendJson, sendText } from '../http/respond';

/**
 * The encoder registry a `--language-only` SGLang server embeds (docs/protocols/sglang.md): the control plane keeps it
 * equal to the healthy encoders of the PD group.
 */
export class EncoderRegistry {
  readonly #urls: string[] = [];

  constructor(initial: readonly string[] = []) {
    for (const url of initial) this.register(url);
  }

  register(url: string): void {
    if (!this.#urls.includes(url)) this.#urls.push(url);
  }

  unregister(url: string): boolean {
    const at = this.#urls.indexOf(url);
    if (at < 0) return false;
    this.#urls.splice(at, 1);
    return true;
  }

  list(): readonly string[] {
    return this.#urls.slice();
  }
}

function urlOf(ex: Exchange): string {
  const body = ex.body.ok ? (ex.body.value as { url?: unknown } | undefined) : undefined;
  const url = body && typeof body === 'object' ? body.url : undefined;
  if (typeof url !== 'string' || url.trim().length === 0) throw new EngineHttpError(400, 'url is required');
  return url.trim().replace(/\/+$/, '');
}

export function registerEncoderHandler(registry: EncoderRegistry): RouteHandler {
  return (ex) => {
    registry.register(urlOf(ex));
    sendText(ex.res, 200, 'OK');
  };
}

export function unregisterEncoderHandler(registry: EncoderRegistry): RouteHandler {
  return (ex) => {
    const url = urlOf(ex);
    if (!registry.unregister(url)) throw new EngineHttpError(404, `encoder url ${url} is not registered`);
    sendText(ex.res, 200, 'OK');
  };
}

export function listEncodersHandler(registry: EncoderRegistry): RouteHandler {
  return (ex) => sendJson(ex.res, 200, JSON.stringify({ encoder_urls: registry.list() }));
}
