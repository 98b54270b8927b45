module.exports = { ...require('../../jest.preset.js'), displayName: 'connectors', rootDir: __dirname };
