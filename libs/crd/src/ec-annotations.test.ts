import { ecControlOf, normalizeEcAddress } from './ec-annotations';

describe('vLLM EPD consumer annotations', () => {
  it('normalizes host:port and tcp://host:port addresses, refusing anything else', () => {
    expect(normalizeEcAddress('10.0.0.1:14579')).toBe('tcp://10.0.0.1:14579');
    expect(normalizeEcAddress(' tcp://[fd00::1]:14579 ')).toBe('tcp://[fd00::1]:14579');
    expect(normalizeEcAddress('tcp://host')).toBeUndefined();
    expect(normalizeEcAddress('http://h:1')).toBeUndefined();
    expect(normalizeEcAddress('h:0')).toBeUndefined();
  });

  it('derives one address per DP rank from the base port and the pod IP', () => {
    expect(ecControlOf({ 'triad.io/ec-control-port': '14579' }, '10.0.0.5')).toEqual({ addresses: ['tcp://10.0.0.5:14579'], problems: [] });
    expect(ecControlOf({ 'triad.io/ec-control-port': '14579', 'triad.io/dp-size': '3' }, 'fd00::5')).toEqual({
      dpSize: 3,
      addresses: ['tcp://[fd00::5]:14579', 'tcp://[fd00::5]:14580', 'tcp://[fd00::5]:14581'],
      problems: [],
    });
    expect(ecControlOf({ 'triad.io/dp-size': '2' }, '10.0.0.5')).toEqual({ dpSize: 2, problems: [] });
    expect(ecControlOf(undefined, '10.0.0.5')).toEqual({ problems: [] });
  });

  it('prefers an explicit list, whose length gives the DP size unless one is declared', () => {
    const both = { 'triad.io/ec-control-addresses': 'h:1,h:3', 'triad.io/ec-control-port': '9000' };
    expect(ecControlOf(both, '10.0.0.5')).toEqual({ dpSize: 2, addresses: ['tcp://h:1', 'tcp://h:3'], problems: [] });
  });

  it('ignores malformed values with a reason', () => {
    expect(ecControlOf({ 'triad.io/dp-size': '0' }, 'ip').problems).toEqual([expect.stringContaining("'0' is not an integer in 1..64")]);
    expect(ecControlOf({ 'triad.io/ec-control-addresses': 'h:1,,h:2' }, 'ip')).toEqual({
      problems: [expect.stringContaining('is not a comma-separated list')],
    });
    expect(ecControlOf({ 'triad.io/ec-control-port': '65535', 'triad.io/dp-size': '2' }, 'ip')).toEqual({
      dpSize: 2,
      problems: [expect.stringContaining('passes port 65535')],
    });
  });
});
