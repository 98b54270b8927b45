import type { EngineKind, SimEngineHandle } from '../src/options';
import { CHAT, get, post, SimFleet } from './helpers';

// `apiKey` is the engines' `--api-key`: vLLM checks `/v1` paths, SGLang every path but health and metrics; a request
// without `Authorization: Bearer <key>` gets 401 {"error":"Unauthorized"} from both.

const engines: EngineKind[] = ['vllm', 'sglang'];
const KEY = 'engine-api-key-123';

describe.each(engines)('%s simulator: --api-key', (engine) => {
  const fleet = new SimFleet();
  let sim: SimEngineHandle;
  const chat = { model: 'sim-model', messages: CHAT, max_tokens: 4 };

  beforeAll(async () => {
    sim = await fleet.start({ engine, role: 'both', apiKey: KEY });
  });
  afterAll(() => fleet.closeAll());

  it('refuses a chat request without the key, or with another one, and counts it', async () => {
    const before = sim.counters()['unauthorized'];
    const attempts: Record<string, string>[] = [{}, { authorization: 'Bearer wrong' }, { authorization: KEY }];
    for (const headers of attempts) {
      const res = await post(`${sim.url}/v1/chat/completions`, chat, headers);
      expect(res.status).toBe(401);
      expect(res.json()).toEqual({ error: 'Unauthorized' });
    }
    expect(sim.counters()['unauthorized']).toBe(before + 3);
  });

  it('serves a chat request that carries Bearer <key>', async () => {
    const res = await post(`${sim.url}/v1/chat/completions`, chat, { authorization: `Bearer ${KEY}` });
    expect(res.status).toBe(200);
  });

  it('leaves metrics and health open; SGLang checks its native paths too', async () => {
    expect((await get(`${sim.url}/metrics`)).status).toBe(200);
    expect((await get(`${sim.url}/health`)).status).toBe(200);
    const info = await get(`${sim.url}/${engine === 'vllm' ? 'version' : 'get_model_info'}`);
    expect(info.status).toBe(engine === 'vllm' ? 200 : 401);
  });
});
