// The floor under the scheduler service's round trip: one request at a time from this process to a responder in a
// child process through nats-server, the way the gateway's scheduler client asks (a publish with a reply subject on
// its own inbox subscription, no nats.js request()), with payloads the size of an EPD scheduling batch and its
// reply. `echo` answers with fixed bytes; `json` parses the request and serializes a reply object first (what any
// JSON responder must do). Nothing else runs in either process.
//
//   npx tsx tools/bench/src/nats-floor.ts [--requests 4000] [--warmup 1000] [--request-bytes 700] [--reply-bytes 900]
import { spawn } from 'node:child_process';
import { connect, createInbox, type Msg } from '@nats-io/transport-node';
import { parseToolArgs, startNatsServer } from '@triad/testing';
import { percentile } from './scheduler-cluster';

const { values } = parseToolArgs({
  options: {
    requests: { type: 'string', default: '4000' },
    warmup: { type: 'string', default: '1000' },
    'request-bytes': { type: 'string', default: '700' },
    'reply-bytes': { type: 'string', default: '900' },
    responder: { type: 'string' },
  },
});

/** A JSON object of about `bytes` bytes (one padded string field). */
function payload(bytes: number): { v: number; pad: string } {
  return { v: 1, pad: 'x'.repeat(Math.max(0, bytes - 18)) };
}

async function respond(url: string, replyBytes: number): Promise<void> {
  const nc = await connect({ servers: url, noEcho: true });
  const fixed = new TextEncoder().encode(JSON.stringify(payload(replyBytes)));
  const reply = payload(replyBytes);
  const decoder = new TextDecoder();
  nc.subscribe('floor.echo', {
    callback: (_e, m) => {
      m.respond(fixed);
    },
  });
  nc.subscribe('floor.json', {
    callback: (_e, m) => {
      const request = JSON.parse(decoder.decode(m.data)) as { v: number };
      m.respond(JSON.stringify({ ...reply, v: request.v }));
    },
  });
  await nc.flush();
  process.stdout.write('ready\n');
  await nc.closed();
}

async function main(): Promise<void> {
  const replyBytes = Number(values['reply-bytes']);
  if (values.responder !== undefined) return respond(values.responder, replyBytes);
  const requests = Number(values.requests);
  const warmup = Number(values.warmup);
  const nats = await startNatsServer({ jetstream: false });
  const child = spawn(process.execPath, [...process.execArgv, __filename, '--responder', nats.url, '--reply-bytes', String(replyBytes)], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  await new Promise<void>((resolve) => child.stdout.once('data', () => resolve()));
  const nc = await connect({ servers: nats.url, noEcho: true });
  const inbox = createInbox();
  let waiting: ((m: Msg) => void) | undefined;
  nc.subscribe(`${inbox}.*`, { callback: (_e, m) => waiting?.(m) });
  const body = new TextEncoder().encode(JSON.stringify(payload(Number(values['request-bytes']))));
  const once = (subject: string, id: number): Promise<Msg> =>
    new Promise((resolve) => {
      waiting = resolve;
      nc.publish(subject, body, { reply: `${inbox}.${id}` });
    });
  try {
    for (const subject of ['floor.echo', 'floor.json']) {
      const times: number[] = [];
      for (let i = 0; i < warmup + requests; i++) {
        const t0 = process.hrtime.bigint();
        await once(subject, i);
        if (i >= warmup) times.push(Number(process.hrtime.bigint() - t0) / 1e6);
      }
      times.sort((a, b) => a - b);
      console.log(
        `${subject}: ${requests} round trips, p50 ${percentile(times, 50).toFixed(3)} ms, p90 ${percentile(times, 90).toFixed(3)} ms, ` +
          `min ${times[0].toFixed(3)} ms`,
      );
    }
  } finally {
    await nc.close();
    child.kill('SIGTERM');
    await nats.stop();
  }
}

void main();
