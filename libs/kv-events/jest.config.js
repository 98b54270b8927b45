module.exports = { ...require('../../jest.preset.js'), displayName: 'kv-events', rootDir: __dirname };
