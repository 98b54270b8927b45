/**
 * A scrape fleet in one child process: one TCP listener on every loopback address (0.0.0.0, one port) answers
 * `GET /metrics` and `GET /v1/models` for any number of simulated pods 127.x.y.z with canned HTTP responses (the
 * text a zero-profile vLLM engine-sim serves, ~26 KB), without an HTTP parser: answering 10,000 scrapes a second
 * this way costs a fraction of what 10,000 engine processes or node:http servers would, so the pod-watchers
 * being measured get the cores.
 *
 * Control on stdin, one word a line: `busy` (the running-request gauge takes one of eight values per answer, so
 * nearly every scrape changes the endpoint record), `steady` (one fixed text), `stats` (prints
 * `{"scrapes":N,"connections":N}`). On start it prints `{"port":N}`.
 *
 *   node --import tsx tools/bench/src/scrape-fleet-server.ts
 */
import { createServer, type Socket } from 'node:net';
import { createInterface } from 'node:readline';
import { startSimEngine } from '@triad/engine-sim';

function response(contentType: string, body: string): Buffer {
  const bytes = Buffer.from(body, 'utf8');
  const head =
    `HTTP/1.1 200 OK\r\ncontent-type: ${contentType}\r\ncontent-length: ${bytes.length}\r\nconnection: keep-alive\r\n` +
    `keep-alive: timeout=60\r\n\r\n`;
  return Buffer.concat([Buffer.from(head, 'latin1'), bytes]);
}

async function main(): Promise<void> {
  const sim = await startSimEngine({ engine: 'vllm', role: 'both', latencyProfile: 'zero' });
  const metrics = await (await fetch(`${sim.url}/metrics`)).text();
  const models = await (await fetch(`${sim.url}/v1/models`)).text();
  await sim.close();
  const line = /vllm:num_requests_running\{[^}]*\} [0-9.]+/.exec(metrics)?.[0] ?? '';
  const at = metrics.indexOf(line);
  const prefix = line.slice(0, line.lastIndexOf(' ') + 1);
  const steady = response('text/plain; version=0.0.4', metrics);
  const busy = Array.from({ length: 8 }, (_, v) =>
    response('text/plain; version=0.0.4', `${metrics.slice(0, at)}${prefix}${v}.0${metrics.slice(at + line.length)}`),
  );
  const modelsReply = response('application/json', models);
  const notFound = Buffer.from('HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n', 'latin1');
  let mode: 'steady' | 'busy' = 'steady';
  let scrapes = 0;
  let connections = 0;

  const server = createServer({ noDelay: true }, (socket: Socket) => {
    connections += 1;
    let pending = '';
    socket.on('data', (chunk: Buffer) => {
      pending += chunk.toString('latin1');
      for (let end = pending.indexOf('\r\n\r\n'); end >= 0; end = pending.indexOf('\r\n\r\n')) {
        const head = pending.slice(0, end);
        pending = pending.slice(end + 4);
        if (head.startsWith('GET /metrics')) {
          scrapes += 1;
          socket.write(mode === 'busy' ? busy[Math.floor(Math.random() * 8)] : steady);
        } else if (head.startsWith('GET /v1/models')) {
          socket.write(modelsReply);
        } else {
          socket.write(notFound);
        }
      }
    });
    socket.on('error', () => undefined);
  });
  // One listener stands for 10,000 pods: a replica joining connects to its whole shard at once, which overflowed
  // the default accept queue (511) and came back as resets. Each real pod has its own queue.
  server.listen({ port: 0, host: '0.0.0.0', backlog: 4096 }, () => {
    process.stdout.write(`${JSON.stringify({ port: (server.address() as { port: number }).port })}\n`);
  });
  for await (const cmd of createInterface({ input: process.stdin })) {
    if (cmd === 'busy' || cmd === 'steady') mode = cmd;
    else if (cmd === 'stats') process.stdout.write(`${JSON.stringify({ scrapes, connections })}\n`);
  }
  server.close();
  process.exit(0);
}

main().catch((err: unknown) => {
  process.stderr.write(`scrape fleet failed: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
