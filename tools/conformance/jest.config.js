module.exports = { ...require('../../jest.preset.js'), displayName: 'conformance', rootDir: __dirname };
