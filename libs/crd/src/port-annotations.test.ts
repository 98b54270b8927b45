import { annotatedPortFor, parsePortList, staticBootstrapPort } from './port-annotations';

describe('port annotations (as SMG reads sglang.ai/bootstrap-port)', () => {
  it('parses comma lists strictly', () => {
    expect(parsePortList(' 8998, 9000 ')).toEqual([8998, 9000]);
    expect(parsePortList('8998,')).toBeUndefined();
    expect(parsePortList('0')).toBeUndefined();
    expect(parsePortList('70000')).toBeUndefined();
  });

  it('applies a single value to every worker and aligns a list with smg.ai/worker-ports', () => {
    expect(annotatedPortFor({ 'sglang.ai/bootstrap-port': '9100' }, 'sglang.ai/bootstrap-port', 30000)).toEqual({ port: 9100 });
    const aligned = { 'smg.ai/worker-ports': '30000,30001', 'sglang.ai/bootstrap-port': '9100,9101' };
    expect(annotatedPortFor(aligned, 'sglang.ai/bootstrap-port', 30001)).toEqual({ port: 9101 });
    expect(annotatedPortFor(aligned, 'sglang.ai/bootstrap-port', 30005).problem).toMatch(/does not align/);
    const unaligned = annotatedPortFor({ 'sglang.ai/bootstrap-port': '9100,9101' }, 'sglang.ai/bootstrap-port', 30000);
    expect(unaligned.problem).toMatch(/does not align/);
    expect(annotatedPortFor({}, 'sglang.ai/bootstrap-port', 30000)).toEqual({});
  });

  it('prefers triad.io over sglang.ai over the ModelServer over the default, reporting what it ignored', () => {
    const both = { 'triad.io/bootstrap-port': '9001', 'sglang.ai/bootstrap-port': '9002' };
    expect(staticBootstrapPort(both, 30000, 9003, 8998)).toEqual({ port: 9001, source: 'annotation:triad.io', problems: [] });
    const bad = { 'triad.io/bootstrap-port': 'x', 'sglang.ai/bootstrap-port': '9002' };
    const problems = [expect.stringContaining("'x'")];
    expect(staticBootstrapPort(bad, 30000, 9003, 8998)).toMatchObject({ port: 9002, source: 'annotation:sglang.ai', problems });
    expect(staticBootstrapPort(undefined, 30000, 9003, 8998)).toEqual({ port: 9003, source: 'model-server', problems: [] });
    expect(staticBootstrapPort(undefined, 30000, undefined, 8998)).toEqual({ port: 8998, source: 'default', problems: [] });
  });
});
