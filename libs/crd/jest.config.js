module.exports = { ...require('../../jest.preset.js'), displayName: 'crd', rootDir: __dirname };
