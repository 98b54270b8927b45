// The workspace's ESLint configuration (the root eslint.config.mjs re-exports it): ESLint's and typescript-eslint's
// recommended rules, tuned below, three type-aware rules, plus the `triad` plugin that enforces module boundaries
// from the nx tags.
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
  // Type-aware rules: promises that are neither awaited nor handled, promises where a plain value is expected (an
  // async callback in a void slot), and assertions the type checker proves unnecessary. They need a TypeScript
  // program: the project service builds one per project tsconfig (an editor, one project's `nx lint`);
  // tools/lint/bin/lint.mjs --all swaps in one program from the root tsconfig.json, for time and memory.
  {
    files: ['**/*.ts'],
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: workspaceRoot } },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/no-unnecessary-type-assertion': 'error',
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
