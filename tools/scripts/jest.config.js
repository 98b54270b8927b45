module.exports = {
  ...require('../../jest.preset.js'),
  displayName: 'scripts',
  rootDir: __dirname,
  testMatch: ['<rootDir>/test/**/*.test.mjs'],
};
