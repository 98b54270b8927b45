module.exports = { ...require('../../jest.preset.js'), displayName: 'engine-sim', rootDir: __dirname };
