// Instructions per EPD request of the dispatch feed, counted by valgrind's callgrind (the figure a loaded, shared
// machine does not move): `--side publish`, the gateway's DispatchPublisher from the six leg events (encode, prefill
// and decode, each started and finished) to the message bytes; `--side read`, a scheduler replica's reading of those
// messages (JSON.parse, `readDispatchBatch`) and applying them to an InflightTracker. `--wire events` or `packed`
// (TRIAD_DISPATCH_WIRE). The events of 5 requests share each message, interleaved stage by stage, about as at 32
// connections. Counting is off through start-up and warm-up; the main thread's count over the requests.
// Run: npx tsx apps/gateway/test/dispatch-instructions.bench.ts [--wire packed|events] [--side publish|read]
import { randomUUID } from 'node:crypto';
import type { NatsConnection } from '@nats-io/transport-node';
import { DispatchBatchSchema, decodeMessage, readDispatchBatch } from '@triad/bus';
import { InflightTracker } from '@triad/scheduling';
import { callgrindControl, countSelfUnderCallgrind } from '@triad/testing';
import { DispatchPublisher, type DispatchWire } from '../src/dispatch/dispatch-publisher';
import { TurnFlusher } from '../src/nats/turn-flusher';

const REQUESTS_PER_MESSAGE = 5;
const WARMUP_MESSAGES = 4000;
const MEASURED_MESSAGES = 400;

/** Under callgrind: warms publisher and reader up, then counts one side over the measured messages. */
async function child(wire: DispatchWire, side: string): Promise<void> {
  const sent: Uint8Array[] = [];
  // Where the publisher's messages go: kept for the reading side (no NATS connection: its writes are not counted here).
  const sink = { publish: (_subject: string, data: Uint8Array) => sent.push(data), isClosed: () => false } as unknown as NatsConnection;
  const local = new InflightTracker();
  const publisher = new DispatchPublisher(sink, `gateway-${process.pid}`, { snapshotIntervalMs: 1000, wire }, new TurnFlusher(), (e) =>
    local.applyEvent('self', e),
  );
  // Endpoint keys as the gateway holds them: flat strings parsed from a message.
  const [encoder, prefill, decode] = JSON.parse(
    JSON.stringify(['default.epd.epd-e-0', 'default.epd.epd-p-0', 'default.epd.epd-d-0']),
  ) as string[];
  const message = (): void => {
    const ids = Array.from({ length: REQUESTS_PER_MESSAGE }, () => randomUUID());
    for (const id of ids) publisher.started(id, encoder, 'encode', undefined);
    for (const id of ids) publisher.finished(id, encoder, 'encode', true, undefined);
    for (const id of ids) publisher.started(id, prefill, 'prefill', 19);
    for (const id of ids) publisher.finished(id, prefill, 'prefill', true, undefined, { ttftMs: 2.34 });
    for (const id of ids) publisher.started(id, decode, 'decode', 19);
    for (const id of ids) publisher.finished(id, decode, 'decode', true, 16, { ttftMs: 3.3, tpotMs: 0.123 });
    publisher.flush();
  };
  const tracker = new InflightTracker();
  const read = (data: Uint8Array): void => {
    const batch = decodeMessage(DispatchBatchSchema, data, readDispatchBatch);
    if (!batch.ok) throw new Error(batch.error);
    tracker.applyBatch(batch.value, Date.now());
  };
  for (let i = 0; i < WARMUP_MESSAGES; i++) {
    message();
    read(sent.pop()!);
  }
  let bytes = 0;
  if (side === 'publish') {
    await callgrindControl(['--instr=on', String(process.pid)]);
    for (let i = 0; i < MEASURED_MESSAGES; i++) message();
    await callgrindControl(['--dump', String(process.pid)]);
    for (const data of sent) bytes += data.length;
  } else {
    for (let i = 0; i < MEASURED_MESSAGES; i++) message();
    const messages = sent.splice(0);
    for (const data of messages) bytes += data.length;
    await callgrindControl(['--instr=on', String(process.pid)]);
    for (const data of messages) read(data);
    await callgrindControl(['--dump', String(process.pid)]);
  }
  process.stdout.write(`${bytes}\n`);
}

function main(): void {
  const option = (name: string, fallback: string): string => {
    const at = process.argv.indexOf(`--${name}`);
    return at > 0 ? (process.argv[at + 1] ?? fallback) : fallback;
  };
  const wire = option('wire', 'packed') as DispatchWire;
  const side = option('side', 'publish');
  if (process.argv.includes('--child')) {
    void child(wire, side);
    return;
  }
  const { instructions, stdout } = countSelfUnderCallgrind(__filename, ['--wire', wire, '--side', side]);
  const requests = REQUESTS_PER_MESSAGE * MEASURED_MESSAGES;
  process.stdout.write(
    `dispatch ${side}, ${wire}: ${Math.round(instructions / requests)} instructions per EPD request (main thread; ${requests} requests, ` +
      `${Math.round(Number(stdout.trim()) / requests)} bytes each)\n`,
  );
}

main();
