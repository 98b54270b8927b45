// One jest run over every project (used by `npm test`); each project also has its own `test` target for nx.
module.exports = {
  // Global options (testTimeout) must sit here: jest ignores them inside `projects` entries.
  testTimeout: 30000,
  projects: ['<rootDir>/apps/*/jest.config.js', '<rootDir>/libs/*/jest.config.js', '<rootDir>/tools/*/jest.config.js'],
};
