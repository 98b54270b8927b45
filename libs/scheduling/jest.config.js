module.exports = { ...require('../../jest.preset.js'), displayName: 'scheduling', rootDir: __dirname };
