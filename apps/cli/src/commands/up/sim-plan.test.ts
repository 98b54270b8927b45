import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseStackConfig } from './config';
import { isLoopbackAddress, planSims } from './sim-plan';

const plan = (yaml: string) => {
  const c = parseStackConfig(yaml, 'test.yaml');
  return planSims(c.modelServers, c.modelRoutes, c.pods);
};

const pod = (name: string, ip: string, labels: string, annotations = '{}') => `
---
apiVersion: v1
kind: Pod
metadata: {name: ${name}, namespace: default, labels: ${labels}, annotations: ${annotations}}
status: {phase: Running, podIP: ${ip}, conditions: [{type: Ready, status: "True"}]}`;

describe('isLoopbackAddress', () => {
  it('accepts 127.0.0.0/8 and ::1 only', () => {
    expect(['127.0.0.1', '127.0.1.22', '127.255.255.254', '::1'].every(isLoopbackAddress)).toBe(true);
    expect(['10.0.0.1', '128.0.0.1', '127.0.0.256', '127.1', 'localhost', ''].some(isLoopbackAddress)).toBe(false);
  });
});

describe('planSims', () => {
  it('gives every pod of the demo config the role its ModelServer assigns', () => {
    const text = readFileSync(join(__dirname, '../../../../../infra/local/cluster.yaml'), 'utf8');
    const { sims, notes } = plan(text);
    expect(notes).toEqual([]);
    expect(
      sims.map(
        (s) =>
          `${s.key} ${s.engine} ${s.role} ` +
          `${s.host}:${s.port}${s.bootstrapPort ? ` bootstrap ${s.bootstrapPort}` : ''}${s.usesSharedEc ? ' ec' : ''}` +
          `${s.kvEvents ? ` kv ${s.kvEvents.endpoint} ${s.kvEvents.replayEndpoint}` : ''}`,
      ),
    ).toEqual([
      'default/qwen-vl-encode-0 vllm encode 127.0.1.1:8000 ec',
      'default/qwen-vl-encode-1 vllm encode 127.0.1.2:8000 ec',
      'default/qwen-vl-prefill-0 vllm prefill 127.0.1.11:8000 ec',
      'default/qwen-vl-decode-0 vllm decode 127.0.1.21:8000',
      'default/qwen-vl-decode-1 vllm decode 127.0.1.22:8000',
      'default/llama-prefill-0 sglang prefill 127.0.2.1:8000 bootstrap 8998 kv tcp://*:5557 tcp://*:5558',
      'default/llama-decode-0 sglang decode 127.0.2.2:8000 kv tcp://*:5557 tcp://*:5558',
      'default/qwen-small-0 vllm both 127.0.3.1:8000 kv tcp://*:5557 tcp://*:5558',
      'default/qwen-small-1 vllm both 127.0.3.2:8000 kv tcp://*:5557 tcp://*:5558',
    ]);
    expect(new Set(sims.map((s) => s.model))).toEqual(
      new Set(['Qwen/Qwen2.5-VL-3B-Instruct', 'meta-llama/Llama-3.1-8B-Instruct', 'Qwen/Qwen2.5-0.5B-Instruct']),
    );
  });

  it('gives KV-event sockets to pods annotated with them, except encoders and addresses the sim cannot bind', () => {
    const pod = (name: string, ip: string, role: string, annotations: string) => `
apiVersion: v1
kind: Pod
metadata: {name: ${name}, namespace: default, labels: {app: v, role: ${role}}, annotations: ${annotations}}
status: {phase: Running, podIP: ${ip}, conditions: [{type: Ready, status: "True"}]}`;
    const { sims, notes } = plan(`
apiVersion: networking.serving.volcano.sh/v1alpha1
kind: ModelServer
metadata: {name: v, namespace: default}
spec:
  inferenceEngine: vLLM
  pipelineMode: epd
  workloadPort: {port: 8000}
  workloadSelector:
    matchLabels: {app: v}
    pdGroup: {groupKey: role, encodeLabels: {role: e}, prefillLabels: {role: p}, decodeLabels: {role: d}}
---${pod('e', '127.0.9.1', 'e', '{triad.io/kv-events-endpoint: "5557"}')}
---${pod('p', '127.0.9.2', 'p', '{triad.io/kv-events-endpoint: "tcp://127.0.9.2:5557", triad.io/kv-events-replay-endpoint: "5558"}')}
---${pod('d', '127.0.9.3', 'd', '{triad.io/kv-events-endpoint: "tcp://10.1.1.1:5557"}')}
---${pod('d2', '127.0.9.4', 'd', '{triad.io/kv-events-endpoint: "tcp://*:8000"}')}`);
    expect(Object.fromEntries(sims.map((s) => [s.key, s.kvEvents]))).toEqual({
      'default/e': undefined,
      'default/p': { endpoint: 'tcp://*:5557', replayEndpoint: 'tcp://*:5558' },
      'default/d': undefined,
    });
    expect(notes).toEqual(['pod default/d2 needs 127.0.9.4:8000 for two of its listeners: no engine sim started']);
  });

  it('maps SGLang EPD and E→PD topologies, role ports, bootstrap annotations and LoRA adapters', () => {
    const p2Annotations = '{"sglang.ai/bootstrap-port": "9200", "triad.io/encoder-bootstrap-port": "9300"}';
    const { sims } = plan(`
apiVersion: networking.serving.volcano.sh/v1alpha1
kind: ModelServer
metadata: {name: sgl-epd, namespace: default}
spec:
  inferenceEngine: SGLang
  pipelineMode: epd
  bootstrapPort: 9000
  workloadPort: {port: 30000, encodePort: 30010}
  workloadSelector:
    matchLabels: {app: sgl}
    pdGroup: {groupKey: g, encodeLabels: {role: e}, prefillLabels: {role: p}, decodeLabels: {role: d}}
---
apiVersion: networking.serving.volcano.sh/v1alpha1
kind: ModelServer
metadata: {name: vllm-e-pd, namespace: default}
spec:
  model: vl
  inferenceEngine: vLLM
  pipelineMode: epd
  workloadPort: {port: 8000}
  workloadSelector:
    matchLabels: {app: epd}
    pdGroup: {groupKey: g, encodeLabels: {role: e}, prefillLabels: {}, decodeLabels: {role: pd}}
---
apiVersion: networking.serving.volcano.sh/v1alpha1
kind: ModelRoute
metadata: {name: sgl, namespace: default}
spec: {modelName: sgl-model, loraAdapters: [sql-lora], rules: [{targetModels: [{modelServerName: sgl-epd}]}]}
${pod('sgl-e', '127.0.5.1', '{app: sgl, g: a, role: e}')}
${pod('sgl-p', '127.0.5.2', '{app: sgl, g: a, role: p}', '{"triad.io/bootstrap-port": "9100"}')}
${pod('sgl-d', '127.0.5.3', '{app: sgl, g: a, role: d}')}
${pod('sgl-p2', '127.0.5.4', '{app: sgl, g: a, role: p}', p2Annotations)}
${pod('epd-e', '127.0.6.1', '{app: epd, g: a, role: e}')}
${pod('epd-pd', '127.0.6.2', '{app: epd, g: a, role: pd}')}
`);
    const byKey = Object.fromEntries(sims.map((s) => [s.key.split('/')[1], s]));
    expect(byKey['sgl-e']).toMatchObject({ engine: 'sglang', role: 'encode', port: 30010, model: 'sgl-model', loraAdapters: ['sql-lora'] });
    expect(byKey['sgl-e']?.languageOnly).toBeUndefined();
    expect(byKey['sgl-p']).toMatchObject({ role: 'prefill', port: 30000, bootstrapPort: 9100, languageOnly: true });
    expect(byKey['sgl-p']?.encoderBootstrapPort).toBe(8997);
    expect(byKey['sgl-p2']).toMatchObject({ bootstrapPort: 9200, encoderBootstrapPort: 9300 });
    expect(byKey['sgl-d']).toMatchObject({ role: 'decode', port: 30000 });
    expect(byKey['sgl-d']?.bootstrapPort).toBeUndefined();
    expect(byKey['epd-e']).toMatchObject({ engine: 'vllm', role: 'encode', usesSharedEc: true, model: 'vl' });
    expect(byKey['epd-pd']).toMatchObject({ role: 'both', usesSharedEc: true });
  });

  it('reads the sim-only annotations of vLLM pods: EC connector, mm embeds, DP size, Mooncake control ports', () => {
    const MOONCAKE_PD = '{"sim.triad.io/ec-connector": "mooncake", "sim.triad.io/enable-mm-embeds": "true", "sim.triad.io/dp-size": "2"}';
    const CLASHING_PD = '{"sim.triad.io/ec-connector": "mooncake", "sim.triad.io/ec-control-port": "8000"}';
    const { sims, notes } = plan(`
apiVersion: networking.serving.volcano.sh/v1alpha1
kind: ModelServer
metadata: {name: mc, namespace: default}
spec:
  inferenceEngine: vLLM
  pipelineMode: epd
  workloadPort: {port: 8000}
  workloadSelector:
    matchLabels: {app: mc}
    pdGroup: {groupKey: g, encodeLabels: {role: e}, decodeLabels: {role: pd}}
${pod('mc-e', '127.0.8.1', '{app: mc, g: a, role: e}', '{"sim.triad.io/ec-connector": "mooncake"}')}
${pod('mc-pd', '127.0.8.2', '{app: mc, g: a, role: pd}', MOONCAKE_PD)}
${pod('mc-pd2', '127.0.8.3', '{app: mc, g: a, role: pd}', CLASHING_PD)}
${pod('nixl-pd', '127.0.8.4', '{app: mc, g: a, role: pd}', '{"sim.triad.io/ec-connector": "nixl", "sim.triad.io/dp-size": "zero"}')}
`);
    const byKey = Object.fromEntries(sims.map((s) => [s.key.split('/')[1], s]));
    expect(byKey['mc-e']).toMatchObject({ role: 'encode', ecConnector: 'mooncake', usesSharedEc: false });
    expect(byKey['mc-e']?.ecControlPort).toBeUndefined();
    expect(byKey['mc-pd']).toMatchObject({ role: 'both', ecConnector: 'mooncake', enableMmEmbeds: true, dataParallel: 2 });
    expect(byKey['mc-pd']?.ecControlPort).toBe(14579);
    expect(byKey['nixl-pd']).toMatchObject({ ecConnector: 'nixl', usesSharedEc: false });
    expect(byKey['nixl-pd']?.dataParallel).toBeUndefined();
    // The control port would take the workload port's address.
    expect(byKey['mc-pd2']).toBeUndefined();
    expect(notes).toEqual([
      expect.stringMatching(/^pod default\/mc-pd is a Mooncake EC consumer without triad.io\/ec-control-port: its sim listens on 14579/),
      'pod default/mc-pd2 needs 127.0.8.3:8000 for two of its listeners: no engine sim started',
    ]);
  });

  it("runs vLLM P/D sims with the KV connector the ModelServer names (or the pod's sim annotation)", () => {
    const server = (name: string, kv: string) => `
apiVersion: networking.serving.volcano.sh/v1alpha1
kind: ModelServer
metadata: {name: ${name}, namespace: default}
spec:
  inferenceEngine: vLLM
  workloadPort: {port: 8000}
  kvConnector: ${kv}
  workloadSelector:
    matchLabels: {app: ${name}}
    pdGroup: {groupKey: g, prefillLabels: {role: p}, decodeLabels: {role: d}}
---`;
    const { sims } = plan(`${server('up', '{type: mooncake}')}
${server('asc', '{type: mooncake, implementation: vllm-ascend}')}
${server('push', '{type: nixl, transferMode: push}')}
${server('lmc', '{type: lmcache}')}
${pod('up-p', '127.0.9.1', '{app: up, g: a, role: p}', '{"triad.io/bootstrap-port": "9001"}')}
${pod('up-d', '127.0.9.2', '{app: up, g: a, role: d}')}
${pod('up-p2', '127.0.9.3', '{app: up, g: a, role: p}', '{"sim.triad.io/kv-connector": "mooncake-ascend"}')}
${pod('asc-p', '127.0.9.4', '{app: asc, g: a, role: p}')}
${pod('push-p', '127.0.9.5', '{app: push, g: a, role: p}')}
${pod('lmc-d', '127.0.9.6', '{app: lmc, g: a, role: d}')}
`);
    const byKey = Object.fromEntries(sims.map((s) => [s.key.split('/')[1], s]));
    expect(byKey['up-p']).toMatchObject({ kvConnector: 'mooncake', bootstrapPort: 9001 });
    expect(byKey['up-d']).toMatchObject({ kvConnector: 'mooncake' });
    expect(byKey['up-d']?.bootstrapPort).toBeUndefined();
    expect(byKey['up-p2']).toMatchObject({ kvConnector: 'mooncake-ascend' });
    expect(byKey['up-p2']?.bootstrapPort).toBeUndefined();
    expect(byKey['asc-p']).toMatchObject({ kvConnector: 'mooncake-ascend' });
    expect(byKey['push-p']).toMatchObject({ kvConnector: 'nixl-push' });
    expect(byKey['lmc-d']).toMatchObject({ kvConnector: 'lmcache', lmcacheStore: 'default/lmc' });
  });

  it('runs vLLM sims as the real configuration says: ModelServer ecConnector and the triad.io EC annotations', () => {
    const { sims, notes } = plan(`
apiVersion: networking.serving.volcano.sh/v1alpha1
kind: ModelServer
metadata: {name: mc, namespace: default}
spec:
  inferenceEngine: vLLM
  pipelineMode: epd
  workloadPort: {port: 8000}
  ecConnector: {type: mooncake, enableMmEmbeds: true}
  workloadSelector:
    matchLabels: {app: mc}
    pdGroup: {groupKey: g, encodeLabels: {role: e}, prefillLabels: {role: p}, decodeLabels: {role: d}}
${pod('mc-e', '127.0.9.1', '{app: mc, g: a, role: e}')}
${pod('mc-p', '127.0.9.2', '{app: mc, g: a, role: p}', '{"triad.io/dp-size": "2", "triad.io/ec-control-port": "15000"}')}
${pod('mc-p2', '127.0.9.3', '{app: mc, g: a, role: p}', '{"triad.io/ec-control-addresses": "127.0.9.3:15100,tcp://127.0.9.3:15101"}')}
${pod('mc-d', '127.0.9.4', '{app: mc, g: a, role: d}', '{"sim.triad.io/enable-mm-embeds": "false"}')}
`);
    const byKey = Object.fromEntries(sims.map((s) => [s.key.split('/')[1], s]));
    expect(byKey['mc-e']).toMatchObject({ role: 'encode', ecConnector: 'mooncake', enableMmEmbeds: true, usesSharedEc: false });
    expect(byKey['mc-p']).toMatchObject({
      role: 'prefill',
      ecConnector: 'mooncake',
      enableMmEmbeds: true,
      dataParallel: 2,
      ecControlPort: 15000,
    });
    expect(byKey['mc-p2']).toMatchObject({ role: 'prefill', dataParallel: 2, ecControlPort: 15100 });
    expect(byKey['mc-d']).toMatchObject({ role: 'decode', ecConnector: 'mooncake' });
    expect(byKey['mc-d']?.enableMmEmbeds).toBeUndefined();
    expect(byKey['mc-d']?.ecControlPort).toBeUndefined();
    expect(notes).toEqual([]);
  });

  it('leaves pods off loopback, unselected pods and address clashes alone, with a note for each', () => {
    const { sims, notes } = plan(`
apiVersion: networking.serving.volcano.sh/v1alpha1
kind: ModelServer
metadata: {name: agg, namespace: default}
spec: {inferenceEngine: vLLM, workloadPort: {port: 8000}, workloadSelector: {matchLabels: {app: agg}}}
${pod('remote', '10.1.2.3', '{app: agg}')}
${pod('stray', '127.0.7.1', '{app: other}')}
${pod('first', '127.0.7.2', '{app: agg}')}
${pod('twin', '127.0.7.2', '{app: agg}')}
`);
    expect(sims.map((s) => s.key)).toEqual(['default/first']);
    expect(notes).toEqual([
      'pod default/remote has IP 10.1.2.3, which is not a loopback address: no sim started; Triad will route to 10.1.2.3 as a real engine',
      'pod default/stray (127.0.7.1) is selected by no ModelServer: no engine sim started',
      'pod default/twin needs 127.0.7.2:8000, which pod default/first already uses: no engine sim started',
    ]);
  });
});
