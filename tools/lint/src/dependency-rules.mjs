// What tools/lint/bin/deps.mjs needs to know beyond the imports: root-level script directories and tooling packages.

/** Directories of root-level scripts (not a project) whose imports are root devDependencies. */
export const rootScriptDirs = ['tools/scripts'];

/**
 * Root devDependencies used as commands or by configuration, not imported: where each is used (the file must
 * mention the token), or whose peer dependency it is.
 */
export const toolingDependencies = {
  jest: { file: 'tools/scripts/run-tests.mjs', token: "bin('jest')" },
  '@swc/jest': { file: 'jest.preset.js', token: "'@swc/jest'" },
  '@swc/core': { peerOf: '@swc/jest' },
  typescript: { file: 'tools/scripts/run-tests.mjs', token: 'typescript/bin/tsc' },
  nx: { file: 'package.json', token: 'nx run-many' },
  '@types/node': { file: 'tsconfig.base.json', token: '"node"' },
  '@types/jest': { file: 'tsconfig.base.json', token: '"jest"' },
  prettier: { file: 'package.json', token: 'prettier --write' },
};
