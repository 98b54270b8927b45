const preset = require('../../jest.preset.js');

// The OTLP exporters' HTTP transport loads `http` with a dynamic import(), which jest's module runtime rejects
// without --experimental-vm-modules. Compiling that one package with swc (CommonJS) turns the import into a
// require, so the tests run the real exporter against a real receiver.
const transformIgnorePatterns = preset.transformIgnorePatterns.map((p) => p.replace('(?!(', '(?!(@opentelemetry/otlp-exporter-base|'));

module.exports = { ...preset, displayName: 'telemetry', rootDir: __dirname, transformIgnorePatterns };
