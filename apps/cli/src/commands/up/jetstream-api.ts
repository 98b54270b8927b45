import { randomBytes } from 'node:crypto';
import { connect, type Socket } from 'node:net';

/**
 * Just enough of the NATS client protocol to call the JetStream API (`$JS.API.*` request-reply) from `triad up`:
 * list a server's streams and delete some. `triad up` only needs this before its services start and after they
 * stop, and a NATS client library would land in the CLI bundle every service process loads first.
 */
export class JetStreamApi {
  readonly #socket: Socket;
  readonly #inbox = `_INBOX.triadup${randomBytes(6).toString('hex')}`;
  #buffer = Buffer.alloc(0);
  #next = 0;
  #waiting = new Map<string, { resolve: (value: unknown) => void; reject: (err: Error) => void }>();
  #failure: Error | undefined;

  private constructor(socket: Socket) {
    this.#socket = socket;
    socket.on('data', (chunk: Buffer) => this.#read(chunk));
    socket.on('error', (err) => this.#fail(err));
    socket.on('close', () => this.#fail(new Error('the server closed the connection')));
  }

  /** Connects, reads the server's INFO and subscribes to this connection's reply inbox. */
  static open(host: string, port: number, timeoutMs: number): Promise<JetStreamApi> {
    return new Promise((resolve, reject) => {
      const socket = connect({ host, port });
      const timer = setTimeout(() => {
        socket.destroy();
        reject(new Error(`no answer from ${host}:${port} within ${timeoutMs} ms`));
      }, timeoutMs);
      socket.once('error', (err) => {
        clearTimeout(timer);
        reject(err);
      });
      socket.once('data', (first: Buffer) => {
        clearTimeout(timer);
        if (!first.toString('latin1').startsWith('INFO ')) {
          socket.destroy();
          reject(new Error(`${host}:${port} is not a NATS server`));
          return;
        }
        const api = new JetStreamApi(socket);
        const connectLine = JSON.stringify({ verbose: false, pedantic: false, protocol: 1, name: 'triad-up', lang: 'node' });
        socket.write(`CONNECT ${connectLine}\r\nSUB ${api.#inbox}.* 1\r\n`);
        resolve(api);
      });
    });
  }

  /** One JetStream API call: the JSON answer, or a rejection (server error, `-ERR`, no answer within `timeoutMs`). */
  request(subject: string, body: unknown, timeoutMs: number): Promise<unknown> {
    if (this.#failure) return Promise.reject(this.#failure);
    const reply = `${this.#inbox}.${this.#next++}`;
    const payload = Buffer.from(body === undefined ? '' : JSON.stringify(body));
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#waiting.delete(reply);
        reject(new Error(`no answer to ${subject} within ${timeoutMs} ms`));
      }, timeoutMs);
      this.#waiting.set(reply, {
        resolve: (value) => {
          clearTimeout(timer);
          resolve(value);
        },
        reject: (err) => {
          clearTimeout(timer);
          reject(err);
        },
      });
      this.#socket.write(Buffer.concat([Buffer.from(`PUB ${subject} ${reply} ${payload.length}\r\n`), payload, Buffer.from('\r\n')]));
    });
  }

  close(): void {
    this.#socket.destroy();
  }

  #fail(err: Error): void {
    this.#failure ??= err;
    for (const waiter of this.#waiting.values()) waiter.reject(err);
    this.#waiting.clear();
  }

  /** Protocol lines: PING is answered, -ERR fails every waiting call, MSG resolves the call its reply subject names. */
  #read(chunk: Buffer): void {
    this.#buffer = Buffer.concat([this.#buffer, chunk]);
    for (;;) {
      const end = this.#buffer.indexOf('\r\n');
      if (end < 0) return;
      const line = this.#buffer.subarray(0, end).toString('latin1');
      if (line.startsWith('MSG ')) {
        // MSG <subject> <sid> [reply-to] <#bytes>
        const parts = line.split(' ');
        const size = Number(parts.at(-1));
        if (this.#buffer.length < end + 2 + size + 2) return;
        const payload = this.#buffer.subarray(end + 2, end + 2 + size).toString('utf8');
        this.#buffer = this.#buffer.subarray(end + 2 + size + 2);
        const waiter = this.#waiting.get(parts[1]);
        this.#waiting.delete(parts[1]);
        try {
          waiter?.resolve(JSON.parse(payload) as unknown);
        } catch (err) {
          waiter?.reject(err as Error);
        }
        continue;
      }
      this.#buffer = this.#buffer.subarray(end + 2);
      if (line === 'PING') this.#socket.write('PONG\r\n');
      else if (line.startsWith('-ERR'))
        this.#fail(
          new Error(
            line
              .slice(4)
              .trim()
              .replace(/^'(.*)'$/, '$1'),
          ),
        );
    }
  }
}

/** The JetStream API's error answer (`{"error": {"code", "description"}}`), as an Error; undefined when it is none. */
function apiError(answer: unknown): Error | undefined {
  const error = (answer as { error?: { description?: string; code?: number } } | null)?.error;
  return error ? new Error(`${error.description ?? 'JetStream API error'} (${error.code ?? '?'})`) : undefined;
}

/** Every stream name on the server (the API pages them). */
export async function listStreams(api: JetStreamApi, timeoutMs: number): Promise<string[]> {
  const names: string[] = [];
  for (;;) {
    const answer = (await api.request('$JS.API.STREAM.NAMES', { offset: names.length }, timeoutMs)) as {
      total?: number;
      streams?: string[] | null;
    };
    const err = apiError(answer);
    if (err) throw err;
    const page = answer.streams ?? [];
    names.push(...page);
    if (page.length === 0 || names.length >= (answer.total ?? 0)) return names;
  }
}

/** Deletes one stream (a KV bucket `b` is the stream `KV_b`). */
export async function deleteStream(api: JetStreamApi, name: string, timeoutMs: number): Promise<void> {
  const err = apiError(await api.request(`$JS.API.STREAM.DELETE.${name}`, undefined, timeoutMs));
  if (err) throw err;
}
