import { z } from 'zod';
import { startNatsServer, type NatsServerHandle } from '@triad/testing';
import { connectBus, type Bus } from './bus';

const ValueSchema = z.object({ writer: z.string(), round: z.number() });

describe('opening a KV bucket that another client creates at the same moment', () => {
  let server: NatsServerHandle;
  const buses: Bus[] = [];
  beforeAll(async () => {
    server = await startNatsServer();
    for (const name of ['open-a', 'open-b']) buses.push(await connectBus({ servers: server.url, name }));
  });
  afterAll(async () => {
    await Promise.all(buses.map((b) => b.close()));
    await server?.close();
  });

  /**
   * Both buses open `bucket(round)` together and at once write a key and read it back. A failure is an open, put or
   * get that rejected, a read that did not return the value written, or a put or get that needed a retry (its first
   * try reached no responders or was dropped): the bucket was handed over before it served.
   */
  async function race(rounds: number, bucket: (round: number) => string, options: (i: number) => { history?: number }): Promise<string[]> {
    const failures: string[] = [];
    for (let round = 0; round < rounds; round++) {
      const outcomes = await Promise.allSettled(
        buses.map(async (bus, i) => {
          const kv = await bus.kv(bucket(round), ValueSchema, options(i));
          const retriesBefore = bus.jetStreamRetries;
          const value = { writer: `w${i}`, round };
          await kv.put(`key.${i}`, value);
          const read = await kv.get(`key.${i}`);
          if (JSON.stringify(read) !== JSON.stringify(value)) throw new Error(`read ${JSON.stringify(read)}`);
          const retried = bus.jetStreamRetries - retriesBefore;
          if (retried > 0) throw new Error(`the first put and get needed ${retried} retries`);
        }),
      );
      outcomes.forEach((o, i) => {
        if (o.status === 'rejected') failures.push(`round ${round}, bus ${i}: ${(o.reason as Error).message}`);
      });
    }
    return failures;
  }

  it('serves the first put and get of both clients, every time', async () => {
    // nats-server 2.9 shows a stream being created to a second creator before the stream serves its subjects.
    expect(
      await race(
        150,
        (round) => `triad_test_bus_open_${round}`,
        () => ({}),
      ),
    ).toEqual([]);
  }, 120_000);

  it('opens a bucket whose concurrent creates asked for different options (the second create collides)', async () => {
    expect(
      await race(
        30,
        (round) => `triad_test_bus_open_history_${round}`,
        (i) => ({ history: i + 1 }),
      ),
    ).toEqual([]);
  }, 60_000);
});
