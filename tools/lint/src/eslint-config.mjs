// The workspace's ESLint configuration (the root eslint.config.mjs re-exports it): ESLint's and typescript-eslint's
// recommended rules without type information (fast on small machines), tuned below, plus the `triad` plugin that
// enforces module boundaries from the nx tags.
import js from '@eslint/js';
import { defineConfig } from 'eslint/config';
import globals from 'globals';
import tseslint from 'typescript-eslint';
import triad, { recommendedRules as triadRules } from './eslint-plugin/index.mjs';

export default defineConfig(
  {
    ignores: ['**/node_modules/**', '**/dist/**', '**/coverage/**', '.test-results/**', '.nx/**', '**/__fixtures__/**'],
  },
  js.configs.recommended,
  tseslint.configs.recommended,
  {
    languageOptions: { ecmaVersion: 2023, sourceType: 'module', globals: { ...globals.node } },
    linterOptions: { reportUnusedDisableDirectives: 'error' },
    plugins: { triad },
    rules: {
      ...triadRules,
      // Services bind some variables late on purpose (a metrics callback reads the bus before it is connected).
      'prefer-const': ['error', { ignoreReadBeforeAssign: true }],
      // Lazy require() is the design: the CLI loads a command's code only when it runs (tsx's hook covers require
      // only), and optional native or heavy modules (zeromq, tokenizers, ioredis, jose, OTel SDK) load on first use.
      '@typescript-eslint/no-require-imports': 'off',
      // `_`-prefixed names mark parameters a signature needs but the body does not use.
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none', ignoreRestSiblings: true },
      ],
    },
  },
  {
    // CommonJS files: jest configs, the `triad` launcher.
    files: ['**/*.cjs', '**/*.js'],
    languageOptions: { sourceType: 'commonjs', globals: { ...globals.node } },
  },
  {
    files: ['**/*.test.ts', '**/*.test.mjs', '**/test/**/*.ts'],
    languageOptions: { globals: { ...globals.jest } },
  },
);
