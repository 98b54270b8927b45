import { createHash } from 'node:crypto';
import type { Exchange } from './exchange';
import { protocolExchanges } from './exchange';
import {
  callOrder,
  familyOf,
  flatten,
  idKind,
  normalise,
  normaliseString,
  parseBody,
  phases,
  Placeholders,
  type AddressBook,
} from './normalise';
import { clientSeeds } from './run';

const book: AddressBook = {
  hosts: new Map([
    ['127.0.70.21', 'P'],
    ['127.0.70.20', 'P.sim'],
    ['127.0.70.23', 'D'],
  ]),
  ports: new Map([
    [41001, 'P.port'],
    [41002, 'P.bootstrapPort'],
  ]),
};

let clock = 0;
function exchange(stage: string, body: unknown, opts: Partial<Exchange> = {}): Exchange {
  const startedAt = opts.startedAt ?? (clock += 10);
  return {
    stage,
    port: 'api',
    method: 'POST',
    path: '/v1/chat/completions',
    headers: {},
    body: typeof body === 'string' ? body : JSON.stringify(body),
    status: 200,
    responseBody: '',
    startedAt,
    endedAt: startedAt + 5,
    ...opts,
  };
}

describe('parseBody', () => {
  it('keeps integers beyond 2^53 exact (SGLang rooms), as marked strings', () => {
    const parsed = parseBody('{"bootstrap_room": 9223372036854775807, "n": [1, 12345678901234567]}') as Record<string, unknown>;
    expect(parsed['bootstrap_room']).toBe('\u0000bigint:9223372036854775807');
    expect((parsed['n'] as unknown[])[1]).toBe('\u0000bigint:12345678901234567');
  });
  it('answers undefined for an empty or non-JSON body', () => {
    expect(parseBody('')).toBeUndefined();
    expect(parseBody('data: {"x":1}')).toBeUndefined();
  });
});

describe('flatten', () => {
  it('names addresses and ports, numbers ids, rooms and long texts in order of first appearance', () => {
    const ph = new Placeholders();
    const out = flatten(
      {
        kv: {
          transfer_id: 'xfer-0f8fad5b-d9cb-469f-a165-70867728950e',
          remote_bootstrap_addr: 'http://127.0.70.21:41002',
          remote_port: 41001,
        },
        again: '0f8fad5b-d9cb-469f-a165-70867728950e',
        room: '\u0000bigint:9223372036854775807',
        bootstrap_room: 42,
        again_room: 42,
        prompt: 'x'.repeat(100),
        same_prompt: 'x'.repeat(100),
        max_tokens: 41001,
      },
      book,
      ph,
      'body',
    );
    expect(out).toEqual({
      'body.kv.transfer_id': 'xfer-<transfer#1>',
      'body.kv.remote_bootstrap_addr': 'http://P.bootstrapPort',
      'body.kv.remote_port': 'P.port',
      'body.again': '<transfer#1>',
      'body.room': '<big#1>',
      'body.bootstrap_room': '<big#2>',
      'body.again_room': '<big#2>',
      'body.prompt': '<text#1>',
      'body.same_prompt': '<text#1>',
      // Only fields named like ports are read as ports.
      'body.max_tokens': 41001,
    });
  });
  it('keeps nulls, empty containers and short lists, and folds long number lists (block ids) into one placeholder', () => {
    const out = flatten({ a: null, b: [], c: {}, d: [1, 2], blocks: [5, 6, 7, 8, 9], copy: [5, 6, 7, 8, 9] }, book, new Placeholders());
    expect(out).toEqual({ a: null, b: [], c: {}, 'd[0]': 1, 'd[1]': 2, blocks: '<list#1>', copy: '<list#1>' });
  });
});

describe('phases and call order', () => {
  it('names stage families', () => {
    expect(familyOf('E0')).toBe('E');
    expect(familyOf('E12')).toBe('E');
    expect(familyOf('P.bootstrap')).toBe('P.bootstrap');
    expect(familyOf('P0.bootstrap')).toBe('P.bootstrap');
  });
  it('makes legs in flight together one phase, whichever left first', () => {
    expect(
      phases([
        { family: 'E', startedAt: 0, endedAt: 10 },
        { family: 'E', startedAt: 1, endedAt: 5 },
        { family: 'P', startedAt: 20, endedAt: 30 },
        { family: 'D', startedAt: 31, endedAt: 40 },
      ]),
    ).toEqual(['E', 'P', 'D']);
    expect(
      phases([
        { family: 'D', startedAt: 0, endedAt: 10 },
        { family: 'P', startedAt: 2, endedAt: 5 },
      ]),
    ).toEqual(['D+P']);
  });
  it('orders concurrent legs of one family by what they carry, not by which left first', () => {
    const small = exchange('E0', { items: [1] }, { startedAt: 100, endedAt: 120 });
    const large = exchange('E1', { items: [1, 2, 3] }, { startedAt: 101, endedAt: 110 });
    const later = exchange('P', { x: 1 }, { startedAt: 130, endedAt: 140 });
    expect(callOrder([later, small, large]).map((x) => x.stage)).toEqual(['E1', 'E0', 'P']);
  });
});

describe('normalise', () => {
  it('numbers legs per family, keeps protocol headers only, and records answers and overlap', () => {
    const id = '6a1b2c3d-1111-4222-8333-944455556666';
    const p = exchange(
      'P',
      { kv_transfer_params: { do_remote_decode: true, transfer_id: `xfer-${id}` }, messages: [{ role: 'user', content: 'hi' }] },
      {
        headers: { 'x-request-id': id, 'x-data-parallel-rank': '0', 'user-agent': 'python-httpx', traceparent: '00-abc-def-01' },
        responseBody: '{"choices":[],"kv_transfer_params":{"remote_host":"127.0.70.20","remote_port":41001}}',
        startedAt: 0,
        endedAt: 50,
      },
    );
    const d = exchange(
      'D',
      { kv_transfer_params: { transfer_id: `xfer-${id}` } },
      { headers: { 'x-request-id': id }, startedAt: 10, endedAt: 60 },
    );
    const trace = normalise([d, p], book);
    expect(trace.order).toEqual(['D+P']);
    expect(trace.overlaps).toEqual(['D#1~P#1']);
    const [legP, legD] = trace.legs;
    expect(legP).toMatchObject({
      id: 'P#1',
      stage: 'P',
      target: 'P',
      headers: { 'x-request-id': '<request#1>', 'x-data-parallel-rank': '0', traceparent: '<present>' },
      answer: { 'kv_transfer_params.remote_host': 'P.sim', 'kv_transfer_params.remote_port': 'P.port' },
    });
    // The transfer id is built from the request id: the same name shows it.
    expect(legP.fields['body.kv_transfer_params.transfer_id']).toBe('xfer-<request#1>');
    expect(legD.fields['body.kv_transfer_params.transfer_id']).toBe('xfer-<request#1>');
    expect(legP.headers['user-agent']).toBeUndefined();
  });
  it('does not call sequential legs overlapping, and names a bootstrap-port exchange apart', () => {
    const query = exchange('P', '', { port: 'bootstrap', method: 'GET', path: '/query', startedAt: 0, endedAt: 1 });
    const p = exchange('P', { a: 1 }, { startedAt: 5, endedAt: 9 });
    const d = exchange('D', { a: 1 }, { startedAt: 10, endedAt: 20 });
    const trace = normalise([query, p, d], book);
    expect(trace.legs.map((l) => l.id)).toEqual(['P.bootstrap#1', 'P#1', 'D#1']);
    expect(trace.order).toEqual(['P.bootstrap', 'P', 'D']);
    expect(trace.overlaps).toEqual([]);
  });
  it("names Triad's KV release leg apart, so a retry's decode keeps its ordinal", () => {
    const d1 = exchange('D', { a: 1 }, { headers: { 'x-request-id': 'r1' }, status: 500, startedAt: 0, endedAt: 2 });
    const release = exchange('D', { a: 1 }, { headers: { 'x-request-id': 'r1-kv-release' }, startedAt: 3, endedAt: 6 });
    const p2 = exchange('P', { a: 1 }, { headers: { 'x-request-id': 'r1' }, startedAt: 4, endedAt: 8 });
    const d2 = exchange('D', { a: 1 }, { headers: { 'x-request-id': 'r1' }, startedAt: 9, endedAt: 12 });
    const trace = normalise([d1, release, p2, d2], book);
    expect(trace.legs.map((l) => l.id)).toEqual(['D#1', 'D.release#1', 'P#1', 'D#2']);
    expect(trace.order).toEqual(['D', 'D.release+P', 'D']);
    expect(trace.overlaps).toEqual(['D.release#1~P#1']);
  });
  it('keeps a body that is not JSON as one text placeholder', () => {
    const trace = normalise([exchange('P', 'not json')], book);
    expect(trace.legs[0].fields).toEqual({ body: '<text#1>' });
  });
});

describe('protocolExchanges', () => {
  it("drops probes, the simulator waits and SGLang decodes reading /route, and keeps a router's /query", () => {
    const kept = protocolExchanges([
      exchange('P', '', { method: 'GET', path: '/health' }),
      exchange('P', '', { port: 'bootstrap', method: 'GET', path: '/sim/rooms/1' }),
      exchange('P', '', { port: 'bootstrap', method: 'GET', path: '/route' }),
      exchange('P', '', { port: 'bootstrap', method: 'GET', path: '/query' }),
      exchange('D', { a: 1 }),
    ]);
    expect(kept.map((x) => x.path)).toEqual(['/query', '/v1/chat/completions']);
  });
});

describe('names that do not depend on which router sent what first', () => {
  it('numbers ids per kind from the field name, so an id only one router sends shifts no other name', () => {
    const ph = new Placeholders();
    const out = flatten(
      {
        ec_items: [{ transfer_id: 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa' }],
        kv: { remote_engine_id: '11111111-2222-4333-8444-555555555555', remote_request_id: '99999999-2222-4333-8444-555555555555' },
      },
      book,
      ph,
    );
    expect(out).toEqual({
      'ec_items[0].transfer_id': '<transfer#1>',
      'kv.remote_engine_id': '<engine#1>',
      'kv.remote_request_id': '<request#1>',
    });
    expect(idKind('x-request-id')).toBe('request');
    expect(idKind('body.something')).toBe('id');
  });

  it("names the client's media by position (URL and its SHA-256 uuid, also as a key) and its prompts", () => {
    const url = 'https://example.com/a.png';
    const seeds = clientSeeds({
      model: 'm',
      messages: [
        {
          role: 'user',
          content: [
            { type: 'text', text: 'describe' },
            { type: 'image_url', image_url: { url } },
          ],
        },
      ],
    });
    const uuid = createHash('sha256').update(url).digest('hex');
    expect(seeds.get(url)).toBe('<media#1>.url');
    expect(seeds.get(uuid)).toBe('<media#1>');
    expect(seeds.get('describe')).toBe('<prompt#1>');
    const out = flatten({ ec_transfer_params: { [uuid]: { peer_host: '127.0.70.20' } }, uuid, url }, book, new Placeholders(seeds));
    expect(out).toEqual({ 'ec_transfer_params.<media#1>.peer_host': 'P.sim', uuid: '<media#1>', url: '<media#1>.url' });
  });

  it('replaces the random short suffix of an encoder request id', () => {
    const ph = new Placeholders();
    expect(normaliseString('6a1b2c3d-1111-4222-8333-944455556666:2:0f3a9c', book, ph, 'request')).toBe('<request#1>:2:<hex>');
  });
});
