module.exports = { ...require('../../jest.preset.js'), displayName: 'runtime', rootDir: __dirname };
