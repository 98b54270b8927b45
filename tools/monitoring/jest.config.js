module.exports = { ...require('../../jest.preset.js'), displayName: 'monitoring', rootDir: __dirname };
