module.exports = { ...require('../../jest.preset.js'), displayName: 'webhook', rootDir: __dirname };
