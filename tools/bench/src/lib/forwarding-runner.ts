import type { BufferedAnswer, LegHandle, LegRunner, LegSpec } from '@triad/connectors';

/** One leg a connector sent through a {@link ForwardingRunner}. */
export interface ForwardedLeg {
  readonly stage: LegSpec['stage'];
  readonly body: string;
  readonly status: number;
}

/**
 * A LegRunner that sends each leg to its engine over HTTP, as the gateway's does, minus everything else the gateway
 * does per leg (timeouts, spans, retries): a connector run against real engine-sims outside a gateway, to see what it
 * sends (`legs`, `bytes` per stage). A non-2xx answer fails the leg.
 */
export class ForwardingRunner implements LegRunner {
  readonly bytes: Record<string, number> = { encode: 0, prefill: 0, decode: 0 };
  readonly legs: ForwardedLeg[] = [];

  #send(spec: LegSpec): Promise<BufferedAnswer> {
    this.bytes[spec.stage] = (this.bytes[spec.stage] ?? 0) + Buffer.byteLength(spec.body);
    return fetch(`http://${spec.endpoint.ip}:${spec.endpoint.port}${spec.path ?? '/v1/chat/completions'}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-request-id': spec.requestId, ...spec.headers },
      body: spec.body,
    }).then(async (res) => {
      this.legs.push({ stage: spec.stage, body: spec.body, status: res.status });
      const body = Buffer.from(await res.arrayBuffer());
      if (res.status !== 200) throw new Error(`${spec.stage} answered ${res.status}: ${body.toString()}`);
      return { status: res.status, contentType: res.headers.get('content-type') ?? 'application/json', body };
    });
  }

  buffered(spec: LegSpec): LegHandle<BufferedAnswer> {
    return { promise: this.#send(spec), abort: () => undefined };
  }

  relay(spec: LegSpec): LegHandle<void> {
    return { promise: this.#send(spec).then(() => undefined), abort: () => undefined };
  }

  drained(spec: LegSpec): LegHandle<void> {
    return this.relay(spec);
  }

  tapped(spec: LegSpec, onData: (chunk: Buffer) => void): LegHandle<void> {
    return { promise: this.#send(spec).then((answer) => onData(answer.body)), abort: () => undefined };
  }

  respond(): void {}
  writeStream(): void {}
  endStream(): void {}
  retrying(): void {}
  pause(): Promise<void> {
    return Promise.resolve();
  }
  kvStranded(): void {}
  kvParamsMissing(): void {}
  legBody(body: Record<string, unknown>): Record<string, unknown> {
    return body;
  }
}
