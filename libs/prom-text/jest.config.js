module.exports = { ...require('../../jest.preset.js'), displayName: 'prom-text', rootDir: __dirname };
