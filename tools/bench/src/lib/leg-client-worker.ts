// The client side of leg-client-instructions.ts: one endpoint pool of the gateway (UpstreamPools, either
// transport), sending EPD-sized legs to a node:http server. Commands on stdin, one a line: `run <count>
// <connections>` sends the requests and answers `done <ok>` on stdout.
import { createInterface } from 'node:readline';
import { UpstreamPools, type EndpointSlot, type UpstreamRequest } from '@triad/connectors';

// Run with `node -e`: the arguments are the last two.
const [transport, portText] = process.argv.slice(-2);
const port = Number(portText);
const pools = new UpstreamPools({ httpTransport: transport === 'undici' ? 'undici' : 'h1' });
// An encode leg's size: 1.6 KB of JSON.
const body = JSON.stringify({ model: 'epd', max_tokens: 1, messages: [{ role: 'user', content: 'x'.repeat(1_540) }] });
let sequence = 0;

/**
 * One leg with the handler shape of leg.ts: a class with the legacy dispatch methods, the slot released when it
 * settles. (Not an object literal of arrow functions: under tsx's keepNames every one of those would be named with
 * an Object.defineProperty per leg, a cost the gateway's Leg does not have.)
 */
class BenchLeg implements UpstreamRequest {
  readonly request: UpstreamRequest['request'];
  readonly #done: (ok: boolean) => void;
  #slot: EndpointSlot | undefined;
  #status = 0;

  constructor(done: (ok: boolean) => void) {
    this.#done = done;
    this.request = {
      path: '/v1/chat/completions',
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-request-id': `leg-${sequence++}`, traceparent: TRACEPARENT },
      body,
    };
  }

  queued(slot: EndpointSlot): void {
    this.#slot = slot;
  }

  connected(slot: EndpointSlot): void {
    this.#slot = slot;
  }

  onConnect(): void {}

  onHeaders(status: number): boolean {
    this.#status = status;
    return true;
  }

  onData(): boolean {
    return true;
  }

  onComplete(): void {
    this.#slot?.release();
    this.#done(this.#status === 200);
  }

  onError(): void {
    this.#slot?.release();
    this.#done(false);
  }
}

const TRACEPARENT = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';

function leg(): Promise<boolean> {
  return new Promise((resolve) => pools.send('127.0.0.1', port, undefined, new BenchLeg(resolve)));
}

async function run(count: number, connections: number): Promise<number> {
  let next = 0;
  let ok = 0;
  const worker = async (): Promise<void> => {
    while (next < count) {
      next++;
      if (await leg()) ok++;
    }
  };
  await Promise.all(Array.from({ length: connections }, worker));
  return ok;
}

const lines = createInterface({ input: process.stdin });
lines.on('line', (line) => {
  const [command, count, connections] = line.trim().split(' ');
  if (command === 'run') {
    void run(Number(count), Number(connections)).then((ok) => process.stdout.write(`done ${ok}\n`));
  } else if (command === 'exit') {
    void pools.close().then(() => process.exit(0));
  }
});
process.stdout.write('ready\n');
