import { ModelServerSchema, PodSchema, type ModelServer, type Pod } from '@triad/crd';
import { modelServer, pod } from '../../test/support/objects';
import { EndpointTable } from './endpoint-table';
import { placePods } from './placement';

const ms = (...args: Parameters<typeof modelServer>): ModelServer => ModelServerSchema.parse(modelServer(...args));
const p = (...args: Parameters<typeof pod>): Pod => PodSchema.parse(pod(...args));

describe('placing pods of a ModelServer', () => {
  it('classifies Ready matching pods with role, group, role port and SGLang bootstrap port', () => {
    const server = ms('qwen', { engine: 'SGLang', mode: 'pd', ports: { prefillPort: 30001 }, bootstrapPort: 9000 });
    const placed = placePods(server, [
      p('p0', { app: 'qwen', group: 'g1', role: 'prefill' }, { ip: '10.0.0.1' }),
      p('p1', { app: 'qwen', group: 'g1', role: 'prefill' }, { ip: '10.0.0.2', annotations: { 'triad.io/bootstrap-port': '8999' } }),
      p('d0', { app: 'qwen', group: 'g1', role: 'decode' }, { ip: '10.0.0.3' }),
      p('x0', { app: 'qwen', role: 'decode' }, { ip: '10.0.0.4' }),
      p('u0', { app: 'qwen', group: 'g1', role: 'decode' }, { ip: '10.0.0.5', ready: false }),
      p('o0', { app: 'other', group: 'g1', role: 'decode' }, { ip: '10.0.0.6' }),
      p('n0', { app: 'qwen', group: 'g1', role: 'decode' }, { ip: '10.0.0.7', namespace: 'elsewhere' }),
    ]);
    expect(placed.map((x) => [x.pod, x.role, x.group, x.ip, x.port, x.bootstrapPort])).toEqual([
      ['p0', 'prefill', 'g1', '10.0.0.1', 30001, 9000],
      ['p1', 'prefill', 'g1', '10.0.0.2', 30001, 8999],
      ['d0', 'decode', 'g1', '10.0.0.3', 8000, undefined],
    ]);
    expect(placed[0]).toMatchObject({ key: 'default.qwen.p0', engine: 'SGLang', mode: 'pd', namespace: 'default', modelServer: 'qwen' });
  });
});

describe('vLLM Mooncake prefills: the bootstrap port', () => {
  // A pod's annotation wins over the ModelServer's field: prefill pods on hostNetwork share their node's address, so
  // only a per-pod value can tell two of them apart (docs/protocols/vllm.md, Bootstrap port).
  it('reads triad.io/bootstrap-port, then sglang.ai/bootstrap-port, then ModelServer.bootstrapPort, then 8998', () => {
    const labels = { app: 'qwen', group: 'g1', role: 'prefill' };
    const pods = [
      p('a', labels, { ip: '10.0.0.1', annotations: { 'triad.io/bootstrap-port': '9100', 'sglang.ai/bootstrap-port': '9101' } }),
      p('b', labels, { ip: '10.0.0.2', annotations: { 'sglang.ai/bootstrap-port': '9201' } }),
      p('c', labels, { ip: '10.0.0.3' }),
      p('d', { app: 'qwen', group: 'g1', role: 'decode' }, { ip: '10.0.0.4', annotations: { 'triad.io/bootstrap-port': '9400' } }),
    ];
    const withField = ms('qwen', { mode: 'pd', kvConnector: { type: 'mooncake' }, bootstrapPort: 9000 });
    expect(placePods(withField, pods).map((x) => [x.pod, x.bootstrapPort, x.bootstrapPortSource])).toEqual([
      ['a', 9100, 'annotation:triad.io'],
      ['b', 9201, 'annotation:sglang.ai'],
      ['c', 9000, 'model-server'],
      ['d', undefined, undefined],
    ]);
    const withoutField = ms('qwen', { mode: 'pd', kvConnector: { type: 'mooncake' } });
    expect(placePods(withoutField, pods.slice(2, 3)).map((x) => [x.pod, x.bootstrapPort, x.bootstrapPortSource])).toEqual([
      ['c', 8998, 'default'],
    ]);
    // Only a Mooncake ModelServer's prefills have a bootstrap server.
    const nixl = ms('qwen', { mode: 'pd', kvConnector: { type: 'nixl' }, bootstrapPort: 9000 });
    expect(placePods(nixl, pods).map((x) => x.bootstrapPort)).toEqual([undefined, undefined, undefined, undefined]);
  });
});

describe('SGLang side ports of placements', () => {
  it('reads sglang.ai/bootstrap-port (single or aligned with smg.ai/worker-ports) after triad.io, and reports ignored values', () => {
    const server = ms('qwen', { engine: 'SGLang', mode: 'pd', ports: { prefillPort: 30001 } });
    const labels = { app: 'qwen', group: 'g1', role: 'prefill' };
    const placed = placePods(server, [
      p('a', { app: 'qwen', group: 'g1', role: 'prefill' }, { ip: '10.0.0.1', annotations: { 'sglang.ai/bootstrap-port': '9101' } }),
      p('b', labels, { ip: '10.0.0.2', annotations: { 'smg.ai/worker-ports': '30000,30001', 'sglang.ai/bootstrap-port': '9200,9201' } }),
      p('c', labels, { ip: '10.0.0.3', annotations: { 'triad.io/bootstrap-port': '9300', 'sglang.ai/bootstrap-port': '9301' } }),
      p('d', { app: 'qwen', group: 'g1', role: 'prefill' }, { ip: '10.0.0.4', annotations: { 'sglang.ai/bootstrap-port': '9400,9401' } }),
    ]);
    expect(placed.map((x) => [x.pod, x.bootstrapPort, x.bootstrapPortSource])).toEqual([
      ['a', 9101, 'annotation:sglang.ai'],
      ['b', 9201, 'annotation:sglang.ai'],
      ['c', 9300, 'annotation:triad.io'],
      ['d', 8998, 'default'],
    ]);
    expect(placed[3]?.problems).toEqual([expect.stringContaining('does not align')]);
  });

  it('marks language-only servers as registry owners (prefills in EPD, the PD servers in E→PD) with the registry port annotation', () => {
    const epd = ms('vl', { engine: 'SGLang', mode: 'epd' });
    // E→PD: no prefill labels, the decode-labelled pods prefill themselves.
    const base = modelServer('vl2', { engine: 'SGLang', mode: 'epd', matchLabels: { app: 'vl' } });
    const pdGroup = { groupKey: 'group', encodeLabels: { role: 'encode' }, decodeLabels: { role: 'decode' } };
    const ePd = ModelServerSchema.parse({ ...base, spec: { ...base.spec, workloadSelector: { matchLabels: { app: 'vl' }, pdGroup } } });
    const pods = [
      p('pre', { app: 'vl', group: 'g', role: 'prefill' }, { ip: '10.0.1.1', annotations: { 'triad.io/encoder-bootstrap-port': '7000' } }),
      p('dec', { app: 'vl', group: 'g', role: 'decode' }, { ip: '10.0.1.2' }),
      p('enc', { app: 'vl', group: 'g', role: 'encode' }, { ip: '10.0.1.3' }),
    ];
    const owners = placePods(epd, pods).map((x) => [x.pod, x.registryOwner ?? false, x.encoderBootstrapPort]);
    expect(owners).toEqual([
      ['pre', true, 7000],
      ['dec', false, undefined],
      ['enc', false, undefined],
    ]);
    expect(
      placePods(ePd, pods)
        .filter((x) => x.registryOwner)
        .map((x) => x.pod),
    ).toEqual(['dec']);
  });
});

describe('vLLM EPD consumer annotations of placements', () => {
  it('publishes DP size everywhere and EC control addresses on consumers only (prefill; the PD servers of E→PD)', () => {
    const epd = ms('vl', { engine: 'vLLM', mode: 'epd' });
    const annotations = { 'triad.io/dp-size': '2', 'triad.io/ec-control-port': '14579' };
    const pods = [
      p('pre', { app: 'vl', group: 'g', role: 'prefill' }, { ip: '10.0.1.1', annotations }),
      p('dec', { app: 'vl', group: 'g', role: 'decode' }, { ip: '10.0.1.2', annotations }),
      p('enc', { app: 'vl', group: 'g', role: 'encode' }, { ip: '10.0.1.3' }),
      p(
        'lst',
        { app: 'vl', group: 'g', role: 'prefill' },
        {
          ip: '10.0.1.4',
          annotations: { 'triad.io/ec-control-addresses': 'tcp://10.0.9.9:15000, 10.0.9.9:15002' },
        },
      ),
    ];
    const placed = placePods(epd, pods).map((x) => [x.pod, x.dpSize, x.ecControlAddresses]);
    expect(placed).toEqual([
      ['pre', 2, ['tcp://10.0.1.1:14579', 'tcp://10.0.1.1:14580']],
      ['dec', 2, undefined],
      ['enc', undefined, undefined],
      ['lst', 2, ['tcp://10.0.9.9:15000', 'tcp://10.0.9.9:15002']],
    ]);
    const base = modelServer('vl2', { engine: 'vLLM', mode: 'epd', matchLabels: { app: 'vl' } });
    const pdGroup = { groupKey: 'group', encodeLabels: { role: 'encode' }, decodeLabels: { role: 'decode' } };
    const ePd = ModelServerSchema.parse({ ...base, spec: { ...base.spec, workloadSelector: { matchLabels: { app: 'vl' }, pdGroup } } });
    expect(
      placePods(ePd, pods)
        .filter((x) => x.ecControlAddresses)
        .map((x) => x.pod),
    ).toEqual(['dec']);
  });

  it("gives a Mooncake EC consumer without annotations vLLM's default control port on its pod IP, one port per DP rank", () => {
    const base = ms('vl', { engine: 'vLLM', mode: 'epd' });
    const mooncake = ModelServerSchema.parse({ ...base, spec: { ...base.spec, ecConnector: { type: 'mooncake' } } });
    const labels = (role: string) => ({ app: 'vl', group: 'g', role });
    const placed = placePods(mooncake, [
      p('one', labels('prefill'), { ip: '10.0.1.1' }),
      p('two', labels('prefill'), { ip: '10.0.1.2', annotations: { 'triad.io/dp-size': '2' } }),
      p('set', labels('prefill'), { ip: '10.0.1.3', annotations: { 'triad.io/ec-control-port': '15000' } }),
      p('dec', labels('decode'), { ip: '10.0.1.4' }),
    ]).map((x) => [x.pod, x.ecControlAddresses]);
    expect(placed).toEqual([
      ['one', ['tcp://10.0.1.1:14579']],
      ['two', ['tcp://10.0.1.2:14579', 'tcp://10.0.1.2:14580']],
      ['set', ['tcp://10.0.1.3:15000']],
      ['dec', undefined],
    ]);
  });

  it('ignores malformed or misaligned values with the reason, keeping what is valid', () => {
    const epd = ms('vl', { engine: 'vLLM', mode: 'epd' });
    const labels = { app: 'vl', group: 'g', role: 'prefill' };
    const placed = placePods(epd, [
      p('a', labels, { ip: '10.0.1.1', annotations: { 'triad.io/dp-size': 'two', 'triad.io/ec-control-port': '14579' } }),
      p('b', labels, { ip: '10.0.1.2', annotations: { 'triad.io/dp-size': '3', 'triad.io/ec-control-addresses': 'tcp://h:1,tcp://h:2' } }),
      p('c', labels, { ip: '10.0.1.3', annotations: { 'triad.io/ec-control-port': '99999' } }),
    ]);
    expect(placed.map((x) => [x.pod, x.dpSize, x.ecControlAddresses])).toEqual([
      ['a', undefined, ['tcp://10.0.1.1:14579']],
      ['b', 3, undefined],
      ['c', undefined, undefined],
    ]);
    expect(placed.map((x) => x.problems)).toEqual([
      [expect.stringContaining("triad.io/dp-size annotation 'two'")],
      [expect.stringContaining('lists 2 address(es) for 3 DP rank(s)')],
      [expect.stringContaining("triad.io/ec-control-port annotation '99999' is not a port")],
    ]);
  });
});

describe('endpoint table', () => {
  const labels = (role: string) => ({ app: 'qwen', group: 'g1', role });

  it('reports a relabelled pod as changed (prefill → decode), never keeping the old role', () => {
    const t = new EndpointTable();
    const server = ms('qwen');
    t.recompute('default', [server], [p('a', labels('prefill'))]);
    const diff = t.recompute('default', [server], [p('a', labels('decode'))]);
    expect(diff.upserted.map((x) => [x.pod, x.role])).toEqual([['a', 'decode']]);
    expect(diff.removed).toEqual([]);
    expect(t.all().map((x) => x.role)).toEqual(['decode']);
  });

  it('removes pods that become unready, leave the selector, or whose ModelServer is gone', () => {
    const t = new EndpointTable();
    const server = ms('qwen');
    t.recompute('default', [server], [p('a', labels('prefill')), p('b', labels('decode')), p('c', labels('decode'))]);
    const diff = t.recompute(
      'default',
      [server],
      [p('a', labels('prefill'), { ready: false }), p('b', { ...labels('decode'), app: 'other' }), p('c', labels('decode'))],
    );
    expect(diff.removed.map((x) => x.pod).sort()).toEqual(['a', 'b']);
    expect(t.recompute('default', [], [p('c', labels('decode'))]).removed.map((x) => x.pod)).toEqual(['c']);
    expect(t.size).toBe(0);
  });

  it('empties the pool when the selector is edited to match nothing, and follows a pipelineMode change', () => {
    const t = new EndpointTable();
    const pods = [p('a', labels('prefill')), p('b', labels('decode'))];
    t.recompute('default', [ms('qwen')], pods);
    expect(t.recompute('default', [ms('qwen', { matchLabels: { app: 'nobody' } })], pods).removed).toHaveLength(2);
    expect(t.size).toBe(0);
    t.recompute('default', [ms('qwen')], pods);
    const agg = t.recompute('default', [ms('qwen', { mode: 'aggregated' })], pods);
    expect(agg.upserted.map((x) => [x.pod, x.role, x.group])).toEqual([
      ['a', 'aggregated', undefined],
      ['b', 'aggregated', undefined],
    ]);
    expect(t.countByRole()).toEqual({ aggregated: 2 });
  });

  it('places one pod in several ModelServers, and reports nothing when nothing changed', () => {
    const t = new EndpointTable();
    const pods = [p('a', { ...labels('decode'), shared: 'yes' })];
    const servers = [ms('qwen'), ms('other', { mode: 'aggregated', matchLabels: { shared: 'yes' } })];
    expect(t.recompute('default', servers, pods).upserted.map((x) => x.key)).toEqual(['default.qwen.a', 'default.other.a']);
    expect(t.recompute('default', servers, pods)).toEqual({ upserted: [], removed: [] });
    expect(t.ofModelServer('default', 'other').map((x) => x.role)).toEqual(['aggregated']);
  });
});

describe('endpoint table, pod-only reclassification', () => {
  it('reaches the same state as a full recompute over a random sequence of pod changes', () => {
    const servers = [ms('qwen'), ms('agg', { mode: 'aggregated', matchLabels: { shared: 'yes' } })];
    const roles = ['prefill', 'decode', 'other'];
    let seed = 7;
    const rand = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      return seed % n;
    };
    const pods = new Map<string, Pod>();
    const incremental = new EndpointTable();
    incremental.recompute('default', servers, []);
    for (let step = 0; step < 300; step++) {
      const name = `p${rand(12)}`;
      const change = new Map<string, Pod | undefined>();
      if (rand(5) === 0) {
        pods.delete(name);
        change.set(name, undefined);
      } else {
        const labels: Record<string, string> = { app: rand(4) === 0 ? 'x' : 'qwen', role: roles[rand(3)] };
        if (rand(3) > 0) labels['group'] = `g${rand(2)}`;
        if (rand(2) === 0) labels['shared'] = 'yes';
        const next = p(name, labels, { ready: rand(6) > 0, ip: `10.0.0.${rand(20)}` });
        pods.set(name, next);
        change.set(name, next);
      }
      incremental.recomputePods('default', servers, change);
      const full = new EndpointTable();
      full.recompute('default', servers, [...pods.values()]);
      expect(incremental.all().sort((a, b) => a.key.localeCompare(b.key))).toEqual(full.all().sort((a, b) => a.key.localeCompare(b.key)));
    }
  });
});
