// Shared jest settings. swc compiles TypeScript (and the ESM-only Kubernetes client and its deps) to CommonJS,
// which jest on Node 20 needs; type-checking is a separate `tsc` target.
module.exports = {
  testEnvironment: 'node',
  testMatch: ['<rootDir>/src/**/*.test.ts', '<rootDir>/test/**/*.test.ts', '<rootDir>/src/**/*.test.mjs'],
  moduleFileExtensions: ['ts', 'js', 'mjs', 'cjs', 'json'],
  transform: {
    '^.+\\.ts$': ['@swc/jest', { jsc: { parser: { syntax: 'typescript' }, target: 'es2022' }, module: { type: 'commonjs' } }],
    '^.+\\.m?js$': ['@swc/jest', { jsc: { parser: { syntax: 'ecmascript' }, target: 'es2022' }, module: { type: 'commonjs' } }],
  },
  transformIgnorePatterns: [
    '/node_modules/(?!(@opentelemetry/otlp-exporter-base|@kubernetes/client-node|openid-client|oauth4webapi|jose|jsonpath-plus|@jsep-plugin|jsep|rfc4648|p-limit|yocto-queue)/)',
  ],
  testTimeout: 30000,
};
