// The workspace's ESLint configuration (the root eslint.config.mjs re-exports it): ESLint's and typescript-eslint's
// recommended rules without type information (fast on small machines), tuned below, plus the `triad` plugin that
// enforces module boundaries from the nx tags.
import { fileURLToPath } from 'node:url';
import js from '@eslint/js';
import { defineConfig } from 'eslint/config';
import globals from 'globals';
import tseslint from 'typescript-eslint';
import triad, { recommendedRules as triadRules } from './eslint-plugin/index.mjs';

const workspaceRoot = fileURLToPath(new URL('../../..', import.meta.url));

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
  // Type-aware rules (TRIAD_LINT_TYPED=1, not yet in `npm test`: no-unnecessary-type-assertion still has findings, and
  // the typed pass costs about 5 CPU-minutes over the workspace where the plain one costs well under one).
  ...(process.env.TRIAD_LINT_TYPED === '1'
    ? [
        {
          files: ['**/*.ts'],
          languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: workspaceRoot } },
          rules: {
            '@typescript-eslint/no-floating-promises': 'error',
            '@typescript-eslint/no-misused-promises': 'error',
            '@typescript-eslint/no-unnecessary-type-assertion': 'error',
          },
        },
      ]
    : []),
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
