// ESLint flat config; the rules and the local `triad` boundary plugin live in tools/lint.
export { default } from './tools/lint/src/eslint-config.mjs';
