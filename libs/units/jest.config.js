module.exports = { ...require('../../jest.preset.js'), displayName: 'units', rootDir: __dirname };
