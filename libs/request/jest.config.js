module.exports = { ...require('../../jest.preset.js'), displayName: 'request', rootDir: __dirname };
