module.exports = { ...require('../../jest.preset.js'), displayName: 'kv-indexer', rootDir: __dirname };
