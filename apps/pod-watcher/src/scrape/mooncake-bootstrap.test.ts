import { parseBootstrapQuery } from './mooncake-bootstrap';

describe("a Mooncake bootstrap server's /query", () => {
  it('gives the engine id of each DP rank, rank order', () => {
    const body = { '1': { engine_id: 'e1', worker_addr: { '0': { '0': 'tcp://a:1' } } }, '0': { engine_id: 'e0', worker_addr: {} } };
    expect(parseBootstrapQuery(JSON.stringify(body))).toEqual(['e0', 'e1']);
    // Before the workers registered: the server answers, with nothing yet.
    expect(parseBootstrapQuery('{}')).toEqual([]);
    // Ranks register one by one: a gap ends the list.
    expect(parseBootstrapQuery(JSON.stringify({ '0': { engine_id: 'e0' }, '2': { engine_id: 'e2' } }))).toEqual(['e0']);
  });

  it("is not that server's answer otherwise (FastAPI's 404 body, another JSON, not JSON)", () => {
    for (const text of ['{"detail":"Not Found"}', '[]', '{"0":{"id":"x"}}', '<html>', '{"0":{"engine_id":""}}']) {
      expect(parseBootstrapQuery(text)).toBeUndefined();
    }
  });
});
