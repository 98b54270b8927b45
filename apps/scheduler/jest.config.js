module.exports = { ...require('../../jest.preset.js'), displayName: 'scheduler', rootDir: __dirname };
