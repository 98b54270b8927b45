import { createInTreeRegistry } from '../plugins/in-tree';
import { PrecisePrefixCacheScorer } from '../plugins/precise-prefix-cache/precise-prefix-cache';
import { loadSchedulerConfig } from './load-config';
import { kvHashOptionsOf } from './prefix-hash-options';
import { closestName, editDistance } from './unknown-args';

const registry = createInTreeRegistry();

// A Kthena kvcache-aware config from a newer Kthena release: arguments this Triad does not know must not refuse it.
const kthena = (args: Record<string, unknown>) => `
plugins:
  - name: kv
    type: kvcache-aware
    args: ${JSON.stringify(args)}
profiles:
  default:
    scorers: [{ plugin: kv, weight: 2 }, least-request]
`;

describe('plugin arguments Triad does not know', () => {
  it('are kept and ignored, with a warning naming each; known ones still apply', () => {
    const r = loadSchedulerConfig(
      kthena({ blockSizeToHash: 32, vllmTokenizerPort: 8100, tierWeights: { gpu: 1, cpu: 0.5 }, runtimeContainerName: 'engine' }),
      { registry },
    );
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(r.loaded.warnings).toEqual([
      'plugins[0].args.tierWeights: unknown argument of kvcache-aware, kept and ignored',
      'plugins[0].args.runtimeContainerName: unknown argument of kvcache-aware, kept and ignored',
    ]);
    // The raw config keeps them (what the user wrote), the plugin runs with the ones it knows.
    expect(r.loaded.config.plugins[0]?.args).toMatchObject({ tierWeights: { gpu: 1, cpu: 0.5 }, runtimeContainerName: 'engine' });
    const scorer = r.loaded.plugins.get('kv') as PrecisePrefixCacheScorer;
    expect(scorer.params.blockSize).toBe(32);
    expect(kvHashOptionsOf(r.loaded)).toMatchObject({ blockSize: 32, vllmTokenizerPort: 8100, engineByDefault: true });
  });

  it('a typo of a known argument still refuses the config and names the argument it probably meant', () => {
    const r = loadSchedulerConfig(kthena({ blockSizeToHsh: 32, tierWeights: {} }), { registry });
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.reasons[0]).toBe("plugins[0].args.blockSizeToHsh: unknown argument (did you mean 'blockSizeToHash'?)");
    const nested = loadSchedulerConfig(kthena({ engineTokenization: { timeoutMS: 100 } }), { registry });
    expect(nested.ok ? undefined : nested.reasons[0]).toBe(
      "plugins[0].args.engineTokenization.timeoutMS: unknown argument (did you mean 'timeoutMs'?)",
    );
  });

  it('other argument errors are not affected', () => {
    const r = loadSchedulerConfig(kthena({ blockSizeToHash: -1, someFutureArg: true }), { registry });
    expect(r.ok).toBe(false);
  });

  it('suggests within two edits, one for short names', () => {
    expect(editDistance('vllmTokenizerPort', 'vllmTokeniserPort')).toBe(1);
    expect(closestName('maxBlocksToMach', ['maxBlocksToMatch', 'blockSize'])).toBe('maxBlocksToMatch');
    expect(closestName('tierWeights', ['maxBlocksToMatch', 'blockSize'])).toBeUndefined();
    expect(closestName('bsz', ['bs', 'size'])).toBe('bs');
    expect(closestName('abcd', ['ab'])).toBeUndefined();
  });
});
